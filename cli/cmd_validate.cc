// strata validate: run the plan for real and simulate it with the same
// hardware; compare per op class and for the whole iteration.
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "exec_common.h"
#include "strata/executor/comm.h"
#include "strata/executor/runner.h"
#include "strata/simulator/simulator.h"

namespace strata::cli {
namespace {

// The op classes, from the timeline's time classes.
constexpr std::pair<const char*, TimeClass> kClasses[] = {
    {"compute", TimeClass::kCompute},       {"h2d", TimeClass::kH2D},
    {"d2h", TimeClass::kD2H},               {"nvme_read", TimeClass::kNvmeRead},
    {"nvme_write", TimeClass::kNvmeWrite},  {"collective", TimeClass::kCollective},
    {"optimizer", TimeClass::kCpuOptimizer}};

double Rel(double sim, double meas) { return meas > 0 ? (sim - meas) / meas : (sim > 0 ? INFINITY : 0.0); }

}  // namespace

Runner AddValidate(CLI::App& app) {
  auto a = std::make_shared<ExecArgs>();
  auto* cmd = app.add_subcommand("validate", "Run the plan for real and in the simulator with the same hardware "
                                             "(use --hardware from strata calibrate): measured vs simulated per op class");
  AddCommon(cmd, *a, "Write the report to FILE instead of stdout");
  cmd->add_option("--steps", a->steps, "Steps to run (the step of median time, the first left out, is measured)")->check(CLI::PositiveNumber);
  AddExecOptions(cmd, *a);
  return [a]() {
    exec::Comm& comm = exec::Comm::World();
    auto planned = LoadAndPlan(*a, MpiWorldOverrides());
    if (!planned.ok()) return Fail(planned.status());
    auto o = RunOptionsFrom(*a);
    if (!o.ok()) return Fail(o.status());
    o->median_timeline = true;
    auto run = exec::RunTraining(planned->scenario, planned->plan, *o);
    if (!run.ok()) return Fail(run.status());
    if (comm.rank() != 0) return 0;
    auto sim = sim::Simulate(planned->plan, planned->scenario.hardware);
    if (!sim.ok()) return Fail(sim.status());
    const TimeBreakdown m = AnalyzeTimeline(run->timeline, 0), s = AnalyzeTimeline(sim->timeline, 0);
    nlohmann::ordered_json j;
    j["scenario"] = planned->scenario.name;
    j["iteration"] = {{"measured_s", run->timeline.iteration_s},
                      {"simulated_s", sim->timeline.iteration_s},
                      {"relative_error", Rel(sim->timeline.iteration_s, run->timeline.iteration_s)}};
    nlohmann::ordered_json classes;
    std::ostringstream text;
    text << "Validate " << planned->scenario.name << ": measured (strata run, median step of " << a->steps
         << ") vs simulated (strata simulate), busy time per op class on rank 0\n\n";
    char line[160];
    std::snprintf(line, sizeof line, "%-12s %14s %14s %10s\n", "class", "measured", "simulated", "error");
    text << line;
    for (auto [name, c] : kClasses) {
      const double mb = m.busy[static_cast<int>(c)], sb = s.busy[static_cast<int>(c)];
      if (mb == 0 && sb == 0) continue;
      classes[name] = {{"measured_s", mb}, {"simulated_s", sb}, {"relative_error", Rel(sb, mb)}};
      std::snprintf(line, sizeof line, "%-12s %12.6f s %12.6f s %9.1f%%\n", name, mb, sb, 100 * Rel(sb, mb));
      text << line;
    }
    std::snprintf(line, sizeof line, "%-12s %12.6f s %12.6f s %9.1f%%\n", "iteration", run->timeline.iteration_s,
                  sim->timeline.iteration_s, 100 * Rel(sim->timeline.iteration_s, run->timeline.iteration_s));
    text << line;
    j["classes"] = classes;
    j["bottleneck"] = {{"measured", TimeClassName(m.bottleneck)}, {"simulated", TimeClassName(s.bottleneck)}};
    text << "\nbottleneck: measured " << TimeClassName(m.bottleneck) << ", simulated " << TimeClassName(s.bottleneck)
         << "\n";
    return Emit(*a, a->json ? j.dump(2) + "\n" : text.str());
  };
}

}  // namespace strata::cli
