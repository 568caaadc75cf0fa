// Eviction decisions per second for each policy on access traces of 1e4 to
// 1e7 accesses (training's pattern: forward then backward sweeps over 4096
// blocks of mixed sizes, the cache holding a quarter of them). The per-access
// cost is O(1) (LRU, FIFO) or O(log n) (LFU, Belady and cost-aware with a
// next-use index): the rate stays flat as traces grow.
// Run: build/bench/policy_bench   (~1 minute; STRATA_BENCH_ROUNDS, default 7)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "interleave.h"
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

// The five policies on one trace, interleaved round by round (bench/
// interleave.h): decisions per second and the per-round ratio to LRU's, the
// cheapest bookkeeping (a list and a map). Two trace lengths, 1e5 and 1e7
// accesses: each policy's rate staying put between them is the O(1) or
// O(log n) per access above.
void BM_Policies(benchmark::State& state) {
  const auto trace = SweepTrace(state.range(0));
  const int64_t capacity = 4096 * 25 / 40;  // a quarter of the ~10k bytes
  const std::pair<const char*, strata::EvictionKind> kinds[] = {{"lru", strata::EvictionKind::kLru},
                                                                {"lfu", strata::EvictionKind::kLfu},
                                                                {"fifo", strata::EvictionKind::kFifo},
                                                                {"belady", strata::EvictionKind::kBelady},
                                                                {"cost_aware", strata::EvictionKind::kCostAware}};
  std::vector<strata::bench::Variant> v;
  std::vector<double> hit_ratio(std::size(kinds));  // sized once: the variants hold references
  for (size_t k = 0; k < std::size(kinds); ++k) {
    const strata::EvictionKind kind = kinds[k].second;
    v.push_back({kinds[k].first, [&trace, capacity, kind, &h = hit_ratio[k]] {
                   const auto t0 = std::chrono::steady_clock::now();
                   const strata::TraceResult r = strata::ReplayTrace(trace, capacity, kind);
                   const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                   h = static_cast<double>(r.hits) / static_cast<double>(trace.size());
                   return static_cast<double>(trace.size()) / secs / 1e6;
                 }});
  }
  for (auto _ : state) {
    const auto r = strata::bench::Interleave(v, strata::bench::Rounds(), 0, "M decisions/s");
    strata::bench::Report(state, std::to_string(trace.size()) + " accesses", r);
    std::printf("  hit ratio:");
    for (size_t k = 0; k < v.size(); ++k) std::printf(" %s %.3f", v[k].name.c_str(), hit_ratio[k]);
    std::printf("\n");
  }
}
BENCHMARK(BM_Policies)->Arg(100'000)->Arg(10'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
