// CPU Adam throughput against the memory roofline of the same access shape,
// measured in the same binary: a kernel that streams the same 4 fp32 arrays
// in and the same 3 out (p, m, v updated in place, g read) with no math.
// 28 bytes per parameter; the fp16 copy-out adds 2 (reported separately).
// Run: build/bench/adam_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "strata/executor/cpu_adam.h"

namespace {

constexpr size_t kN = size_t{48} << 20;  // 48M parameters: 1.3 GB per pass, far beyond the caches

// The low-precision copy goes to page-aligned memory, as pinned swap and
// device buffers are (the kernel streams it with non-temporal stores then).
struct PageAligned {
  template <typename T>
  struct Alloc {
    using value_type = T;
    Alloc() = default;
    template <typename U>
    Alloc(const Alloc<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(std::aligned_alloc(4096, (n * sizeof(T) + 4095) / 4096 * 4096)); }
    void deallocate(T* p, size_t) { std::free(p); }
    bool operator==(const Alloc&) const { return true; }
  };
};
struct Arrays {
  std::vector<float> p, g, m, v;
  std::vector<uint16_t, PageAligned::Alloc<uint16_t>> out;
  Arrays() : p(kN, 0.01f), g(kN, 0.5f), m(kN, 0.0f), v(kN, 0.0f), out(kN) {}
};
Arrays& A() {
  static Arrays a;
  return a;
}

// The roofline: same streams, no arithmetic worth mentioning, and the same
// software prefetch as the kernel (4 KiB ahead in each input stream), so
// the limit is the best this access shape gets here, not a handicapped one.
void Stream(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, size_t a,
            size_t b) {
  constexpr size_t kAhead = 1024;
  for (size_t i = a; i < b; i += 16) {
    if (i + kAhead < b) {
      __builtin_prefetch(p + i + kAhead);
      __builtin_prefetch(g + i + kAhead);
      __builtin_prefetch(m + i + kAhead);
      __builtin_prefetch(v + i + kAhead);
    }
    for (size_t j = i; j < std::min(b, i + 16); ++j) {
      p[j] = p[j] + g[j];
      m[j] = m[j] + g[j];
      v[j] = v[j] + g[j];
    }
  }
}
// Without the prefetch, as a compiler leaves a plain loop.
void StreamPlain(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, size_t a,
                 size_t b) {
  for (size_t i = a; i < b; ++i) {
    p[i] = p[i] + g[i];
    m[i] = m[i] + g[i];
    v[i] = v[i] + g[i];
  }
}

void Split(int threads, const std::function<void(size_t, size_t)>& fn) {
  const size_t chunk = (kN / static_cast<size_t>(threads) + 63) / 64 * 64;
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&, t] { fn(std::min(kN, t * chunk), std::min(kN, (t + 1) * chunk)); });
  fn(0, std::min(kN, chunk));
  for (auto& th : pool) th.join();
}

void Report(benchmark::State& state, double bytes_per_param) {
  state.counters["params_per_s"] = benchmark::Counter(static_cast<double>(kN), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB_per_s"] =
      benchmark::Counter(static_cast<double>(kN) * bytes_per_param / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Roofline(benchmark::State& state) {
  Arrays& a = A();
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) Split(threads, [&](size_t x, size_t y) { Stream(a.p.data(), a.g.data(), a.m.data(), a.v.data(), x, y); });
  Report(state, 28);
}
void BM_RooflineNoPrefetch(benchmark::State& state) {
  Arrays& a = A();
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state)
    Split(threads, [&](size_t x, size_t y) { StreamPlain(a.p.data(), a.g.data(), a.m.data(), a.v.data(), x, y); });
  Report(state, 28);
}

void BM_Adam(benchmark::State& state) {
  Arrays& a = A();
  const int threads = static_cast<int>(state.range(0));
  const bool copy_out = state.range(1) != 0;
  // 0: as the executor runs it (kAuto: its first six steps here tune it),
  // 1: prefetch forced on, 2: off.
  const auto mode = state.range(2) == 1 ? strata::exec::AdamPrefetch::kOn
                    : state.range(2) == 2 ? strata::exec::AdamPrefetch::kOff
                                          : strata::exec::AdamPrefetch::kAuto;
  strata::exec::SetCpuAdamPrefetch(mode);
  const auto c = strata::exec::MakeAdamStep(strata::exec::AdamConfig{}, 10);
  const strata::exec::AdamTile tile{a.p.data(), a.g.data(), a.m.data(), a.v.data(),
                                    copy_out ? a.out.data() : nullptr, strata::Precision::kFp16, kN};
  for (auto _ : state) strata::exec::CpuAdamStep(tile, c, threads);
  const bool prefetching = strata::exec::CpuAdamPrefetching();
  strata::exec::SetCpuAdamPrefetch(strata::exec::AdamPrefetch::kAuto);
  Report(state, 28);
  state.SetLabel(std::string(strata::exec::CpuAdamTarget()) + (copy_out ? " +fp16 copy" : "") +
                 (prefetching ? " prefetch" : " no prefetch") + (mode == strata::exec::AdamPrefetch::kAuto ? " (tuned)" : " (forced)"));
}

// The same math as a plain loop left to the compiler (-O3 -march=native
// -fno-math-errno in this file), for comparison with the dispatched kernel.
void PlainLoop(const strata::exec::AdamTile& t, const strata::exec::AdamStepConsts& c, size_t a, size_t b) {
  for (size_t i = a; i < b; ++i) strata::exec::AdamElement(t.params[i], t.grads[i], t.exp_avg[i], t.exp_avg_sq[i], c);
}
void BM_PlainLoop(benchmark::State& state) {
  Arrays& a = A();
  const int threads = static_cast<int>(state.range(0));
  const auto c = strata::exec::MakeAdamStep(strata::exec::AdamConfig{}, 10);
  const strata::exec::AdamTile tile{a.p.data(), a.g.data(), a.m.data(), a.v.data(), nullptr, strata::Precision::kFp16, kN};
  for (auto _ : state) Split(threads, [&](size_t x, size_t y) { PlainLoop(tile, c, x, y); });
  Report(state, 28);
}

// Interleaved so that machine noise hits both alike.
BENCHMARK(BM_Roofline)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_RooflineNoPrefetch)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Adam)->Args({1, 0, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Adam)->Args({1, 1, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Adam)->Args({1, 1, 1})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Adam)->Args({1, 1, 2})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_PlainLoop)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Roofline)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_RooflineNoPrefetch)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Adam)->Args({2, 0, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Adam)->Args({2, 1, 0})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Adam)->Args({2, 1, 1})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_Adam)->Args({2, 1, 2})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_PlainLoop)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
