// strata: the command-line tool. Exit codes: 0 ok, 1 runtime failure or
// infeasible plan, 2 bad input or usage.
#include <iostream>

#include "commands.h"
#include "strata/core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"Strata: plan, estimate and simulate offloaded large-model training (ZeRO-3 / Offload / Infinity)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("strata ") + strata::kStrataVersion);
  const std::vector<std::pair<const char*, strata::cli::Runner>> commands = {
      {"estimate", strata::cli::AddEstimate(app)},   {"plan", strata::cli::AddPlan(app)},
      {"simulate", strata::cli::AddSimulate(app)},   {"sweep", strata::cli::AddSweep(app)},
      {"compare", strata::cli::AddCompare(app)},     {"run", strata::cli::AddRun(app)},
      {"calibrate", strata::cli::AddCalibrate(app)}, {"validate", strata::cli::AddValidate(app)},
      {"scenarios", strata::cli::AddScenarios(app)}, {"tune", strata::cli::AddTune(app)}};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // --help and --version exit 0; usage errors 2
  }
  for (const auto& [name, run] : commands)
    if (app.got_subcommand(name)) return run();
  return 2;
}
