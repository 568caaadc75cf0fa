// The fused CPU Adam kernel, compiled once per SIMD target by Highway
// (foreach_target re-includes this file) and dispatched at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/cpu_adam.cc"
#include "strata/executor/cpu_adam.h"

#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "host/worker_pool.h"

HWY_BEFORE_NAMESPACE();
namespace strata::exec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Same operations, same order as AdamElement (no fused multiply-add).
void AdamKernel(const AdamTile& t, const AdamStepConsts& c, size_t begin, size_t end, bool prefetch) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint16_t, decltype(di)> d16;
  const hn::Rebind<hwy::float16_t, decltype(d)> dh;
  const size_t N = hn::Lanes(d);
  const auto gs = hn::Set(d, c.grad_scale), l2 = hn::Set(d, c.l2), b1 = hn::Set(d, c.beta1);
  const auto omb1 = hn::Set(d, c.one_minus_beta1), b2 = hn::Set(d, c.beta2), omb2 = hn::Set(d, c.one_minus_beta2);
  const auto eps = hn::Set(d, c.eps), ib2 = hn::Set(d, c.inv_bias2_sqrt), decay = hn::Set(d, c.decay);
  const auto step = hn::Set(d, c.step_size);
  const auto bias = hn::Set(du, 0x7fffu), one = hn::Set(du, 1u), qnan = hn::Set(du, 0x40u);
  // The low-precision copy is written only: non-temporal stores skip reading
  // its lines first (2 of the 30 bytes per parameter) when its vectors are
  // aligned, as they are for page-aligned buffers split at 64 elements.
  // Only whole vectors of at least 16 bytes: a narrower (partial) vector's
  // non-temporal store still writes 16 bytes (SSE4: 4 lanes of 2 bytes).
  const bool stream = t.out16 != nullptr && N * 2 >= 16 && reinterpret_cast<uintptr_t>(t.out16 + begin) % (N * 2) == 0;
  auto one_vector = [&](size_t i) HWY_ATTR {
    auto p = hn::LoadU(d, t.params + i);
    auto g = hn::Mul(hn::LoadU(d, t.grads + i), gs);
    g = hn::Add(g, hn::Mul(l2, p));
    const auto m = hn::Add(hn::Mul(b1, hn::LoadU(d, t.exp_avg + i)), hn::Mul(omb1, g));
    const auto v = hn::Add(hn::Mul(b2, hn::LoadU(d, t.exp_avg_sq + i)), hn::Mul(omb2, hn::Mul(g, g)));
    const auto denom = hn::Add(hn::Mul(hn::Sqrt(v), ib2), eps);
    p = hn::Sub(p, hn::Mul(decay, p));
    p = hn::Sub(p, hn::Mul(step, hn::Div(m, denom)));
    hn::StoreU(p, d, t.params + i);
    hn::StoreU(m, d, t.exp_avg + i);
    hn::StoreU(v, d, t.exp_avg_sq + i);
    if (t.out16 == nullptr) return;
    if (t.out_precision == Precision::kBf16) {
      // Round to nearest even in the integer domain, as FloatToBf16 does.
      const auto u = hn::BitCast(du, p);
      auto r = hn::ShiftRight<16>(hn::Add(hn::Add(u, bias), hn::And(hn::ShiftRight<16>(u), one)));
      r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(p)), hn::Or(hn::ShiftRight<16>(u), qnan), r);
      // Values fit in 16 bits: the saturating i32 -> u16 demotion keeps them.
      const auto h = hn::DemoteTo(d16, hn::BitCast(di, r));
      if (stream)
        hn::Stream(h, d16, t.out16 + i);
      else
        hn::StoreU(h, d16, t.out16 + i);
    } else {
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || HWY_ARCH_ARM_A64
      const auto h = hn::BitCast(d16, hn::DemoteTo(dh, p));
      if (stream)
        hn::Stream(h, d16, t.out16 + i);
      else
        hn::StoreU(h, d16, t.out16 + i);
#else
      // No hardware fp16 conversion: Highway's emulation truncates; round
      // as FloatToHalf does, element by element.
      (void)dh;
      for (size_t j = 0; j < N; ++j) t.out16[i + j] = FloatToHalf(t.params[i + j]);
#endif
    }
  };
  size_t i = begin;
  constexpr size_t kAhead = 1024;  // elements: 4 KiB ahead in each stream
  for (; i + N <= end; i += N) {
    if (prefetch && i % 16 == 0 && i + kAhead < end) {  // one prefetch per cache line of each stream
      hwy::Prefetch(t.params + i + kAhead);
      hwy::Prefetch(t.grads + i + kAhead);
      hwy::Prefetch(t.exp_avg + i + kAhead);
      hwy::Prefetch(t.exp_avg_sq + i + kAhead);
    }
    one_vector(i);
  }
  if (stream) hwy::FlushStream();
  for (; i < end; ++i) {
    AdamElement(t.params[i], t.grads[i], t.exp_avg[i], t.exp_avg_sq[i], c);
    if (t.out16 != nullptr)
      t.out16[i] = t.out_precision == Precision::kBf16 ? FloatToBf16(t.params[i]) : FloatToHalf(t.params[i]);
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace strata::exec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace strata::exec {

HWY_EXPORT(AdamKernel);
HWY_EXPORT(TargetName);

namespace {

std::atomic<int> g_prefetch{static_cast<int>(AdamPrefetch::kAuto)};

// kAuto's tuning: the first kTrials steps of at least kTuneElements
// parameters alternate with and without prefetch (on, off, off, on, on,
// off); their rates decide for every later step. The results are the same
// bits either way, so which step runs how does not matter.
constexpr size_t kTuneElements = size_t{4} << 20;
constexpr int kTrials = 6;
struct Tuning {
  std::mutex mu;
  int trials = 0;          // large steps started as trials
  int reported = 0;        // trials finished
  double seconds[2] = {};  // per setting: [0] without, [1] with
  double elements[2] = {};
  std::atomic<int> decided{-1};  // -1: not yet; else 0 or 1
};
Tuning& Tune() {
  static Tuning t;
  return t;
}

void RunStep(const AdamTile& tile, const AdamStepConsts& c, size_t parts, bool prefetch) {
  const size_t n = tile.n;
  if (parts == 1 || n < 4096 * parts) {
    HWY_DYNAMIC_DISPATCH(AdamKernel)(tile, c, 0, n, prefetch);
    return;
  }
  // Chunks are multiples of 64 elements (a cache line of every stream).
  const size_t chunk = (n / parts + 63) / 64 * 64;
  // The calling thread's team, kept across steps as DeepSpeedCPUAdam's
  // OpenMP team is (`#pragma omp parallel for` in its Step_AVX).
  const AdamTile* t = &tile;
  const AdamStepConsts* k = &c;
  CallingThreadPool(static_cast<int>(parts)).Run(static_cast<int>(parts), [t, k, n, chunk, prefetch](int part) {
    const size_t a = std::min(n, static_cast<size_t>(part) * chunk),
                 b = std::min(n, (static_cast<size_t>(part) + 1) * chunk);
    if (a < b) HWY_DYNAMIC_DISPATCH(AdamKernel)(*t, *k, a, b, prefetch);
  });
}

}  // namespace

void SetCpuAdamPrefetch(AdamPrefetch p) { g_prefetch.store(static_cast<int>(p)); }

bool CpuAdamPrefetching() {
  switch (static_cast<AdamPrefetch>(g_prefetch.load())) {
    case AdamPrefetch::kOn:
      return true;
    case AdamPrefetch::kOff:
      return false;
    case AdamPrefetch::kAuto:
      break;
  }
  return Tune().decided.load() != 0;  // prefetch until tuned otherwise
}

void CpuAdamStep(const AdamTile& tile, const AdamStepConsts& c, int threads) {
  const size_t parts = static_cast<size_t>(std::max(1, threads));
  Tuning& tune = Tune();
  int trial = -1;  // this step's place among the tuning trials, if it is one
  if (static_cast<AdamPrefetch>(g_prefetch.load()) == AdamPrefetch::kAuto && tune.decided.load() < 0 &&
      tile.n >= kTuneElements) {
    std::lock_guard<std::mutex> l(tune.mu);
    if (tune.trials < kTrials) trial = tune.trials++;
  }
  if (trial < 0) return RunStep(tile, c, parts, CpuAdamPrefetching());
  const bool with = (trial % 2 == 0) == (trial / 2 % 2 == 0);
  const auto t0 = std::chrono::steady_clock::now();
  RunStep(tile, c, parts, with);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> l(tune.mu);
  tune.seconds[with] += took;
  tune.elements[with] += static_cast<double>(tile.n);
  if (++tune.reported == kTrials)  // the faster rate wins
    tune.decided.store(tune.elements[1] / tune.seconds[1] > tune.elements[0] / tune.seconds[0] ? 1 : 0);
}

void ReferenceAdamStep(const AdamTile& t, const AdamStepConsts& c) {
  for (size_t i = 0; i < t.n; ++i) {
    AdamElement(t.params[i], t.grads[i], t.exp_avg[i], t.exp_avg_sq[i], c);
    if (t.out16 != nullptr)
      t.out16[i] = t.out_precision == Precision::kBf16 ? FloatToBf16(t.params[i]) : FloatToHalf(t.params[i]);
  }
}

const char* CpuAdamTarget() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace strata::exec
#endif  // HWY_ONCE
