#include "strata/config/scenario_loader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "deepspeed_config.h"
#include "sections.h"
#include "yaml_reader.h"

namespace strata::config {
namespace {

std::string StemOf(const std::string& path) {
  auto slash = path.find_last_of("/:");
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  auto dot = base.find_last_of('.');
  return dot == std::string::npos ? base : base.substr(0, dot);
}

// "2GB/s" -> (2, "GB/s"); nullopt when the text does not start with a number.
std::optional<std::pair<double, std::string>> LeadingNumber(const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || !std::isfinite(x)) return std::nullopt;
  return std::make_pair(x, v.substr(used));
}

std::string Num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return buf;
}

// "A:B:STEP" (A, A + STEP, ... up to B) or "A:B:*F" (A, A x F, ... up to B):
// A, B and STEP share their unit ("2GB/s:32GB/s:2GB/s"). Other values are
// returned as they are, paths joined by ':' among them (a '/' and no
// leading number: policy.stripe_paths).
Result<std::vector<std::string>> ExpandRange(const std::string& arg, const std::string& v) {
  const size_t c1 = v.find(':');
  if (c1 == std::string::npos || (v.find('/') != std::string::npos && !LeadingNumber(v.substr(0, c1))))
    return std::vector<std::string>{v};
  const size_t c2 = v.find(':', c1 + 1);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("--set '" + arg + "': range '" + v + "': " + why +
                                   " (A:B:STEP or A:B:*FACTOR, e.g. 2GB/s:32GB/s:2GB/s or 1e6:8e6:*2)");
  };
  if (c2 == std::string::npos || v.find(':', c2 + 1) != std::string::npos) return bad("expected three parts");
  const std::string sa = v.substr(0, c1), sb = v.substr(c1 + 1, c2 - c1 - 1), sstep = v.substr(c2 + 1);
  const bool geometric = !sstep.empty() && sstep.front() == '*';
  auto a = LeadingNumber(sa), b = LeadingNumber(sb), step = LeadingNumber(geometric ? sstep.substr(1) : sstep);
  if (!a || !b || !step) return bad("bounds and step must be numbers");
  if (a->second != b->second || (!geometric && step->second != a->second) || (geometric && !step->second.empty()))
    return bad("the bounds and the step need the same unit (a factor none)");
  if (geometric ? !(step->first > 1) : !(step->first > 0))
    return bad(geometric ? "the factor must exceed 1" : "the step must be positive");
  if (b->first < a->first) return bad("the end is below the start");
  std::vector<std::string> out;
  for (int i = 0;; ++i) {
    const double x = geometric ? a->first * std::pow(step->first, i) : a->first + i * step->first;
    if (x > b->first * (1 + 1e-12)) break;
    if (out.size() >= 10000) return bad("more than 10000 values");
    out.push_back(Num(x) + a->second);
  }
  return out;
}

}  // namespace

Result<std::pair<std::string, std::vector<std::string>>> ParseSetArgument(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return Status::InvalidArgument("--set '" + arg + "': expected KEY=VALUE[,VALUE...]");
  std::vector<std::string> values;
  size_t pos = eq + 1;
  while (true) {
    const size_t comma = arg.find(',', pos);
    const std::string v = arg.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (v.empty()) return Status::InvalidArgument("--set '" + arg + "': empty value");
    STRATA_ASSIGN_OR_RETURN(auto expanded, ExpandRange(arg, v));
    values.insert(values.end(), expanded.begin(), expanded.end());
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::make_pair(arg.substr(0, eq), std::move(values));
}

std::optional<double> SetValueNumber(const std::string& v) {
  if (auto x = ParseScaledNumber(v); x.ok()) return *x;
  if (auto x = ParseBytes(v); x.ok()) return static_cast<double>(x->v);
  if (auto x = ParseBandwidth(v); x.ok()) return x->bytes_per_s;
  if (auto x = ParseFlopRate(v); x.ok()) return x->flops_per_s;
  if (auto x = ParseSeconds(v); x.ok()) return x->v;
  return std::nullopt;
}

// framework: deepspeed (the default) or fsdp, and the fsdp section, which
// only fsdp reads; DeepSpeed's sections under fsdp are errors, not ignored.
namespace {
void ReadFramework(Section& top, Scenario* s) {
  if (auto i = top.Choice("framework", {"deepspeed", "fsdp"})) s->framework = static_cast<Framework>(*i);
  const bool fsdp = s->framework == Framework::kFsdp;
  if (auto f = top.Sub("fsdp")) {
    if (fsdp)
      ReadFsdp(*f, &s->fsdp, s->hardware.gpus_per_node);
    else
      top.Error("fsdp", "the fsdp section is read under framework: fsdp (this scenario's framework is deepspeed)");
  }
  if (fsdp)
    for (const char* key : {"zero_optimization", "aio", "deepspeed"})
      if (top.present(key))
        top.Error(key, std::string(key) + " is DeepSpeed's; framework: fsdp reads the fsdp section (docs/fsdp.md)");
}
}  // namespace

Result<Scenario> ParseScenario(std::string_view yaml_text, const std::string& source_name, const LoadOptions& options) {
  ErrorSink sink;
  Scenario s;
  s.name = StemOf(source_name);
  bool overlap_set = false;
  std::string deepspeed = options.deepspeed_config;
  // The scenario's own zero_optimization and aio sections, which a
  // DeepSpeed config replaces (said in a warning, not silently).
  std::vector<std::pair<std::string, std::string>> replaced;
  if (auto root = LoadNode(yaml_text, source_name, sink)) {
    const YAML::Node& file = *root;  // const: looking a key up adds none
    for (const char* key : {"zero_optimization", "aio"})
      if (file.IsMap() && file[key]) replaced.push_back({key, FormatMark(source_name, file[key].Mark())});
    for (const auto& [path, value] : options.overrides) {
      ApplyOverride(*root, path, value);
      sink.Override(path, "--set '" + path + "=" + value + "'");
    }
    Section top(sink, source_name, *root, "", root->Mark());
    top.String("name", &s.name);
    if (auto m = top.Sub("model", true)) ReadModel(*m, &s.model);
    if (options.hardware_file.empty()) {
      if (auto h = top.Sub("hardware", true)) ReadHardware(*h, &s.hardware);
    } else {
      top.Ignore({"hardware"});
      if (auto hw = LoadHardwareFile(options.hardware_file, options.overrides, sink)) {
        Section file(sink, options.hardware_file, *hw, "", hw->Mark());
        if (auto h = file.Sub("hardware", true)) ReadHardware(*h, &s.hardware);
        file.Finish();
      }
    }
    if (auto t = top.Sub("training")) ReadTraining(*t, &s.training);
    ReadFramework(top, &s);
    // The policy first: its DeepSpeed release says how zero_optimization reads.
    if (auto p = top.Sub("policy")) ReadPolicy(*p, &s.policy);
    if (auto z = top.Sub("zero_optimization")) ReadZero(*z, &s.zero, &overlap_set, ReleaseProfileOf(s.policy));
    if (auto a = top.Sub("aio")) ReadAio(*a, &s.aio);
    if (auto p = top.Sub("parallelism")) ReadParallelism(*p, &s.parallelism);
    // deepspeed: a DeepSpeed JSON config, relative to the scenario's folder.
    std::string ds;
    if (top.Path("deepspeed", &ds) && options.deepspeed_config.empty()) deepspeed = ResolveBeside(source_name, ds);
    top.Finish();
  }
  if (s.framework == Framework::kFsdp) {
    // (the scenario's own deepspeed: key is ReadFramework's error)
    if (!options.deepspeed_config.empty())
      sink.ErrorAt("--deepspeed",
                   "a DeepSpeed config does not apply to framework: fsdp (its settings are the fsdp "
                   "section's)");
  } else if (!deepspeed.empty())
    ApplyDeepSpeed(deepspeed, options.overrides, &s, &overlap_set, sink, replaced);
  if (!overlap_set) s.zero.overlap_comm = s.zero.stage == 3;  // DeepSpeed's default

  std::string report;
  for (const auto& e : sink.errors()) report += e + "\n";
  if (report.empty()) {
    for (const auto& issue : CheckScenario(s))
      report += sink.Locate(issue.path, source_name) + ": " + issue.path + ": " + issue.message + "\n";
  }
  if (!report.empty()) {
    report.pop_back();
    return Status::InvalidArgument(report);
  }
  if (options.warnings != nullptr)
    for (const std::string& w : sink.warnings()) options.warnings->push_back(w);
  if (options.warnings != nullptr && !sink.not_modelled().empty()) {
    // One warning, the keys grouped by reason, in the order first met.
    std::vector<std::pair<std::string, std::string>> by_reason;  // why -> keys
    for (const auto& [key, reason] : sink.not_modelled()) {
      const std::string& why = reason;  // clang 14 cannot capture a structured binding
      auto it = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& r) { return r.first == why; });
      if (it == by_reason.end()) it = by_reason.insert(by_reason.end(), {why, ""});
      it->second += (it->second.empty() ? "" : ", ") + key;
    }
    std::string w = "keys accepted but not modelled:";
    for (const auto& [why, keys] : by_reason) w += "\n  " + keys + ": " + why;
    options.warnings->push_back(std::move(w));
  }
  return s;
}

Result<std::string> ScenarioText(const std::string& path) {
  constexpr std::string_view kBuiltin = "builtin:";
  if (path.rfind(kBuiltin, 0) != 0) return ReadTextFile(path);
  std::string name = path.substr(kBuiltin.size());
  std::string_view text = BuiltinScenarioText(name);
  if (text.empty()) {
    std::string names;
    for (const auto& n : BuiltinScenarioNames()) names += " " + n;
    return Status::InvalidArgument("no built-in scenario '" + name + "'; built-in:" + names);
  }
  return std::string(text);
}

Result<Scenario> LoadScenarioFile(const std::string& path, const LoadOptions& options) {
  STRATA_ASSIGN_OR_RETURN(auto text, ScenarioText(path));
  return ParseScenario(text, path, options);
}

}  // namespace strata::config
