// Eviction decisions per second for each policy on access traces of 1e4 to
// 1e7 accesses (training's pattern: forward then backward sweeps over 4096
// blocks of mixed sizes, the cache holding a quarter of them). The per-access
// cost is O(1) (LRU, FIFO) or O(log n) (LFU, Belady and cost-aware with a
// next-use index): the rate stays flat as traces grow.
// Run: build/bench/policy_bench
#include <benchmark/benchmark.h>

#include <random>

#include "strata/planner/eviction.h"

namespace {

std::vector<strata::Access> SweepTrace(int64_t n) {
  constexpr int kBlocks = 4096;
  std::mt19937 rng(7);
  std::vector<int64_t> size(kBlocks);
  for (auto& s : size) s = 1 + static_cast<int64_t>(rng() % 4);
  std::vector<strata::Access> t;
  t.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; static_cast<int64_t>(t.size()) < n; ++i) {
    const bool backward = (i / kBlocks) % 2 == 1;
    const int b = backward ? kBlocks - 1 - static_cast<int>(i % kBlocks) : static_cast<int>(i % kBlocks);
    // One access in eight goes to a hot block (the tied embedding, say).
    const int block = rng() % 8 == 0 ? static_cast<int>(rng() % 16) : b;
    t.push_back({block, size[block], static_cast<double>(size[block]) * (block % 3 == 0 ? 4.0 : 1.0)});
  }
  return t;
}

void BM_Policy(benchmark::State& state, strata::EvictionKind kind) {
  const auto trace = SweepTrace(state.range(0));
  const int64_t capacity = 4096 * 25 / 40;  // a quarter of the ~10k bytes
  strata::TraceResult r;
  for (auto _ : state) {
    r = strata::ReplayTrace(trace, capacity, kind);
    benchmark::DoNotOptimize(r);
  }
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(trace.size()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["hit_ratio"] = static_cast<double>(r.hits) / static_cast<double>(trace.size());
  state.SetComplexityN(state.range(0));
}

#define POLICY_BENCH(kind, name)                                 \
  BENCHMARK_CAPTURE(BM_Policy, name, strata::EvictionKind::kind) \
      ->RangeMultiplier(10)                                      \
      ->Range(10'000, 10'000'000)                                \
      ->Unit(benchmark::kMillisecond)                            \
      ->Iterations(1)                                            \
      ->Complexity(benchmark::oN)

POLICY_BENCH(kLru, lru);
POLICY_BENCH(kLfu, lfu);
POLICY_BENCH(kFifo, fifo);
POLICY_BENCH(kBelady, belady);
POLICY_BENCH(kCostAware, cost_aware);

}  // namespace

BENCHMARK_MAIN();
