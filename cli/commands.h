// Shared pieces of the strata subcommands (private to the CLI).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "strata/config/scenario_loader.h"
#include "strata/core/status.h"
#include "strata/plan/plan.h"
#include "strata/plan/validator.h"
#include "strata/simulator/simulator.h"
#include "strata/timeline/timeline.h"

namespace strata::cli {

struct CommonArgs {
  std::string scenario = config::kDefaultScenario;
  std::string deepspeed;
  std::string hardware;  // --hardware FILE (from strata calibrate)
  bool json = false;
  std::string output;
  std::vector<std::string> sets;  // --set KEY=VALUE (commands with one scenario)
};

// What a result came from: the --deepspeed and --hardware files and every
// --set (then `extra`, a sweep point's settings), in order.
std::vector<std::pair<std::string, std::string>> Overrides(
    const CommonArgs& a, const std::vector<std::pair<std::string, std::string>>& extra = {});
// Records Strata's version, the scenario path and Overrides(a, extra) in t.
void Stamp(const CommonArgs& a, Timeline* t, const std::vector<std::pair<std::string, std::string>>& extra = {});

// Adds SCENARIO, --deepspeed and --json; -o when `output_help` is given;
// --set KEY=VALUE when `with_set`.
void AddCommon(CLI::App* cmd, CommonArgs& a, const char* output_help, bool with_set = true);
// What Load reads the scenario with: --deepspeed, --hardware, the --set
// values, then `overrides`.
Result<config::LoadOptions> LoadOptionsOf(const CommonArgs& a,
                                          const std::vector<std::pair<std::string, std::string>>& overrides = {});
// Loads the scenario with the --set values, then `overrides`.
Result<Scenario> Load(const CommonArgs& a, const std::vector<std::pair<std::string, std::string>>& overrides = {});
// A scenario planned and validated. Capacity violations leave `feasible`
// false (the plan still runs, the caller warns); any other violation of the
// plan's contract is an Internal error.
struct Planned {
  Scenario scenario;
  Plan plan;
  ValidationReport report;
  bool feasible = true;
};
Result<Planned> LoadAndPlan(const CommonArgs& a,
                            const std::vector<std::pair<std::string, std::string>>& overrides = {});
// The same for a scenario already loaded (and checked).
Result<Planned> PlanScenario(Scenario s);
// LoadAndPlan, then simulate.
struct Simulated {
  Planned planned;
  sim::SimResult result;
};
Result<Simulated> LoadPlanSimulate(const CommonArgs& a,
                                   const std::vector<std::pair<std::string, std::string>>& overrides,
                                   const sim::SimOptions& options);

// --jitter and --jitter-seed (SimOptions::jitter, jitter_seed) into `o`;
// and the pair of overrides that records them in a report or trace.
void AddJitter(CLI::App* cmd, sim::SimOptions* o);
std::vector<std::pair<std::string, std::string>> JitterOverrides(const sim::SimOptions& o);

// --trace (Chrome trace) and --csv (ops, and memory in FILE's .memory.csv)
// of a timeline; empty paths are skipped.
Status WriteTimelineFiles(const Timeline& t, const std::string& trace, const std::string& csv);

// Prints "strata: <message>" and returns the status's exit code.
int Fail(const Status& st);
Status WriteFile(const std::string& path, const std::string& text);
// A CSV field: quoted (quotes doubled, newlines as spaces) when it holds a comma, quote or newline.
std::string CsvField(const std::string& s);
// Prints to stdout, or to -o FILE when given.
int Emit(const CommonArgs& a, const std::string& text);

// Each registers a subcommand and returns the function that runs it.
using Runner = std::function<int()>;
Runner AddEstimate(CLI::App& app);
Runner AddPlan(CLI::App& app);
Runner AddSimulate(CLI::App& app);
Runner AddSweep(CLI::App& app);
Runner AddCompare(CLI::App& app);
Runner AddRun(CLI::App& app);
Runner AddCalibrate(CLI::App& app);
Runner AddValidate(CLI::App& app);
Runner AddScenarios(CLI::App& app);
Runner AddTune(CLI::App& app);

}  // namespace strata::cli
