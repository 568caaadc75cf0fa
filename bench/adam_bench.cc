// CPU Adam throughput against the memory roofline of the same access shape,
// measured in the same binary: a kernel that streams the same 4 fp32 arrays
// in and the same 3 out (p, m, v updated in place, g read) with no math.
// 28 bytes per parameter; the fp16 copy-out adds 2 (its own variant). The
// variants are interleaved round by round, the order rotating
// (bench/interleave.h): rates in G parameters/s, ratios to the roofline's
// rate in the same round (the better of the streaming kernel with and
// without software prefetch). 100M parameters (2.8 GB per pass).
// Run: build/bench/adam_bench   (STRATA_BENCH_ROUNDS, default 7)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "interleave.h"
#include "strata/executor/cpu_adam.h"

namespace {

constexpr size_t kN = size_t{100} * 1000 * 1000;  // 100M parameters: 2.8 GB per pass, far beyond the caches

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

// The roofline: same streams, no arithmetic worth mentioning, with the same
// software prefetch as the kernel (4 KiB ahead in each input stream) and
// without it (StreamPlain); the better of the two in each round is the
// limit, so it is the best this access shape gets here, not a handicapped
// one.
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

// One pass of fn; parameters per second, in G.
double Rate(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return static_cast<double>(kN) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
}

// The same math as a plain loop left to the compiler (-O3 -march=native
// -fno-math-errno in this file), for comparison with the dispatched kernel.
void PlainLoop(const strata::exec::AdamTile& t, const strata::exec::AdamStepConsts& c, size_t a, size_t b) {
  for (size_t i = a; i < b; ++i) strata::exec::AdamElement(t.params[i], t.grads[i], t.exp_avg[i], t.exp_avg_sq[i], c);
}

void BM_Adam(benchmark::State& state) {
  using strata::exec::AdamPrefetch;
  Arrays& a = A();
  const int threads = static_cast<int>(state.range(0));
  const auto c = strata::exec::MakeAdamStep(strata::exec::AdamConfig{}, 10);
  const strata::exec::AdamTile tile{a.p.data(), a.g.data(), a.m.data(), a.v.data(), nullptr, strata::Precision::kFp16,
                                    kN};
  strata::exec::AdamTile copy = tile;
  copy.out16 = a.out.data();
  // The executor's own setting (kAuto) tunes itself over its first steps.
  strata::exec::SetCpuAdamPrefetch(AdamPrefetch::kAuto);
  for (int i = 0; i < 6; ++i) strata::exec::CpuAdamStep(copy, c, threads);
  const bool tuned_prefetch = strata::exec::CpuAdamPrefetching();
  auto adam = [&](const strata::exec::AdamTile& t, AdamPrefetch mode) {
    return [&, mode] {
      strata::exec::SetCpuAdamPrefetch(mode);
      return Rate([&] { strata::exec::CpuAdamStep(t, c, threads); });
    };
  };
  const std::vector<strata::bench::Variant> v = {
      {"roofline",
       [&] {
         return Rate([&] {
           Split(threads, [&](size_t x, size_t y) { Stream(a.p.data(), a.g.data(), a.m.data(), a.v.data(), x, y); });
         });
       }},
      {"roofline_no_prefetch",
       [&] {
         return Rate([&] {
           Split(threads,
                 [&](size_t x, size_t y) { StreamPlain(a.p.data(), a.g.data(), a.m.data(), a.v.data(), x, y); });
         });
       }},
      {"adam", adam(tile, tuned_prefetch ? AdamPrefetch::kOn : AdamPrefetch::kOff)},
      {"adam+fp16_copy", adam(copy, tuned_prefetch ? AdamPrefetch::kOn : AdamPrefetch::kOff)},
      {"adam_prefetch_on", adam(tile, AdamPrefetch::kOn)},
      {"adam_prefetch_off", adam(tile, AdamPrefetch::kOff)},
      {"plain_loop",
       [&] { return Rate([&] { Split(threads, [&](size_t x, size_t y) { PlainLoop(tile, c, x, y); }); }); }},
  };
  for (auto _ : state) {
    auto r = strata::bench::Interleave(v, strata::bench::Rounds(), 0, "Gparam/s");
    // The roofline is the better of the two streaming kernels in each round:
    // software prefetch helps on some CPUs (Cascade Lake) and costs on
    // others (Zen 3: 0.91 of the plain loop).
    r.reference = r.AddBestOf("roofline_best", 0, 1);
    strata::bench::Report(state,
                          std::to_string(threads) + " thread(s), " + strata::exec::CpuAdamTarget() +
                              ", the executor's tuning: prefetch " + (tuned_prefetch ? "on" : "off") +
                              " (28 B/param; the copy adds 2)",
                          r);
  }
  strata::exec::SetCpuAdamPrefetch(AdamPrefetch::kAuto);
}

BENCHMARK(BM_Adam)->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
