// Planning cost: scenario -> plan (and the validator's replay), for the
// shipped 1T-parameter scenarios and a sweep of depths to show linearity.
// Run: build/bench/plan_bench --benchmark_counter_table=true
#include <benchmark/benchmark.h>

#include <chrono>

#include "strata/config/scenario_loader.h"
#include "strata/plan/validator.h"
#include "strata/planner/planner.h"

namespace {

strata::Scenario Load(const char* name) {
  auto r = strata::config::LoadScenarioFile(std::string("builtin:") + name);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

void Report(benchmark::State& state, size_t ops) {
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
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
BENCHMARK(BM_PlanLayers)
    ->RangeMultiplier(2)
    ->Range(16, 4096)
    ->MinWarmUpTime(0.5)
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oN);

// A large data-parallel world under ZeRO-1: DeepSpeed's stages 1-2 cut one
// flat buffer across the ranks, so the plan's reduce and step moves name
// ranks, and the validator tracks each rank's bytes. Planning and
// validation, each timed, for 1 to 128 nodes of 1,024 GPUs: both should
// grow linearly with the ranks (the hazard tracker once grew with their
// square: 16 x 1,024 took 12.6 s to validate).
void BM_PlanAndValidateWorld(benchmark::State& state) {
  auto s = strata::config::ParseScenario(
      "name: world\nmodel: {kind: transformer, layers: 4, hidden_size: 1024, num_heads: 16, seq_length: 512}\n"
      "hardware:\n  gpus_per_node: 1024\n  gpu: {memory: 80GiB, peak_flops: 312TFLOPS}\n  cpu: {memory: 1TiB}\n"
      "zero_optimization: {stage: 1}\n",
      "world.yaml");
  if (!s.ok()) {
    state.SkipWithError(s.status().message().c_str());
    return;
  }
  s->hardware.nodes = static_cast<int>(state.range(0));
  double plan_s = 0, validate_s = 0;
  size_t ops = 0, moves = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto plan = strata::BuildPlan(*s);
    const auto t1 = std::chrono::steady_clock::now();
    if (!plan.ok()) {
      state.SkipWithError(plan.status().message().c_str());
      return;
    }
    auto report = strata::ValidatePlan(*plan);
    const auto t2 = std::chrono::steady_clock::now();
    if (!report.ok()) state.SkipWithError(report.violations.front().message.c_str());
    plan_s += std::chrono::duration<double>(t1 - t0).count();
    validate_s += std::chrono::duration<double>(t2 - t1).count();
    ops = plan->ops.size();
    moves = 0;
    for (const strata::Op& op : plan->ops) moves += op.moves.size();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["ranks"] = static_cast<double>(s->hardware.world_size());
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["moves"] = static_cast<double>(moves);
  state.counters["plan_s"] = plan_s / n;
  state.counters["validate_s"] = validate_s / n;
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_PlanAndValidateWorld)
    ->RangeMultiplier(2)
    ->Range(1, 128)
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->Complexity(benchmark::oN);

}  // namespace

BENCHMARK_MAIN();
