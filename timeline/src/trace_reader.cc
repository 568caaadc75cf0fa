// ReadChromeTrace: a strict, allocation-light JSON reader for Strata traces,
// parsing in one pass into the timeline directly (a million-op trace is
// ~200 MB). Kept hand-written because a library is slower at this: on a
// 95 MB trace (bench/trace_bench, interleaved, 5 rounds) this reader builds
// and validates the timeline at 410 MB/s (median), nlohmann-json's SAX
// interface merely collecting each event's fields reaches 0.35x that, and
// its DOM 0.13x.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "strata/core/file_input.h"
#include "strata/timeline/trace_io.h"

namespace strata {
namespace {

struct ParseError {
  size_t pos;
  std::string msg;
};

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}

  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool Peek(char c) {
    Ws();
    return i_ < s_.size() && s_[i_] == c;
  }
  void Expect(char c) {
    Ws();
    if (i_ >= s_.size()) throw ParseError{i_, std::string("unexpected end of file (truncated?), expected '") + c + "'"};
    if (s_[i_] != c) throw ParseError{i_, std::string("expected '") + c + "', found '" + s_[i_] + "'"};
    ++i_;
  }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++i_;
    return true;
  }
  // A string without escapes as a view into the text (no allocation);
  // strings with escapes are decoded into `scratch_`.
  std::string_view View() {
    Ws();
    if (i_ < s_.size() && s_[i_] == '"') {
      const size_t start = i_ + 1;
      const void* q = std::memchr(s_.data() + start, '"', s_.size() - start);
      if (q != nullptr) {
        const size_t end = static_cast<size_t>(static_cast<const char*>(q) - s_.data());
        std::string_view v = s_.substr(start, end - start);
        if (v.find('\\') == std::string_view::npos && !HasControl(v)) {
          i_ = end + 1;
          return v;
        }
      }
    }
    scratch_ = String();
    return scratch_;
  }
  static bool HasControl(std::string_view v) {
    for (char c : v)
      if (static_cast<unsigned char>(c) < 0x20) return true;
    return false;
  }
  std::string String() {
    Expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) throw ParseError{i_, "unexpected end of file inside a string (truncated?)"};
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) throw ParseError{i_ - 1, "control character in a string"};
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) throw ParseError{i_, "unexpected end of file inside a string (truncated?)"};
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) throw ParseError{i_, "truncated \\u escape"};
          unsigned v = 0;
          auto r = std::from_chars(s_.data() + i_, s_.data() + i_ + 4, v, 16);
          if (r.ptr != s_.data() + i_ + 4) throw ParseError{i_, "bad \\u escape"};
          i_ += 4;
          if (v < 0x80) {
            out += static_cast<char>(v);
          } else if (v < 0x800) {
            out += static_cast<char>(0xC0 | (v >> 6));
            out += static_cast<char>(0x80 | (v & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (v >> 12));
            out += static_cast<char>(0x80 | ((v >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (v & 0x3F));
          }
          break;
        }
        default:
          throw ParseError{i_ - 1, std::string("bad escape '\\") + e + "'"};
      }
    }
  }
  double Number() {
    Ws();
    if (i_ >= s_.size()) throw ParseError{i_, "unexpected end of file (truncated?), expected a number"};
    double v = 0;
    auto r = std::from_chars(s_.data() + i_, s_.data() + s_.size(), v);
    if (r.ec != std::errc() || r.ptr == s_.data() + i_) throw ParseError{i_, "expected a number"};
    // from_chars reads "nan" and "inf", which JSON does not have; a NaN
    // time would pass every ordering check and loop the GUI's aggregation.
    if (!std::isfinite(v)) throw ParseError{i_, "not a finite number (JSON has no NaN or Infinity)"};
    i_ = static_cast<size_t>(r.ptr - s_.data());
    return v;
  }
  int64_t Integer() {
    Ws();
    const size_t at = i_;
    const double v = Number();
    // In range before the cast: casting a double outside int64 is undefined
    // (UBSan found 6.9e44 here under the fuzz test).
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0) || v != std::trunc(v))
      throw ParseError{at, "expected an integer (of at most 64 bits)"};
    return static_cast<int64_t>(v);
  }
  int Int32() {
    Ws();
    const size_t at = i_;
    const int64_t v = Integer();
    if (v < -2147483647 || v > 2147483647) throw ParseError{at, "expected an integer of at most 32 bits"};
    return static_cast<int>(v);
  }
  // Skips any JSON value (for keys we do not use).
  void Skip(int depth = 0) {
    if (depth > 64) throw ParseError{i_, "nesting too deep"};
    Ws();
    if (i_ >= s_.size()) throw ParseError{i_, "unexpected end of file (truncated?)"};
    const char c = s_[i_];
    if (c == '"') {
      String();
    } else if (c == '{') {
      ++i_;
      if (Eat('}')) return;
      do {
        String();
        Expect(':');
        Skip(depth + 1);
      } while (Eat(','));
      Expect('}');
    } else if (c == '[') {
      ++i_;
      if (Eat(']')) return;
      do Skip(depth + 1);
      while (Eat(','));
      Expect(']');
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else if (s_.compare(i_, 5, "false") == 0) {
      i_ += 5;
    } else {
      Number();
    }
  }
  // Iterates an object's keys, calling fn(key) which must consume the value.
  // The key is a view valid until the next string is read.
  template <typename Fn>
  void Object(Fn&& fn) {
    Expect('{');
    if (Eat('}')) return;
    do {
      key_ = View();
      Expect(':');
      fn(std::string_view(key_));
    } while (Eat(','));
    Expect('}');
  }
  template <typename Fn>
  void Array(Fn&& fn) {
    Expect('[');
    if (Eat(']')) return;
    do fn();
    while (Eat(','));
    Expect(']');
  }
  size_t pos() const { return i_; }
  bool AtEnd() {
    Ws();
    return i_ >= s_.size();
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
  std::string scratch_;
  std::string key_;  // keys outlive nested reads
};

struct Event {
  std::string name, cat, ph;
  double ts = -1, dur = -1;
  int64_t pid = -1, tid = -1;
  bool has_ts = false, has_dur = false, has_pid = false, has_tid = false;
  // args of X events
  int64_t op = -1, layer = -1, bytes = 0;
  double flops = 0;
  bool has_op = false;
  Bytes kinds[kNumStateKinds];
  bool kind_seen[kNumStateKinds] = {};
};

void ReadOtherData(Cursor& c, Timeline& t, bool* is_strata) {
  c.Object([&](std::string_view k) {
    if (k == "format") {
      *is_strata = c.String() == "strata.trace";
    } else if (k == "version") {
      if (c.Integer() != 1) throw ParseError{c.pos(), "unsupported trace version"};
    } else if (k == "source") {
      t.source = c.String();
    } else if (k == "scenario") {
      t.scenario = c.String();
    } else if (k == "world_size") {
      t.world_size = c.Int32();
    } else if (k == "nodes") {
      t.nodes = c.Int32();
    } else if (k == "gpus_per_node") {
      t.gpus_per_node = c.Int32();
    } else if (k == "pipeline") {
      t.pipeline = c.Int32();
    } else if (k == "iteration_s") {
      t.iteration_s = c.Number();
    } else if (k == "model_flops") {
      t.model_flops = c.Number();
    } else if (k == "samples_per_iteration") {
      t.samples_per_iteration = c.Integer();
    } else if (k == "capacity_bytes") {
      c.Object([&](std::string_view tier) {
        auto tr = ParseTier(tier);
        const int64_t v = c.Integer();
        if (tr) t.capacity[static_cast<int>(*tr)] = Bytes(v);
      });
    } else if (k == "strata_version") {
      t.strata_version = c.String();
    } else if (k == "scenario_path") {
      t.scenario_path = c.String();
    } else if (k == "notes") {
      c.Array([&] { t.notes.push_back(c.String()); });
    } else if (k == "overrides") {
      c.Object([&](std::string_view key) {
        std::string name(key);
        t.overrides.emplace_back(std::move(name), c.String());
      });
    } else if (k == "critical_rank") {
      t.critical_rank = c.Int32();
    } else if (k == "critical_path") {
      c.Array([&] { t.critical_path.push_back(static_cast<OpId>(c.Integer())); });
    } else if (k == "critical_path_ranks") {
      c.Array([&] { t.critical_path_ranks.push_back(static_cast<int>(c.Integer())); });
    } else {
      c.Skip();
    }
  });
}

Event ReadEvent(Cursor& c) {
  Event e;
  c.Object([&](std::string_view k) {
    if (k == "name") {
      e.name = c.View();
    } else if (k == "cat") {
      e.cat = c.View();
    } else if (k == "ph") {
      e.ph = c.View();
    } else if (k == "ts") {
      e.ts = c.Number();
      e.has_ts = true;
    } else if (k == "dur") {
      e.dur = c.Number();
      e.has_dur = true;
    } else if (k == "pid") {
      e.pid = c.Integer();
      e.has_pid = true;
    } else if (k == "tid") {
      e.tid = c.Integer();
      e.has_tid = true;
    } else if (k == "args") {
      c.Object([&](std::string_view a) {
        StateKind sk;
        if (a == "op") {
          e.op = c.Integer();
          e.has_op = true;
        } else if (a == "layer") {
          e.layer = c.Integer();
        } else if (a == "bytes") {
          e.bytes = c.Integer();
        } else if (a == "flops") {
          e.flops = c.Number();
        } else if (ParseStateKind(a, &sk)) {
          e.kinds[static_cast<int>(sk)] = Bytes(c.Integer());
          e.kind_seen[static_cast<int>(sk)] = true;
        } else {
          c.Skip();
        }
      });
    } else {
      c.Skip();
    }
  });
  return e;
}

// infos: one OpInfo per distinct op (its id, kind, stream, layer, FLOPs,
// name and bytes): the instances of an op that move the same bytes share
// it, as BuildTimeline's do.
// The longest time a trace holds (about 116 days, in its microseconds):
// beyond it a timeline cannot be drawn or summed to the microsecond.
constexpr double kMaxTraceUs = 1e13;

using InfoIndex = std::unordered_map<OpId, std::vector<const OpInfo*>>;  // by op id: those seen (one, unless edited)
void AddEvent(Event& e, size_t at, Timeline& t, std::map<std::pair<int, int>, size_t>& series, InfoIndex& infos) {
  if (e.ph == "M" || e.ph == "s" || e.ph == "f") return;  // metadata; flow arrows (the critical path)
  if (e.ph == "X") {
    if (!e.has_ts || !e.has_dur || !e.has_pid || !e.has_tid || !e.has_op)
      throw ParseError{at, "op event without ts, dur, pid, tid or args.op"};
    if (e.dur < 0 || e.ts < 0) throw ParseError{at, "op event with a negative time"};
    if (e.ts > kMaxTraceUs || e.dur > kMaxTraceUs)
      throw ParseError{at, "op event past the longest time a trace holds (1e13 us, about 116 days)"};
    if (e.tid < 0 || e.tid >= kNumStreams)
      throw ParseError{at, "op event on unknown stream tid " + std::to_string(e.tid)};
    if (e.pid < 0 || e.pid >= t.world_size || e.layer < -1 || e.layer > 2147483647)
      throw ParseError{at, "op event of rank (pid) " + std::to_string(e.pid) + " or layer " + std::to_string(e.layer) +
                               " outside the trace's world of " + std::to_string(t.world_size) + " ranks"};
    TimelineOp op;
    op.rank = static_cast<int>(e.pid);
    op.op = static_cast<OpId>(e.op);
    OpInfo info;
    if (!ParseOpKind(e.cat, &info.kind)) throw ParseError{at, "op event with unknown cat '" + e.cat + "'"};
    info.stream = static_cast<Stream>(e.tid);
    info.layer = static_cast<int>(e.layer);
    info.flops = e.flops;
    info.bytes = Bytes(e.bytes);
    std::vector<const OpInfo*>& seen = infos[op.op];
    for (const OpInfo* i : seen)
      if (i->kind == info.kind && i->stream == info.stream && i->layer == info.layer && i->flops == info.flops &&
          i->bytes.v == e.bytes && i->name == e.name)
        op.info = i;
    if (op.info == &kNoOpInfo) {
      info.name = e.name;
      op.info = t.Intern(std::move(info));
      seen.push_back(op.info);
    }
    op.start_s = e.ts * 1e-6;
    op.end_s = (e.ts + e.dur) * 1e-6;
    t.ops.push_back(std::move(op));
    return;
  }
  if (e.ph == "C") {
    if (!e.has_ts || !e.has_pid) throw ParseError{at, "counter event without ts or pid"};
    if (e.ts < 0 || e.ts > kMaxTraceUs) throw ParseError{at, "counter event at a negative time or past 1e13 us"};
    Tier tier;
    if (e.name == "gpu memory")
      tier = Tier::kGpu;
    else if (e.name == "cpu memory")
      tier = Tier::kCpu;
    else if (e.name == "nvme memory")
      tier = Tier::kNvme;
    else
      return;  // someone else's counter: ignore
    const int owner = static_cast<int>(tier == Tier::kGpu ? e.pid : e.pid - kNodePidBase);
    auto key = std::make_pair(static_cast<int>(tier), owner);
    auto it = series.find(key);
    if (it == series.end()) {
      it = series.emplace(key, t.memory.size()).first;
      MemorySeries s;
      s.tier = tier;
      s.owner = owner;
      t.memory.push_back(std::move(s));
    }
    MemorySeries& s = t.memory[it->second];
    MemoryPoint p;
    p.t = e.ts * 1e-6;
    std::copy(std::begin(e.kinds), std::end(e.kinds), std::begin(p.by_kind));
    if (!s.points.empty() && p.t < s.points.back().t) throw ParseError{at, "memory counter goes back in time"};
    s.peak = std::max(s.peak, p.total());
    s.points.push_back(p);
    return;
  }
  throw ParseError{at, "unsupported event phase '" + e.ph + "'"};
}

std::string Where(std::string_view text, size_t pos, const std::string& source) {
  pos = std::min(pos, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return source + ":" + std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace

Result<Timeline> ReadChromeTrace(std::string_view text, const std::string& source) {
  Timeline t;
  bool is_strata = false, saw_other = false, saw_events = false;
  std::map<std::pair<int, int>, size_t> series;
  InfoIndex infos;
  Cursor c(text);
  try {
    if (c.AtEnd()) return Status::InvalidArgument(source + ": empty file, not a Strata trace");
    if (!c.Peek('{'))
      return Status::InvalidArgument(source +
                                     ": not a Strata trace (a Chrome trace is a JSON object; this file starts with '" +
                                     std::string(1, text[c.pos()]) + "')");
    c.Object([&](std::string_view k) {
      if (k == "otherData") {
        saw_other = true;
        ReadOtherData(c, t, &is_strata);
      } else if (k == "traceEvents") {
        if (!is_strata)  // Strata writes otherData first; anything else is foreign
          throw ParseError{c.pos(), saw_other ? "not a Strata trace: otherData.format is not 'strata.trace'"
                                              : "not a Strata trace: no otherData.format before traceEvents"};
        saw_events = true;
        c.Expect('[');
        if (!c.Eat(']')) {
          do {
            const size_t at = c.pos();
            Event e = ReadEvent(c);
            AddEvent(e, at, t, series, infos);
          } while (c.Eat(','));
          c.Expect(']');
        }
      } else {
        c.Skip();
      }
    });
    if (!c.AtEnd()) throw ParseError{c.pos(), "unexpected data after the trace object"};
  } catch (const ParseError& e) {
    return Status::InvalidArgument(Where(text, e.pos, source) + ": " + e.msg);
  }
  if (!is_strata) return Status::InvalidArgument(source + ": not a Strata trace: otherData.format is missing");
  if (!saw_events) return Status::InvalidArgument(source + ": no traceEvents");
  if (t.gpus_per_node <= 0 || t.world_size <= 0 || t.nodes <= 0)
    return Status::InvalidArgument(source + ": otherData has a non-positive world size");
  if (t.pipeline <= 0 || t.world_size % t.pipeline != 0)
    return Status::InvalidArgument(source + ": otherData.pipeline must be positive and divide world_size");
  if (t.iteration_s < 0 || t.iteration_s > kMaxTraceUs * 1e-6 || t.model_flops < 0 || t.samples_per_iteration < 0)
    return Status::InvalidArgument(source +
                                   ": otherData.iteration_s, model_flops or samples_per_iteration is negative "
                                   "(or the iteration past 1e7 s)");
  for (const Bytes& cap : t.capacity)
    if (cap.v < 0) return Status::InvalidArgument(source + ": otherData.capacity_bytes holds a negative size");
  auto before = [](const TimelineOp& a, const TimelineOp& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.start_s != b.start_s) return a.start_s < b.start_s;
    return a.op < b.op;
  };
  // Strata writes ops in this order already; sort only foreign orderings.
  if (!std::is_sorted(t.ops.begin(), t.ops.end(), before)) std::stable_sort(t.ops.begin(), t.ops.end(), before);
  std::stable_sort(t.memory.begin(), t.memory.end(), [](const MemorySeries& a, const MemorySeries& b) {
    return a.tier != b.tier ? a.tier < b.tier : a.owner < b.owner;
  });
  return t;
}

Result<Timeline> ReadChromeTraceFile(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto text, ReadInputFile(path, kTraceFileLimit, "the trace"));
  return ReadChromeTrace(text, path);
}

}  // namespace strata
