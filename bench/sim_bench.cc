// Simulator throughput, end to end (fork, platform, replay, timeline): SimGrid
// activities per second at ~10k, ~100k and ~1M activities (the DGX-2 1T
// scenario at 10, 100 and 1000 layers), and the 1T-parameter 512-GPU scenario
// with the simulating process's peak memory.
// Run: build/bench/sim_bench
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "interleave.h"
#include "strata/config/scenario_loader.h"
#include "strata/planner/planner.h"
#include "strata/simulator/simulator.h"

namespace {

strata::Scenario LoadFile(const std::string& path) {
  auto r = strata::config::LoadScenarioFile(path);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}
strata::Scenario Load(const char* name) { return LoadFile(std::string("builtin:") + name); }

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

// A variant of the replay (replay.h), as k activities per second of
// Simulate's wall time; errors go to *error.
std::function<double()> Rate(const strata::Plan& plan, const strata::HardwareSpec& hw, const strata::sim::SimOptions& o,
                             bool owners, bool signals, bool domains, std::string* error) {
  return [&plan, &hw, o, owners, signals, domains, error] {
    strata::sim::SimOptions oo = o;
    oo.activity_owners_from_ranks = owners ? 0 : std::numeric_limits<int>::max();
    oo.signal_completions = signals;
    oo.flow_domains = domains;
    auto r = strata::sim::Simulate(plan, hw, oo);
    if (!r.ok()) {
      *error = r.status().message();
      return 0.0;
    }
    return static_cast<double>(r->activities) / r->wall_s / 1e3;
  };
}

// Up to 3 interleaved rounds of the variants (their errors land in
// `error`), reported under `label`.
void Rounds(benchmark::State& state, const std::vector<strata::bench::Variant>& v, const std::string& error,
            const std::string& label) {
  const auto r = strata::bench::Interleave(v, std::min(strata::bench::Rounds(), 3), 0, "k activities/s");
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  strata::bench::Report(state, label, r);
}

// The replay's ways of creating and reporting activities (replay.h),
// interleaved, in activities/s of the child (SimResult::wall_s, platform
// included): maestro creating every activity, owner actors waiting on
// theirs, owners' activities reported by the network's signal, and that
// with flows shared by the replay in flow domains (the default). The 1T
// GPT symmetric on 512 GPUs, and every node simulated with a few of its
// 128 layers on 256 to 4096 GPUs (so that the trend with
// the ranks shows; the larger cases with fewer layers, so that the
// platform's setup weighs more).
void BM_ActivityOwners(benchmark::State& state) {
  strata::Scenario s = Load("gpt-1t-512gpu");
  const int gpus = static_cast<int>(state.range(0));
  strata::sim::SimOptions o;
  if (gpus > 0) {
    s.model.layers = static_cast<int>(state.range(1));
    s.hardware.nodes = gpus / s.hardware.gpus_per_node;
    o.reduce_symmetric_nodes = false;
  }
  auto plan = strata::BuildPlan(s);
  if (!plan.ok()) {
    state.SkipWithError(plan.status().message().c_str());
    return;
  }
  std::string error;
  auto run = [&](bool owners, bool signals, bool domains) {
    return Rate(*plan, s.hardware, o, owners, signals, domains, &error);
  };
  const std::vector<strata::bench::Variant> v = {{"maestro", run(false, false, false)},
                                                 {"owners", run(true, false, false)},
                                                 {"signals", run(true, true, false)},
                                                 {"signals+domains", run(true, true, true)}};
  for (auto _ : state)
    Rounds(state, v, error,
           gpus > 0 ? "all nodes, " + std::to_string(s.model.layers) + " layers, " + std::to_string(gpus) + " GPUs"
                    : "symmetric, 512 GPUs");
}
BENCHMARK(BM_ActivityOwners)
    ->Args({0, 0})
    ->Args({256, 16})
    ->Args({512, 16})
    ->Args({1024, 16})
    ->Args({2048, 8})
    ->Args({4096, 4})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

// Issue #20's scaling cases, every node simulated, signal mode with every
// flow a SimGrid activity and with flow domains (flow_domains.h),
// interleaved: the whole 1T
// GPT (128 layers) on 256, 512 and 1024 GPUs, and the 10T GPT of Fig. 5a
// (tensor parallel 4, so that NVLink is shared at times) with a few of its
// 195 layers on 1024 and 4096 GPUs. Minutes a round at 1024 GPUs: run it
// by name.
void BM_FlowDomains(benchmark::State& state) {
  const bool ten_t = state.range(0) == 10;
  strata::Scenario s =
      ten_t ? LoadFile(STRATA_SOURCE_DIR "/papers/zero-infinity/fig5a-10t.yaml") : Load("gpt-1t-512gpu");
  const int gpus = static_cast<int>(state.range(1));
  s.hardware.nodes = gpus / s.hardware.gpus_per_node;
  if (state.range(2) > 0) s.model.layers = static_cast<int>(state.range(2));
  strata::sim::SimOptions o;
  o.reduce_symmetric_nodes = false;
  o.max_op_instances = int64_t{1} << 40;
  o.timeout_s = 3600;
  auto plan = strata::BuildPlan(s);
  if (!plan.ok()) {
    state.SkipWithError(plan.status().message().c_str());
    return;
  }
  std::string error;
  const std::vector<strata::bench::Variant> v = {
      {"signals", Rate(*plan, s.hardware, o, true, true, false, &error)},
      {"signals+domains", Rate(*plan, s.hardware, o, true, true, true, &error)}};
  for (auto _ : state)
    Rounds(state, v, error,
           std::string(ten_t ? "10T" : "1T") + " GPT, " + std::to_string(s.model.layers) + " layers, " +
               std::to_string(gpus) + " GPUs, all nodes");
}
BENCHMARK(BM_FlowDomains)
    ->Args({1, 256, 0})
    ->Args({1, 512, 0})
    ->Args({1, 1024, 0})
    ->Args({10, 1024, 12})
    ->Args({10, 4096, 4})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
