// Planning cost: scenario -> plan (and the validator's replay), for the
// shipped 1T-parameter scenarios and a sweep of depths to show linearity.
// Run: build/bench/plan_bench --benchmark_counter_table=true
#include <benchmark/benchmark.h>

#include "strata/config/scenario_loader.h"
#include "strata/scheduler/planner.h"
#include "strata/scheduler/validator.h"

namespace {

strata::Scenario Load(const char* name) {
  auto r = strata::config::LoadScenarioFile(std::string("builtin:") + name);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

void Report(benchmark::State& state, size_t ops) {
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Plan(benchmark::State& state, const char* name) {
  const strata::Scenario s = Load(name);
  size_t ops = 0;
  for (auto _ : state) {
    auto plan = strata::BuildPlan(s);
    if (!plan.ok()) state.SkipWithError(plan.status().message().c_str());
    ops = plan->ops.size();
    benchmark::DoNotOptimize(plan);
  }
  Report(state, ops);
}
BENCHMARK_CAPTURE(BM_Plan, seed, "seed")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, gpt_1t_dgx2, "gpt-1t-dgx2")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Plan, gpt_1t_512gpu, "gpt-1t-512gpu")->Unit(benchmark::kMillisecond);

void BM_PlanAndValidate(benchmark::State& state, const char* name) {
  const strata::Scenario s = Load(name);
  size_t ops = 0;
  for (auto _ : state) {
    auto plan = strata::BuildPlan(s);
    auto report = strata::ValidatePlan(*plan);
    ops = plan->ops.size();
    benchmark::DoNotOptimize(report);
  }
  Report(state, ops);
}
BENCHMARK_CAPTURE(BM_PlanAndValidate, gpt_1t_512gpu, "gpt-1t-512gpu")->Unit(benchmark::kMillisecond);

// Linearity: the 512-GPU scenario with 32..1024 layers.
void BM_PlanLayers(benchmark::State& state) {
  strata::Scenario s = Load("gpt-1t-512gpu");
  s.model.layers = static_cast<int>(state.range(0));
  size_t ops = 0;
  for (auto _ : state) {
    auto plan = strata::BuildPlan(s);
    ops = plan->ops.size();
    benchmark::DoNotOptimize(plan);
  }
  Report(state, ops);
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_PlanLayers)->RangeMultiplier(2)->Range(32, 4096)->Unit(benchmark::kMillisecond)->Complexity(benchmark::oN);

}  // namespace

BENCHMARK_MAIN();
