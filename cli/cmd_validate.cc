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

// The class with the most exposed time (as AnalyzeTimeline's bottleneck).
// When reads and writes share the NVMe device (nvme.readwrite_bandwidth),
// its two classes count as one, "nvme": which direction a shared device
// serves first under contention is the device's choice, not the plan's (fio
// beside it gives 0.72/0.32 GB/s read/write in one run, 0.32/0.99 in the
// next), so only the device can be named as the bottleneck.
std::string Bottleneck(const TimeBreakdown& b, bool shared_nvme) {
  std::string best = "compute";
  double most = b.seconds[static_cast<int>(TimeClass::kCompute)];
  for (int c = 1; c < kNumTimeClasses - 1; ++c) {
    const auto tc = static_cast<TimeClass>(c);
    if (shared_nvme && tc == TimeClass::kNvmeWrite) continue;
    double v = b.seconds[c];
    std::string name(TimeClassName(tc));
    if (shared_nvme && tc == TimeClass::kNvmeRead) {
      v += b.seconds[static_cast<int>(TimeClass::kNvmeWrite)];
      name = "nvme";
    }
    if (v > most) most = v, best = name;
  }
  return best;
}

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
    if (a->steps < 2)
      return Fail(Status::InvalidArgument("validate needs --steps 2 or more: the first step warms up and is left out"));
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
    const bool shared = planned->scenario.hardware.nvme.readwrite_bandwidth.bytes_per_s > 0;
    const std::string mb = Bottleneck(m, shared), sb = Bottleneck(s, shared);
    j["bottleneck"] = {{"measured", mb}, {"simulated", sb}};
    text << "\nbottleneck: measured " << mb << ", simulated " << sb
         << "\n";
    return Emit(*a, a->json ? j.dump(2) + "\n" : text.str());
  };
}

}  // namespace strata::cli
