// The host copy engine against a single memcpy of the same 256 MiB, in the
// same binary (the engine splits large copies over threads).
// Run: build/bench/copy_bench
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "strata/executor/copy_engine.h"

namespace {

constexpr size_t kBytes = size_t{256} << 20;
std::vector<char>& Src() {
  static std::vector<char> v(kBytes, 1);
  return v;
}
std::vector<char>& Dst() {
  static std::vector<char> v(kBytes, 2);
  return v;
}

void Rate(benchmark::State& state) {
  state.counters["GB_per_s"] = benchmark::Counter(static_cast<double>(kBytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Memcpy(benchmark::State& state) {
  for (auto _ : state) std::memcpy(Dst().data(), Src().data(), kBytes);
  Rate(state);
}
void BM_CopyEngine(benchmark::State& state) {
  for (auto _ : state) strata::exec::CopyBytes(Dst().data(), Src().data(), kBytes, static_cast<int>(state.range(0)));
  Rate(state);
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_CopyEngine)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
