#include "yaml_reader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "strata/core/file_input.h"

namespace strata::config {

std::string FormatMark(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

void ErrorSink::Error(const std::string& file, const YAML::Mark& mark, const std::string& msg) {
  errors_.push_back(FormatMark(file, mark) + ": " + msg);
}

std::string ErrorSink::Locate(const std::string& path, const std::string& fallback_file) const {
  if (const std::string* arg = OverrideOf(path)) return *arg;
  std::string p = path;
  while (true) {
    auto it = defined_.find(p);
    if (it != defined_.end()) return FormatMark(it->second.file, it->second.mark);
    auto dot = p.rfind('.');
    if (dot == std::string::npos) break;
    p.resize(dot);
  }
  return fallback_file;
}

void ErrorSink::Forget(const std::string& path) {
  for (auto it = defined_.begin(); it != defined_.end();) {
    const std::string& k = it->first;
    if (k == path || (k.size() > path.size() && k.compare(0, path.size(), path) == 0 && k[path.size()] == '.'))
      it = defined_.erase(it);
    else
      ++it;
  }
}

static size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

Section::Section(ErrorSink& sink, std::string file, YAML::Node node, std::string path, YAML::Mark mark)
    : sink_(sink), file_(std::move(file)), node_(std::move(node)), path_(std::move(path)), mark_(mark) {
  if (!path_.empty()) sink_.Define(path_, {file_, mark_});
  for (auto it = node_.begin(); it != node_.end(); ++it)
    sink_.Define(Key(it->first.Scalar().c_str()), {file_, it->second.Mark()});
}

void Section::Fail(const YAML::Node& at, const std::string& key, const std::string& msg) {
  const std::string path = Key(key.c_str());
  if (const std::string* arg = sink_.OverrideOf(path)) return sink_.ErrorAt(*arg, path + ": " + msg);
  sink_.Error(file_, at.IsDefined() ? at.Mark() : mark_, path + ": " + msg);
}

std::optional<YAML::Node> Section::Scalar(const char* key, bool required, const char* what) {
  known_.insert(key);
  const YAML::Node& self = node_;
  YAML::Node n = self[key];
  if (!n) {
    if (required) sink_.Error(file_, mark_, "missing required key '" + Key(key) + "' (" + what + ")");
    return std::nullopt;
  }
  if (!n.IsScalar()) {
    Fail(n, key,
         std::string("expected ") + what + ", got a " +
             (n.IsMap()        ? "mapping"
              : n.IsSequence() ? "list"
                               : "null value"));
    return std::nullopt;
  }
  return n;
}

// Parses a YAML scalar as an integer; accepts "1e3" when integral.
static std::optional<int64_t> AsInteger(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.2e18) return std::nullopt;
  return static_cast<int64_t>(d);
}

bool Section::Int64(const char* key, int64_t* out, bool required) {
  auto n = Scalar(key, required, "an integer");
  if (!n) return false;
  auto v = AsInteger(n->Scalar());
  if (!v) {
    Fail(*n, key, "expected an integer, got '" + n->Scalar() + "'");
    return false;
  }
  *out = *v;
  return true;
}

bool Section::Int(const char* key, int* out, bool required) {
  int64_t v = 0;
  if (!Int64(key, &v, required)) return false;
  if (v < -2147483647 || v > 2147483647) {
    Fail(node_[key], key, "value " + std::to_string(v) + " is out of range");
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

bool Section::Double(const char* key, double* out, bool required) {
  auto n = Scalar(key, required, "a number");
  if (!n) return false;
  auto v = ParseScaledNumber(n->Scalar());
  if (!v.ok()) {
    Fail(*n, key, "expected a number, got '" + n->Scalar() + "'");
    return false;
  }
  *out = *v;
  return true;
}

bool Section::Bool(const char* key, bool* out, bool required) {
  auto n = Scalar(key, required, "true or false");
  if (!n) return false;
  bool v = false;
  if (!YAML::convert<bool>::decode(*n, v)) {
    Fail(*n, key, "expected true or false, got '" + n->Scalar() + "'");
    return false;
  }
  *out = v;
  return true;
}

bool Section::String(const char* key, std::string* out, bool required) {
  auto n = Scalar(key, required, "a string");
  if (!n) return false;
  *out = n->Scalar();
  return true;
}

bool Section::Path(const char* key, std::string* out, bool required) {
  auto n = Scalar(key, required, "a path");
  if (!n) return false;
  bool flag = false;
  const std::string& text = n->Scalar();
  char* end = nullptr;
  const bool number = !text.empty() && (std::strtod(text.c_str(), &end), *end == '\0');
  const bool plain = n->Tag() == "?";  // unquoted: YAML resolves its type
  if (plain && (number || YAML::convert<bool>::decode(*n, flag))) {
    Fail(*n, key,
         "expected a path, got '" + n->Scalar() + "', which reads as a " + (number ? "number" : "boolean") +
             "; quote it (\"" + n->Scalar() + "\") if it names a directory");
    return false;
  }
  *out = n->Scalar();
  return true;
}

bool Section::PathList(const char* key, std::vector<std::string>* out) {
  known_.insert(key);
  const YAML::Node& self = node_;
  YAML::Node n = self[key];
  if (!n) return false;
  std::vector<std::string> v;
  if (n.IsScalar()) {
    const std::string& text = n.Scalar();
    for (size_t at = 0; at <= text.size();) {
      const size_t colon = std::min(text.find(':', at), text.size());
      if (colon > at) v.push_back(text.substr(at, colon - at));
      at = colon + 1;
    }
  } else if (n.IsSequence()) {
    for (const auto& item : n) {
      if (!item.IsScalar() || item.Scalar().empty()) {
        Fail(item, key, "expected a directory path in the list");
        return false;
      }
      v.push_back(item.Scalar());
    }
  } else {
    Fail(n, key, "expected a list of directory paths, or paths joined by ':'");
    return false;
  }
  *out = std::move(v);
  return true;
}

template <typename T, typename Parse>
bool Section::Quantity(const char* key, T* out, bool required, const char* what, Parse parse) {
  auto n = Scalar(key, required, what);
  if (!n) return false;
  if (n->Scalar() == "auto") {
    Fail(*n, key, "'auto' is filled in by the Hugging Face Trainer; give a value");
    return false;
  }
  auto r = parse(n->Scalar());
  if (!r.ok()) {
    Fail(*n, key, r.status().message());
    return false;
  }
  *out = *r;
  return true;
}

bool Section::Size(const char* key, Bytes* out, bool required) {
  return Quantity(key, out, required, "a size such as 32GiB", ParseBytes);
}
bool Section::Rate(const char* key, Bandwidth* out, bool required) {
  return Quantity(key, out, required, "a bandwidth such as 16GB/s", ParseBandwidth);
}
bool Section::Flops(const char* key, FlopRate* out, bool required) {
  return Quantity(key, out, required, "a FLOP rate such as 125TFLOPS", ParseFlopRate);
}
bool Section::Duration(const char* key, Seconds* out, bool required) {
  return Quantity(key, out, required, "a duration such as 100us or 2ms", ParseSeconds);
}
bool Section::Count(const char* key, Elements* out, bool required) {
  return Quantity(key, out, required, "an element count such as 1e8", ParseElements);
}

bool Section::Int64List(const char* key, std::vector<int64_t>* out, bool required) {
  known_.insert(key);
  const YAML::Node& self = node_;
  YAML::Node n = self[key];
  if (!n) {
    if (required) sink_.Error(file_, mark_, "missing required key '" + Key(key) + "' (a list of integers)");
    return false;
  }
  if (!n.IsSequence()) {
    Fail(n, key, "expected a list of integers such as [1000, 1000, 10]");
    return false;
  }
  std::vector<int64_t> v;
  bool ok = true;
  for (const auto& item : n) {
    auto x = item.IsScalar() ? AsInteger(item.Scalar()) : std::nullopt;
    if (!x) {
      Fail(item, key,
           "expected an integer in the list, got '" + (item.IsScalar() ? item.Scalar() : std::string("a collection")) +
               "'");
      ok = false;
    } else {
      v.push_back(*x);
    }
  }
  if (ok) *out = std::move(v);
  return ok;
}

std::optional<int> Section::Choice(const char* key, std::initializer_list<const char*> choices, bool required) {
  std::string what = "one of";
  std::vector<std::string> names;
  for (const char* c : choices) {
    what += std::string(" ") + c;
    names.emplace_back(c);
  }
  auto n = Scalar(key, required, what.c_str());
  if (!n) return std::nullopt;
  const std::string v = n->Scalar();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == v) return static_cast<int>(i);
  std::string msg = "'" + v + "' is not " + what;
  if (auto s = DidYouMean(v, names)) msg += "; did you mean '" + *s + "'?";
  Fail(*n, key, msg);
  return std::nullopt;
}

std::optional<Section> Section::Sub(const char* key, bool required) {
  known_.insert(key);
  const YAML::Node& self = node_;
  YAML::Node n = self[key];
  if (!n) {
    if (required) sink_.Error(file_, mark_, "missing required section '" + Key(key) + "'");
    return std::nullopt;
  }
  if (n.IsNull()) return std::nullopt;  // "offload_param:" with nothing under it
  if (!n.IsMap()) {
    Fail(n, key, "expected a mapping of keys");
    return std::nullopt;
  }
  return Section(sink_, file_, n, Key(key), n.Mark());
}

void Section::Ignore(std::initializer_list<const char*> keys, const char* why) {
  for (const char* k : keys) {
    known_.insert(k);
    if (why != nullptr && node_[k]) sink_.NotModelled(Key(k), why);
  }
}

void Section::Finish(const char* unknown_why, const char* error_note) {
  std::vector<std::string> candidates(known_.begin(), known_.end());
  std::set<std::string> seen;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string k = it->first.Scalar();
    if (!seen.insert(k).second) {
      sink_.Error(file_, it->first.Mark(), "duplicate key '" + Key(k.c_str()) + "'");
      continue;
    }
    if (known_.count(k)) continue;
    if (unknown_why != nullptr) {
      sink_.NotModelled(Key(k.c_str()), unknown_why);
      continue;
    }
    std::string msg = "unknown key '" + Key(k.c_str()) + "'";
    if (auto s = DidYouMean(k, candidates)) msg += "; did you mean '" + *s + "'?";
    if (error_note != nullptr) msg += " " + std::string(error_note);
    if (const std::string* arg = sink_.OverrideOf(Key(k.c_str())))
      sink_.ErrorAt(*arg, msg);
    else
      sink_.Error(file_, it->first.Mark(), msg);
  }
}

Result<std::string> ReadTextFile(const std::string& path) { return ReadInputFile(path, kConfigFileLimit, "the file"); }

// The line (from 1) where a second YAML document starts, or 0. YAML::Load
// reads the first document and drops the rest without a word; parsing them
// all (LoadAll) to find out took the fuzzer's worst input over 30 s. A
// document marker is a line starting "---" or "..." at column 0 followed
// by a space or the end of the line, which YAML forbids inside a scalar or
// a flow collection, so a scan of the lines finds it: a "---" after the
// first document's content, or content after a "...".
static int SecondDocumentLine(std::string_view text) {
  bool content = false, ended = false;
  int line = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t eol = std::min(text.find('\n', at), text.size());
    const std::string_view l = text.substr(at, eol - at);
    at = eol + 1;
    ++line;
    auto marker = [&](std::string_view m) {
      return l.substr(0, 3) == m && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    };
    const size_t first = l.find_first_not_of(" \t\r");
    const bool blank = first == std::string_view::npos || l[first] == '#';
    if (marker("---")) {
      if (content || ended) return line;
      content = l.find_first_not_of(" \t\r", 3) != std::string_view::npos && l[l.find_first_not_of(" \t\r", 3)] != '#';
      continue;
    }
    if (marker("...")) {
      ended = true;
      continue;
    }
    if (blank || (!content && l[0] == '%')) continue;  // comments, blank lines, directives
    if (ended) return line;
    content = true;
  }
  return 0;
}

std::optional<YAML::Node> LoadNode(std::string_view text, const std::string& file, ErrorSink& sink) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) {
      sink.Error(file, root.Mark(), "expected a mapping of keys at the top level");
      return std::nullopt;
    }
    if (const int line = SecondDocumentLine(text); line > 0) {
      YAML::Mark m;
      m.line = line - 1;
      m.column = 0;
      sink.Error(file, m,
                 "a second YAML document: a scenario or config is one document (nothing after a '---' or "
                 "'...' that follows it)");
      return std::nullopt;
    }
    return root;
  } catch (const YAML::Exception& e) {
    sink.Error(file, e.mark, "syntax error: " + e.msg);
    return std::nullopt;
  }
}

std::string ResolveBeside(const std::string& source, const std::string& path) {
  const auto slash = source.find_last_of('/');
  if (path.empty() || path.front() == '/' || slash == std::string::npos || source.rfind("builtin:", 0) == 0)
    return path;
  return source.substr(0, slash + 1) + path;
}

void ApplyOverride(YAML::Node root, const std::string& path, const std::string& value) {
  YAML::Node cur = root;
  size_t pos = 0;
  for (size_t dot; (dot = path.find('.', pos)) != std::string::npos; pos = dot + 1) {
    YAML::Node child = cur[path.substr(pos, dot - pos)];
    if (!child.IsMap()) child = YAML::Node(YAML::NodeType::Map);
    cur.reset(child);
  }
  cur[path.substr(pos)] = value;
}

std::optional<YAML::Node> LoadFileNode(const std::string& path, ErrorSink& sink, bool strict_json) {
  auto text = ReadTextFile(path);
  if (!text.ok()) {
    sink.Error(path, YAML::Mark::null_mark(), text.status().message());
    return std::nullopt;
  }
  if (strict_json) {
    // YAML is a superset of JSON: yaml-cpp alone would take a trailing
    // comma, single quotes or trailing text that DeepSpeed's json.load and
    // the Hub's loaders refuse. Check the JSON first, then read it as YAML
    // for the keys' line and column.
    try {
      (void)nlohmann::json::parse(*text);
    } catch (const nlohmann::json::parse_error& e) {
      YAML::Mark at;
      at.pos = static_cast<int>(e.byte > 0 ? e.byte - 1 : 0);
      at.line = 0;
      at.column = 0;
      for (size_t i = 0; i < static_cast<size_t>(at.pos) && i < text->size(); ++i) {
        if ((*text)[i] == '\n')
          ++at.line, at.column = 0;
        else
          ++at.column;
      }
      std::string why = e.what();
      const auto colon = why.find(": ", why.find("parse error"));
      if (colon != std::string::npos) why = why.substr(colon + 2);
      sink.Error(path, at, "not valid JSON (" + why + ")");
      return std::nullopt;
    } catch (const nlohmann::json::exception& e) {
      // A number past double's range (out_of_range 406; found by
      // deepspeed_fuzz: it escaped as an uncaught exception).
      std::string why = e.what();
      if (const auto sp = why.find("] "); sp != std::string::npos) why = why.substr(sp + 2);
      if (why.size() > 120) why = why.substr(0, 120) + "...";
      sink.Error(path, YAML::Mark::null_mark(), "not valid JSON (" + why + ")");
      return std::nullopt;
    }
  }
  return LoadNode(*text, path, sink);
}

std::optional<YAML::Node> LoadHardwareFile(const std::string& path,
                                           const std::vector<std::pair<std::string, std::string>>& overrides,
                                           ErrorSink& sink) {
  auto hw = LoadFileNode(path, sink);
  if (hw)
    for (const auto& [key, value] : overrides)
      if (key.rfind("hardware.", 0) == 0) ApplyOverride(*hw, key, value);
  return hw;
}

}  // namespace strata::config
