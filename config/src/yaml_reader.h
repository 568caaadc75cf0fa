// Reading YAML into options structs with precise errors (private to config).
//
// A Section wraps one YAML mapping at a dotted key path. Each getter consumes
// a key; Finish() reports every key nobody asked for as unknown, with a "did
// you mean" suggestion. All errors go to the shared ErrorSink as
// "file:line:column: message" (yaml-cpp marks are 0-based; we print 1-based).
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/status.h"
#include "strata/core/units.h"

namespace strata::config {

struct SourcePos {
  std::string file;
  YAML::Mark mark;
};

// Collects errors and where each dotted key path was defined.
class ErrorSink {
 public:
  void Error(const std::string& file, const YAML::Mark& mark, const std::string& msg);
  void Define(const std::string& path, SourcePos pos) { defined_[path] = std::move(pos); }
  // Location of `path`, or of its nearest defined ancestor, or the file start.
  std::string Locate(const std::string& path, const std::string& fallback_file) const;
  // Removes definitions at or below `path` (a section replaced by another file).
  void Forget(const std::string& path);
  const std::vector<std::string>& errors() const { return errors_; }
  // A key that was given but changes nothing Strata models: its dotted path
  // and why. Reported together, in one warning (NotModelledWarning).
  void NotModelled(const std::string& path, const std::string& why) { not_modelled_.emplace_back(path, why); }
  const std::vector<std::pair<std::string, std::string>>& not_modelled() const { return not_modelled_; }
  // A --set override of `path` (its argument, "--set 'KEY=VALUE'"): an error
  // at that key names the argument, not a place in the file it replaced.
  void Override(const std::string& path, std::string argument) { overrides_[path] = std::move(argument); }
  const std::string* OverrideOf(const std::string& path) const {
    auto it = overrides_.find(path);
    return it == overrides_.end() ? nullptr : &it->second;
  }
  // An error at a place given as text (an override's argument).
  void ErrorAt(const std::string& where, const std::string& msg) { errors_.push_back(where + ": " + msg); }
  // Something the user should know that is not an error (a default that
  // matters): each becomes a warning of its own.
  void Warn(std::string msg) { warnings_.push_back(std::move(msg)); }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<std::string> errors_;
  std::vector<std::pair<std::string, std::string>> not_modelled_;
  std::vector<std::string> warnings_;
  std::map<std::string, SourcePos> defined_;
  std::map<std::string, std::string> overrides_;
};

std::string FormatMark(const std::string& file, const YAML::Mark& mark);
// A file's bytes, or an error naming the path and errno.
Result<std::string> ReadTextFile(const std::string& path);
// Loads YAML (or JSON, which yaml-cpp reads as flow YAML) into a node; syntax
// errors go to the sink with their position.
std::optional<YAML::Node> LoadNode(std::string_view text, const std::string& file, ErrorSink& sink);
// ReadTextFile then LoadNode; a file that cannot be read is an error in the
// sink too.
// With strict_json, the text must also be valid JSON (DeepSpeed and HF
// configs): errors give the JSON parser's reason at line and column.
std::optional<YAML::Node> LoadFileNode(const std::string& path, ErrorSink& sink, bool strict_json = false);
// The hardware file (--hardware) with the --set hardware.* values applied,
// as the scenario reads it and as the scenario writer copies it in.
std::optional<YAML::Node> LoadHardwareFile(const std::string& path,
                                           const std::vector<std::pair<std::string, std::string>>& overrides,
                                           ErrorSink& sink);

// A file named inside `source` (a scenario's deepspeed: or hf_config:):
// relative to the source's folder, unless it is absolute, or the source is
// a built-in scenario (then relative to the working directory).
std::string ResolveBeside(const std::string& source, const std::string& path);

// Sets `path` (dotted) in the tree to the scalar `value`, creating mappings
// (a --set override).
void ApplyOverride(YAML::Node root, const std::string& path, const std::string& value);
// Closest candidate by edit distance, if close enough to be a likely typo.
std::optional<std::string> DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

class Section {
 public:
  Section(ErrorSink& sink, std::string file, YAML::Node node, std::string path, YAML::Mark mark);

  bool present(const char* key) const { return static_cast<bool>(node_[key]); }
  // The key's value is a list (a key that takes a word or a list).
  bool is_list(const char* key) const { return node_[key] && node_[key].IsSequence(); }
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  ErrorSink& sink() const { return sink_; }
  const YAML::Mark& mark() const { return mark_; }

  // Each returns true when the key was present and valid (out is set); false
  // otherwise (out untouched). `required` reports a missing key as an error.
  bool Int(const char* key, int* out, bool required = false);
  bool Int64(const char* key, int64_t* out, bool required = false);
  bool Bool(const char* key, bool* out, bool required = false);
  bool Double(const char* key, double* out, bool required = false);
  bool String(const char* key, std::string* out, bool required = false);
  // A file or directory path: a string, not a plain scalar YAML (or JSON)
  // reads as a number or boolean (`nvme_path: 5` is refused; "5" names ./5).
  bool Path(const char* key, std::string* out, bool required = false);
  // Paths: a list of them, or one string of them joined by ':' (which
  // --set can give).
  bool PathList(const char* key, std::vector<std::string>* out);
  bool Size(const char* key, Bytes* out, bool required = false);
  bool Rate(const char* key, Bandwidth* out, bool required = false);
  bool Flops(const char* key, FlopRate* out, bool required = false);
  bool Duration(const char* key, Seconds* out, bool required = false);
  bool Count(const char* key, Elements* out, bool required = false);
  bool Int64List(const char* key, std::vector<int64_t>* out, bool required = false);
  // A string that must be one of `choices`; returns its index.
  std::optional<int> Choice(const char* key, std::initializer_list<const char*> choices, bool required = false);
  std::optional<Section> Sub(const char* key, bool required = false);
  // Reports `msg` at `key` (its value's position, or the section's).
  void Error(const char* key, const std::string& msg) { Fail(node_[key], key, msg); }
  // Keys accepted without effect (DeepSpeed knobs Strata does not model);
  // with `why`, those present are listed in the sink's not-modelled warning.
  void Ignore(std::initializer_list<const char*> keys, const char* why = nullptr);
  // Reports unknown and duplicate keys. Call once, after all getters. With
  // `unknown_why`, unknown keys are not errors but listed in the sink's
  // not-modelled warning with that reason (a DeepSpeed config has more keys
  // than Strata can know of). `error_note` is appended to each unknown-key
  // error.
  void Finish(const char* unknown_why = nullptr, const char* error_note = nullptr);

 private:
  std::optional<YAML::Node> Scalar(const char* key, bool required, const char* what);
  template <typename T, typename Parse>
  bool Quantity(const char* key, T* out, bool required, const char* what, Parse parse);
  void Fail(const YAML::Node& at, const std::string& key, const std::string& msg);
  std::string Key(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  ErrorSink& sink_;
  std::string file_;
  YAML::Node node_;
  std::string path_;
  YAML::Mark mark_;
  std::set<std::string> known_;
};

}  // namespace strata::config
