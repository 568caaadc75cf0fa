// strata: the command-line tool. Exit codes: 0 ok, 1 runtime failure or
// infeasible plan, 2 bad input or usage.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "strata/config/scenario_loader.h"
#include "strata/scheduler/estimator.h"
#include "strata/scheduler/plan_json.h"
#include "strata/scheduler/planner.h"
#include "strata/scheduler/report.h"
#include "strata/scheduler/validator.h"

namespace {

struct CommonArgs {
  std::string scenario = strata::config::kDefaultScenario;
  std::string deepspeed;
  bool json = false;
  std::string output;
};

int Fail(const strata::Status& st) {
  std::cerr << "strata: " << st.message() << "\n";
  return st.ExitCode();
}

strata::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return strata::Status::IOError("cannot write '" + path + "': " + std::strerror(errno));
  out << text;
  out.close();
  if (!out) return strata::Status::IOError("error writing '" + path + "': " + std::strerror(errno));
  return strata::Status::Ok();
}

// Prints to stdout, or to -o FILE when given.
int Emit(const CommonArgs& a, const std::string& text) {
  if (a.output.empty()) {
    std::cout << text;
    return 0;
  }
  auto st = WriteFile(a.output, text);
  return st.ok() ? 0 : Fail(st);
}

strata::Result<strata::Scenario> Load(const CommonArgs& a) {
  strata::config::LoadOptions opts;
  opts.deepspeed_config = a.deepspeed;
  return strata::config::LoadScenarioFile(a.scenario, opts);
}

int RunEstimate(const CommonArgs& a) {
  auto s = Load(a);
  if (!s.ok()) return Fail(s.status());
  auto e = strata::EstimateMemory(*s);
  if (!e.ok()) return Fail(e.status());
  int rc = Emit(a, a.json ? strata::EstimateJson(*e) : strata::EstimateText(*e));
  if (rc != 0) return rc;
  return e->feasible() ? 0 : 1;
}

int RunPlan(const CommonArgs& a) {
  auto s = Load(a);
  if (!s.ok()) return Fail(s.status());
  auto plan = strata::BuildPlan(*s);
  if (!plan.ok()) return Fail(plan.status());
  const auto report = strata::ValidatePlan(*plan);
  const auto summary = strata::SummarizePlan(*plan, report);
  if (!a.output.empty()) {
    auto st = WriteFile(a.output, strata::EncodePlan(*plan));
    if (!st.ok()) return Fail(st);
  }
  std::cout << (a.json ? strata::SummaryJson(*plan, summary, report) : strata::SummaryText(*plan, summary, report));
  if (!a.output.empty() && !a.json) std::cout << "plan written to " << a.output << "\n";
  return report.ok() ? 0 : 1;
}

void AddCommon(CLI::App* cmd, CommonArgs& a, const char* output_help) {
  cmd->add_option("scenario", a.scenario,
                  "Scenario YAML file, or builtin:NAME (default: builtin:seed, the embedded seed scenario)");
  cmd->add_option("--deepspeed", a.deepspeed,
                  "DeepSpeed JSON config: its zero_optimization and aio sections replace the scenario's")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", a.json, "Print JSON instead of text");
  cmd->add_option("-o,--output", a.output, output_help);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Strata: plan, estimate, simulate and run offloaded large-model training (ZeRO-3 / Offload / Infinity)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "strata 0.1.0");

  CommonArgs est_args, plan_args;
  auto* estimate = app.add_subcommand("estimate", "Memory per GPU and per node, and whether the scenario fits");
  AddCommon(estimate, est_args, "Write the report to FILE instead of stdout");
  auto* plan = app.add_subcommand("plan", "Plan one training iteration: print a summary, write the plan JSON with -o");
  AddCommon(plan, plan_args, "Write the plan JSON to FILE");
  auto* list = app.add_subcommand("scenarios", "List the built-in scenarios");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // --help and --version exit 0; usage errors 2
  }
  if (*estimate) return RunEstimate(est_args);
  if (*plan) return RunPlan(plan_args);
  if (*list) {
    for (const auto& n : strata::config::BuiltinScenarioNames()) std::cout << "builtin:" << n << "\n";
    return 0;
  }
  return 2;
}
