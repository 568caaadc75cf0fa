// Planning cost: scenario -> plan (and the validator's replay), for the
// shipped 1T-parameter scenarios, depths from 16 to 4096 layers to show
// linearity, and worlds of up to 128 x 1024 ranks.
// Run: build/bench/plan_bench --benchmark_filter=PlanDepths   (~30 s)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "interleave.h"
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

// Linearity: the 512-GPU scenario planned at 16 to 4096 layers, the depths
// interleaved round by round (bench/interleave.h), each depth's rate in ops
// per second over the 16-layer rate of the same round: flat is 1.0.
// Two ways, each timing BuildPlan alone:
// - "warm": plans repeated in this process (at least 20 ms of them), after
//   one untimed plan, so the allocator hands out memory it has mapped
//   before: the rate of `strata tune` and sweeps, which plan many times;
// - "first": the first plan of a new process (this binary run again), whose
//   every page is faulted in as it is written, as in a one-shot
//   `strata plan`.
constexpr int kDepths[] = {16, 64, 256, 1024, 4096};

strata::Scenario AtDepth(const strata::Scenario& base, int layers) {
  strata::Scenario s = base;
  s.model.layers = layers;
  return s;
}

double WarmRate(const strata::Scenario& s) {
  size_t ops = 0;
  double secs = 0;
  while (secs < 0.02) {
    const auto t0 = std::chrono::steady_clock::now();
    auto plan = strata::BuildPlan(s);
    secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!plan.ok()) return 0;
    ops += plan->ops.size();
  }
  return static_cast<double>(ops) / secs / 1e6;
}

// One plan of `s`, timed: ops per second, in millions.
double TimedPlanRate(const strata::Scenario& s) {
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = strata::BuildPlan(s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return plan.ok() ? static_cast<double>(plan->ops.size()) / secs / 1e6 : 0;
}

// The rate of a fresh process's first plan: this binary run again as
// `plan_bench --first-plan LAYERS` (main below), which prints it.
double FirstRate(int layers) {
  const std::string cmd = "/proc/" + std::to_string(::getpid()) + "/exe --first-plan " + std::to_string(layers);
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return 0;
  double rate = 0;
  if (std::fscanf(f, "%lf", &rate) != 1) rate = 0;
  ::pclose(f);
  return rate;
}

void BM_PlanDepths(benchmark::State& state, bool first) {
  const strata::Scenario base = Load("gpt-1t-512gpu");
  std::vector<strata::bench::Variant> v;
  for (int d : kDepths) {
    const strata::Scenario s = AtDepth(base, d);
    if (!first) (void)strata::BuildPlan(s);  // the untimed plan
    v.push_back({std::to_string(d) + "_layers", [s, d, first] { return first ? FirstRate(d) : WarmRate(s); }});
  }
  for (auto _ : state) {
    const auto r = strata::bench::Interleave(v, strata::bench::Rounds(), 0, "M ops/s");
    for (const auto& rates : r.rates)
      if (std::find(rates.begin(), rates.end(), 0.0) != rates.end()) {
        state.SkipWithError("planning failed");
        return;
      }
    strata::bench::Report(state,
                          std::string("planning rate by depth, ") +
                              (first ? "each the first plan of a forked process" : "repeated in one process"),
                          r);
  }
}
BENCHMARK_CAPTURE(BM_PlanDepths, warm, false)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanDepths, first, true)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

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

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--first-plan") {  // FirstRate's child
    std::printf("%.9g\n", TimedPlanRate(AtDepth(Load("gpt-1t-512gpu"), std::atoi(argv[2]))));
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
