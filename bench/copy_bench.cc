// The host copy engine against a single memcpy of the same 256 MiB, in the
// same binary (the engine splits large copies over threads); and at a
// parameter's size (8 MiB), interleaved round by round, against memcpy and
// against starting a thread per copy (what the engine did before its
// workers were kept per calling thread).
// Run: build/bench/copy_bench
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "interleave.h"
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
  state.counters["GB_per_s"] =
      benchmark::Counter(static_cast<double>(kBytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Memcpy(benchmark::State& state) {
  for (auto _ : state) std::memcpy(Dst().data(), Src().data(), kBytes);
  Rate(state);
}
void BM_CopyEngine(benchmark::State& state) {
  for (auto _ : state) strata::exec::CopyBytes(Dst().data(), Src().data(), kBytes, static_cast<int>(state.range(0)));
  Rate(state);
}
// The copy engine's split over two threads, one of them started for the
// copy and joined after it.
void CopyStartingAThread(char* d, const char* s, size_t n) {
  const size_t chunk = (n / 2 + 4095) / 4096 * 4096;
  std::thread t([=] { std::memcpy(d + chunk, s + chunk, n - chunk); });
  std::memcpy(d, s, chunk);
  t.join();
}

void BM_CopyEngineAtParameterSize(benchmark::State& state) {
  constexpr size_t kParam = size_t{8} << 20;  // a 2048 x 2048 fp16 weight, as papers/sim-vs-real's MLPs copy
  char* d = Dst().data();
  const char* s = Src().data();
  // One run: copies for about 20 ms; its rate in GB/s.
  auto rate = [](auto copy) {
    return [copy] {
      const auto t0 = std::chrono::steady_clock::now();
      int k = 0;
      double t = 0;
      do {
        copy();
        ++k;
        t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } while (t < 0.02);
      return static_cast<double>(kParam) * k / t / 1e9;
    };
  };
  for (auto _ : state) {
    auto r = strata::bench::Interleave({{"memcpy", rate([=] { std::memcpy(d, s, kParam); })},
                                        {"thread_per_copy", rate([=] { CopyStartingAThread(d, s, kParam); })},
                                        {"copy_engine_2", rate([=] { strata::exec::CopyBytes(d, s, kParam, 2); })}},
                                       strata::bench::Rounds(), 0, "GB/s");
    strata::bench::Report(state, "8 MiB copies (one parameter)", r);
    std::printf("  copy engine over a thread per copy: per-round ratio %.3f / %.3f / %.3f (min / median / max)\n",
                r.RatioOf(2, 1).min, r.RatioOf(2, 1).median, r.RatioOf(2, 1).max);
  }
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_CopyEngineAtParameterSize)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CopyEngine)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
