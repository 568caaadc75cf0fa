// Overlap of the seed scenario's offloaded iteration against its resource
// bound, both measured in the same run. This disk's rate drifts by 30-50%
// over seconds to minutes, so a bound measured once and runs taken later
// compare the iteration with another disk: here measurements and runs
// interleave. Each repetition runs `kSteps` overlapped steps (a fresh
// RunTraining, as `strata run --steps 9`). Two yardsticks:
//  - calibrated: ComputeResourceBound at the rates exec::Calibrate measures
//    (what `strata calibrate` writes: the plan's own ops one at a time,
//    NVMe alone and mixed), fewer repeats so that it stays close to the
//    run: the mean of the bounds calibrated just before and just after;
//  - roofline: the same, with the NVMe device's time replaced by the plan's
//    NVMe roofline (io_roofline.h: exactly one iteration's NVMe requests,
//    nothing else running, the best of three orders), measured between
//    the steps: each step against the mean of the passes just before and
//    just after it, the first step (a warm-up) left out.
//
// Counters per repetition (the aggregates give their median over them):
//   over_calibrated   mean iteration over the calibrated bound
//   over_roofline     the median step over its roofline bound
//   calibrated_ms, roofline_ms   the two bounds (roofline: the median step's)
//   drift             the calibrated bound after over before
//   over_busiest      the iteration over its busiest resource as run
// Manual time is the mean iteration time.
//
// Run: build/bench/overlap_bench [--benchmark_repetitions=N]
// (NVMe files under /tmp/strata_nvme, the seed's nvme_path.)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "strata/config/scenario_loader.h"
#include "strata/cost/bound.h"
#include "strata/executor/calibrate.h"
#include "strata/executor/io_roofline.h"
#include "strata/executor/runner.h"
#include "strata/planner/planner.h"

namespace {

using strata::Plan;
using strata::Scenario;
namespace exec = strata::exec;

constexpr int kSteps = 9;  // as the figures in docs/executor.md: strata run --steps 9

struct Seed {
  Scenario scenario;
  Plan plan;
};

const Seed* LoadSeed() {
  static const std::optional<Seed> seed = []() -> std::optional<Seed> {
    auto s = strata::config::LoadScenarioFile("builtin:seed");
    if (!s.ok()) return std::nullopt;
    auto p = strata::BuildPlan(*s);
    if (!p.ok()) return std::nullopt;
    return Seed{std::move(*s), std::move(*p)};
  }();
  return seed ? &*seed : nullptr;
}

// The bound at rates calibrated now: fewer repeats than `strata calibrate`
// (whose figures are medians of several) so that it stays close in time to
// the run it brackets. Also returns the largest of its resources other than
// the NVMe device, for the roofline bound.
struct Calibrated {
  double bound = 0, other = 0;
};
std::optional<Calibrated> CalibrateNow(const Seed& seed) {
  exec::CalibrateOptions o;
  o.nvme_dir = seed.scenario.zero.offload_param.nvme_path;
  o.repeats = 1;
  o.plan_repeats = 3;
  auto hw = exec::Calibrate(seed.scenario, seed.plan, o);
  if (!hw.ok()) {
    std::fprintf(stderr, "overlap_bench: calibrate: %s\n", hw.status().message().c_str());
    return std::nullopt;
  }
  Calibrated c;
  const strata::ResourceBound rb = strata::ComputeResourceBound(seed.plan, *hw);
  c.bound = rb.busiest.seconds;
  for (const strata::ResourceTime& t : rb.resources)
    if (t.resource.rfind("nvme", 0) != 0) c.other = std::max(c.other, t.seconds);
  return c;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void BM_SeedOverlap(benchmark::State& state) {
  const Seed* seed = LoadSeed();
  if (seed == nullptr) return state.SkipWithError("the builtin seed scenario did not load or plan");
  const std::string dir = seed->scenario.zero.offload_param.nvme_path;
  auto probe = exec::IoRooflineProbe::Open(seed->plan, {dir});
  if (!probe.ok()) return state.SkipWithError(probe.status().message().c_str());
  // The calibration after one repetition is the one before the next.
  static std::optional<Calibrated> before;
  for (auto _ : state) {
    if (!before) before = CalibrateNow(*seed);
    // A roofline pass before every step and one after the last.
    std::vector<double> roof;
    auto pass = [&](int) -> strata::Status {
      STRATA_ASSIGN_OR_RETURN(auto r, probe->Measure());
      roof.push_back(r.seconds());
      return strata::Status::Ok();
    };
    exec::RunOptions ro;
    ro.steps = kSteps;
    ro.nvme_dir = dir;
    ro.before_step = pass;
    auto r = exec::RunTraining(seed->plan, ro);
    if (!r.ok()) return state.SkipWithError(r.status().message().c_str());
    if (auto st = pass(kSteps); !st.ok()) return state.SkipWithError(st.message().c_str());
    const std::optional<Calibrated> after = CalibrateNow(*seed);
    if (!before || !after) return state.SkipWithError("calibration failed");
    const double calibrated = (before->bound + after->bound) / 2;
    const double other = (before->other + after->other) / 2;
    // Each step (the first, a warm-up, left out) against the roofline
    // measured just before and just after it.
    std::vector<double> over_roof, bound_roof;
    for (int i = 1; i < kSteps; ++i) {
      const double b = std::max(other, (roof[static_cast<size_t>(i)] + roof[static_cast<size_t>(i) + 1]) / 2);
      bound_roof.push_back(b);
      over_roof.push_back(r->step_time_s[static_cast<size_t>(i)] / b);
    }
    const double t = r->iteration_time_s;
    state.SetIterationTime(t);
    state.counters["calibrated_ms"] = calibrated * 1e3;
    state.counters["roofline_ms"] = Median(bound_roof) * 1e3;
    state.counters["over_calibrated"] = t / calibrated;
    state.counters["over_roofline"] = Median(over_roof);
    state.counters["drift"] = after->bound / before->bound;
    state.counters["over_busiest"] = t / r->busiest_as_run_s;
    before = after;
  }
}
BENCHMARK(BM_SeedOverlap)->Iterations(1)->Repetitions(12)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
