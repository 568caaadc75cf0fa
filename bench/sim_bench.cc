// Simulator throughput, end to end (fork, platform, replay, timeline): SimGrid
// activities per second at ~10k, ~100k and ~1M activities (the DGX-2 1T
// scenario at 10, 100 and 1000 layers), and the 1T-parameter 512-GPU scenario
// with the simulating process's peak memory.
// Run: build/bench/sim_bench
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "strata/config/scenario_loader.h"
#include "strata/scheduler/planner.h"
#include "strata/simulator/simulator.h"

namespace {

strata::Scenario Load(const char* name) {
  auto r = strata::config::LoadScenarioFile(std::string("builtin:") + name);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

void RunSim(benchmark::State& state, const strata::Scenario& s) {
  auto plan = strata::BuildPlan(s);
  if (!plan.ok()) {
    state.SkipWithError(plan.status().message().c_str());
    return;
  }
  int64_t activities = 0;
  for (auto _ : state) {
    auto r = strata::sim::Simulate(*plan, s.hardware);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    activities = r->activities;
    benchmark::DoNotOptimize(r);
  }
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  state.counters["activities"] = static_cast<double>(activities);
  state.counters["activities_per_s"] =
      benchmark::Counter(static_cast<double>(activities), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["child_max_rss_MiB"] = static_cast<double>(ru.ru_maxrss) / 1024.0;
}

void BM_SimulateLayers(benchmark::State& state) {
  strata::Scenario s = Load("gpt-1t-dgx2");
  s.model.layers = static_cast<int>(state.range(0));
  RunSim(state, s);
}
BENCHMARK(BM_SimulateLayers)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

void BM_Simulate1T512Gpu(benchmark::State& state) { RunSim(state, Load("gpt-1t-512gpu")); }
BENCHMARK(BM_Simulate1T512Gpu)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// Every node simulated (no symmetry reduction), for comparison.
void BM_Simulate1T512GpuAllNodesSmall(benchmark::State& state) {
  strata::Scenario s = Load("gpt-1t-512gpu");
  s.model.layers = 8;
  auto plan = strata::BuildPlan(s);
  strata::sim::SimOptions o;
  o.reduce_symmetric_nodes = false;
  int64_t activities = 0;
  for (auto _ : state) {
    auto r = strata::sim::Simulate(*plan, s.hardware, o);
    activities = r->activities;
  }
  state.counters["activities"] = static_cast<double>(activities);
  state.counters["activities_per_s"] =
      benchmark::Counter(static_cast<double>(activities), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Simulate1T512GpuAllNodesSmall)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
