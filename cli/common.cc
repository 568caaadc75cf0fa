#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>

#include "commands.h"
#include "strata/core/version.h"
#include "strata/planner/planner.h"
#include "strata/timeline/trace_io.h"

namespace strata::cli {

void AddCommon(CLI::App* cmd, CommonArgs& a, const char* output_help, bool with_set) {
  cmd->add_option("scenario", a.scenario,
                  "Scenario YAML file, or builtin:NAME (default: builtin:seed, the embedded seed scenario)");
  cmd->add_option("--deepspeed", a.deepspeed,
                  "DeepSpeed JSON config (ds_config.json): batch, precision, activation checkpointing, optimizer, "
                  "zero_optimization and aio over the scenario's; --set still wins")
      ->check(CLI::ExistingFile);
  cmd->add_option("--hardware", a.hardware,
                  "YAML file whose hardware section replaces the scenario's "
                  "(e.g. written by strata calibrate)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", a.json, "Print JSON instead of text");
  if (output_help != nullptr) cmd->add_option("-o,--output", a.output, output_help);
  if (with_set)
    cmd->add_option("--set", a.sets,
                    "KEY=VALUE: override a scenario key by dotted path (repeatable), "
                    "e.g. --set hardware.pcie.bandwidth=32GB/s");
}

Result<config::LoadOptions> LoadOptionsOf(const CommonArgs& a,
                                          const std::vector<std::pair<std::string, std::string>>& overrides) {
  config::LoadOptions opts;
  opts.deepspeed_config = a.deepspeed;
  opts.hardware_file = a.hardware;
  for (const auto& arg : a.sets) {
    STRATA_ASSIGN_OR_RETURN(auto kv, config::ParseSetArgument(arg));
    if (kv.second.size() != 1)
      return Status::InvalidArgument("--set " + arg + ": one value per key here (use strata sweep for several)");
    opts.overrides.emplace_back(kv.first, kv.second.front());
  }
  opts.overrides.insert(opts.overrides.end(), overrides.begin(), overrides.end());
  return opts;
}

Result<Scenario> Load(const CommonArgs& a, const std::vector<std::pair<std::string, std::string>>& overrides) {
  STRATA_ASSIGN_OR_RETURN(auto opts, LoadOptionsOf(a, overrides));
  std::vector<std::string> warnings;
  opts.warnings = &warnings;
  auto s = config::LoadScenarioFile(a.scenario, opts);
  // Once per process (a sweep loads the scenario once per point).
  static std::once_flag warned;
  if (s.ok() && !warnings.empty())
    std::call_once(warned, [&] {
      for (const auto& w : warnings) std::cerr << "strata: warning: " << w << "\n";
    });
  return s;
}

Result<Planned> LoadAndPlan(const CommonArgs& a, const std::vector<std::pair<std::string, std::string>>& overrides) {
  STRATA_ASSIGN_OR_RETURN(auto s, Load(a, overrides));
  return PlanScenario(std::move(s));
}

Result<Planned> PlanScenario(Scenario s) {
  STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s));
  Planned p{std::move(s), std::move(plan), {}, true};
  p.report = ValidatePlan(p.plan);
  for (const auto& v : p.report.violations) {
    if (v.kind != "capacity") return Status::Internal("invalid plan: " + v.message);
    p.feasible = false;
  }
  return p;
}

Result<Simulated> LoadPlanSimulate(const CommonArgs& a,
                                   const std::vector<std::pair<std::string, std::string>>& overrides,
                                   const sim::SimOptions& options) {
  STRATA_ASSIGN_OR_RETURN(auto p, LoadAndPlan(a, overrides));
  STRATA_ASSIGN_OR_RETURN(auto r, sim::Simulate(p.plan, p.scenario.hardware, options));
  return Simulated{std::move(p), std::move(r)};
}

std::vector<std::pair<std::string, std::string>> Overrides(
    const CommonArgs& a, const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::pair<std::string, std::string>> o;
  if (!a.deepspeed.empty()) o.emplace_back("--deepspeed", a.deepspeed);
  if (!a.hardware.empty()) o.emplace_back("--hardware", a.hardware);
  for (const auto& arg : a.sets)
    if (auto kv = config::ParseSetArgument(arg); kv.ok() && kv->second.size() == 1)
      o.emplace_back(kv->first, kv->second[0]);
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

void Stamp(const CommonArgs& a, Timeline* t, const std::vector<std::pair<std::string, std::string>>& extra) {
  t->strata_version = kStrataVersion;
  t->scenario_path = a.scenario;
  t->overrides = Overrides(a, extra);
}

// A number the predicate accepts, checked before planning; else "not a
// number" or "must be RULE".
static CLI::Validator NumberThat(bool (*ok)(double), const std::string& rule) {
  return CLI::Validator(
      [ok, rule](std::string& v) {
        double x = 0;
        try {
          x = std::stod(v);
        } catch (...) {
          return std::string("not a number: ") + v;
        }
        return ok(x) ? std::string() : "must be " + rule + ": " + v;
      },
      rule);
}

void AddJitter(CLI::App* cmd, sim::SimOptions* o) {
  cmd->add_option("--jitter", o->jitter,
                  "Scale each activity's work by 1 + jitter x u, u in [-1, 1) hashed from the seed, rank and op, so "
                  "that ranks do not stay in the lockstep no hardware keeps (docs/simulator.md \"Symmetry "
                  "breaking\"); 0 replays exactly")
      ->capture_default_str()
      ->check(NumberThat(sim::JitterInRange, "in [0, 0.5)"));  // Simulate's own rule
  cmd->add_option("--jitter-seed", o->jitter_seed, "Seed of the jitter's hash (and of the stalls')")
      ->capture_default_str();
  // Simulate's StallsInRange also bounds stall_time to a year.
  const auto finite = NumberThat([](double x) { return x >= 0 && x < 1e300; }, "finite and >= 0");
  cmd->add_option("--stall-rate", o->stall_rate,
                  "Stalls per second of a rank's GPU compute: each compute op of s seconds stalls with probability "
                  "rate x s, hashed from the seed, rank and op; every node is then simulated (docs/simulator.md "
                  "\"Stalls\"); 0: none")
      ->capture_default_str()
      ->check(finite);
  cmd->add_option("--stall-time", o->stall_time, "Seconds a stall idles its rank's GPU (with --stall-rate)")
      ->capture_default_str()
      ->check(finite);
}

std::vector<std::pair<std::string, std::string>> JitterOverrides(const sim::SimOptions& o) {
  auto exact = [](double v) {  // every digit a replay needs
    std::ostringstream s;
    s << std::setprecision(17) << v;
    return s.str();
  };
  std::vector<std::pair<std::string, std::string>> out = {{"--jitter", exact(o.jitter)},
                                                          {"--jitter-seed", std::to_string(o.jitter_seed)}};
  if (o.Stalls()) {  // recorded only when on, so that traces without stalls read as before
    out.push_back({"--stall-rate", exact(o.stall_rate)});
    out.push_back({"--stall-time", exact(o.stall_time)});
  }
  return out;
}

Status WriteTimelineFiles(const Timeline& t, const std::string& trace, const std::string& csv) {
  if (!trace.empty()) STRATA_RETURN_IF_ERROR(WriteChromeTraceFile(t, trace));
  if (!csv.empty()) STRATA_RETURN_IF_ERROR(WriteCsvFiles(t, csv));
  return Status::Ok();
}

int Fail(const Status& st) {
  std::cerr << "strata: " << st.message() << "\n";
  return st.ExitCode();
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
  return o + "\"";
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::IOError("cannot write '" + path + "': " + std::strerror(errno));
  out << text;
  out.close();
  if (!out) return Status::IOError("error writing '" + path + "': " + std::strerror(errno));
  return Status::Ok();
}

int Emit(const CommonArgs& a, const std::string& text) {
  if (a.output.empty()) {
    std::cout << text;
    return 0;
  }
  auto st = WriteFile(a.output, text);
  return st.ok() ? 0 : Fail(st);
}

}  // namespace strata::cli
