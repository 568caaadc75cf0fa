// Precision conversions, compiled once per SIMD target by Highway
// (foreach_target re-includes this file) and dispatched at run time. The
// bf16 rounding is done in the integer domain exactly as FloatToBf16; fp16
// uses the hardware conversion (F16C), which rounds to nearest even like
// FloatToHalf. Tails fall back to the scalar functions.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/convert.cc"
#include "host/convert.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "host/low_precision.h"
#include "host/widen-inl.h"

HWY_BEFORE_NAMESPACE();
namespace strata::exec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using D16 = hn::Rebind<uint16_t, DF>;
using DH = hn::Rebind<hwy::float16_t, DF>;

// The vector path's loads (widen-inl.h; kVectorFp16 says where fp16 takes it).
HWY_INLINE hn::Vec<DF> Load(const void* base, size_t i, bool bf16) { return LoadWidened(DF(), base, i, bf16); }

HWY_INLINE hn::Vec<D16> Narrow(hn::Vec<DF> f, bool bf16) {
  if (bf16) {
    const DU du;
    const auto u = hn::BitCast(du, f);
    auto r =
        hn::ShiftRight<16>(hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u))));
    r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(f)), hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u)), r);
    return hn::DemoteTo(D16(), hn::BitCast(DI(), r));  // values fit in 16 bits
  }
  return hn::BitCast(D16(), hn::DemoteTo(DH(), f));
}

HWY_INLINE hn::Vec<DF> Widen(hn::Vec<D16> h, bool bf16) {
  if (bf16) return hn::BitCast(DF(), hn::ShiftLeft<16>(hn::PromoteTo(DU(), h)));
  return hn::PromoteTo(DF(), hn::BitCast(DH(), h));
}

void LowToFloatImpl(const void* src, float* dst, size_t n, Precision p) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const bool bf16 = p == Precision::kBf16;
  size_t i = 0;
  const size_t vec_end = bf16 || kVectorFp16 ? n : 0;  // else all scalar
  for (; i + N <= vec_end; i += N) hn::StoreU(Load(src, i, bf16), d, dst + i);
  const LowPrecision lp(p);
  for (; i < n; ++i) dst[i] = lp.Load(static_cast<const std::byte*>(src), i);
}

void FloatToLowImpl(const float* src, void* dst, size_t n, Precision p) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const bool bf16 = p == Precision::kBf16;
  auto* out = static_cast<uint16_t*>(dst);
  size_t i = 0;
  const size_t vec_end = bf16 || kVectorFp16 ? n : 0;  // else all scalar
  for (; i + N <= vec_end; i += N) hn::StoreU(Narrow(hn::LoadU(d, src + i), bf16), D16(), out + i);
  const LowPrecision lp(p);
  for (; i < n; ++i) lp.Store(static_cast<std::byte*>(dst), i, src[i]);
}

// dst = round(dst + (round_src ? round(src) : src)), src in fp32; with
// onto_zeros, dst is taken as +0 and not read.
bool AccumulateImpl(void* dst, const float* src_f, const void* src_low, size_t n, Precision p,
                    bool onto_zeros = false) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const bool bf16 = p == Precision::kBf16;
  auto* out = static_cast<uint16_t*>(dst);
  auto finite = hn::Eq(hn::Zero(d), hn::Zero(d));
  size_t i = 0;
  const size_t vec_end = bf16 || kVectorFp16 ? n : 0;  // else all scalar
  for (; i + N <= vec_end; i += N) {
    const auto s = src_f != nullptr ? Widen(Narrow(hn::LoadU(d, src_f + i), bf16), bf16) : Load(src_low, i, bf16);
    const auto r = Narrow(hn::Add(onto_zeros ? hn::Zero(d) : Load(dst, i, bf16), s), bf16);
    hn::StoreU(r, D16(), out + i);
    finite = hn::And(finite, hn::IsFinite(Widen(r, bf16)));
  }
  bool overflow = !hn::AllTrue(d, finite);
  const LowPrecision lp(p);
  auto* b = static_cast<std::byte*>(dst);
  for (; i < n; ++i) {
    const float s = src_f != nullptr ? lp.Round(src_f[i]) : lp.Load(static_cast<const std::byte*>(src_low), i);
    lp.Store(b, i, (onto_zeros ? 0.0f : lp.Load(b, i)) + s);
    overflow |= !std::isfinite(lp.Load(b, i));
  }
  return overflow;
}

// d[i] = d[i] (or 0) + s[i] in fp32; whether any sum is not finite.
bool AccumulateFp32Impl(float* dst, const float* src, size_t n, bool onto_zeros) {
  const DF d;
  const size_t N = hn::Lanes(d);
  auto finite = hn::Eq(hn::Zero(d), hn::Zero(d));
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto r = hn::Add(onto_zeros ? hn::Zero(d) : hn::LoadU(d, dst + i), hn::LoadU(d, src + i));
    hn::StoreU(r, d, dst + i);
    finite = hn::And(finite, hn::IsFinite(r));
  }
  bool overflow = !hn::AllTrue(d, finite);
  for (; i < n; ++i) {
    dst[i] = (onto_zeros ? 0.0f : dst[i]) + src[i];
    overflow |= !std::isfinite(dst[i]);
  }
  return overflow;
}

bool AccumulateFloatsImpl(void* dst, const float* src, size_t n, Precision p, bool onto_zeros) {
  return AccumulateImpl(dst, src, nullptr, n, p, onto_zeros);
}
bool AccumulateLowImpl(void* dst, const void* src, size_t n, Precision p) {
  return AccumulateImpl(dst, nullptr, src, n, p);
}

}  // namespace HWY_NAMESPACE
}  // namespace strata::exec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace strata::exec {

HWY_EXPORT(LowToFloatImpl);
HWY_EXPORT(FloatToLowImpl);
HWY_EXPORT(AccumulateFloatsImpl);
HWY_EXPORT(AccumulateLowImpl);

HWY_EXPORT(AccumulateFp32Impl);

namespace {
bool AccumulateFp32(float* d, const float* s, size_t n, bool onto_zeros = false) {
  return HWY_DYNAMIC_DISPATCH(AccumulateFp32Impl)(d, s, n, onto_zeros);
}
}  // namespace

void LowToFloat(const void* src, float* dst, size_t n, Precision p) {
  if (p == Precision::kFp32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  HWY_DYNAMIC_DISPATCH(LowToFloatImpl)(src, dst, n, p);
}
void FloatToLow(const float* src, void* dst, size_t n, Precision p) {
  if (p == Precision::kFp32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  HWY_DYNAMIC_DISPATCH(FloatToLowImpl)(src, dst, n, p);
}
bool AccumulateFloatsToLow(void* dst, const float* src, size_t n, Precision p, bool onto_zeros) {
  if (p == Precision::kFp32) return AccumulateFp32(static_cast<float*>(dst), src, n, onto_zeros);
  return HWY_DYNAMIC_DISPATCH(AccumulateFloatsImpl)(dst, src, n, p, onto_zeros);
}
bool AccumulateLow(void* dst, const void* src, size_t n, Precision p) {
  if (p == Precision::kFp32) return AccumulateFp32(static_cast<float*>(dst), static_cast<const float*>(src), n);
  return HWY_DYNAMIC_DISPATCH(AccumulateLowImpl)(dst, src, n, p);
}

}  // namespace strata::exec
#endif  // HWY_ONCE
