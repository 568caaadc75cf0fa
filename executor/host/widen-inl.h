// Per-target widening of 16-bit floats to fp32 in vectors, shared by the
// conversions (convert.cc) and the Linear kernels' weight packing
// (linear_kernels.cc), so both widen alike. Highway's -inl.h convention:
// included once per target from a file that foreach_target re-includes
// (the guard toggles with HWY_TARGET_TOGGLE).
#if defined(STRATA_HOST_WIDEN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef STRATA_HOST_WIDEN_INL_H_
#undef STRATA_HOST_WIDEN_INL_H_
#else
#define STRATA_HOST_WIDEN_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace strata::exec {
namespace HWY_NAMESPACE {

// fp16 through the vector unit only where the conversion is the hardware's
// IEEE one (F16C from AVX2 up, AArch64): Highway emulates it elsewhere
// (SSE4, EMU128) with truncation and no inf/NaN, which would round
// differently and hide overflow. Other targets take the scalar path.
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || HWY_ARCH_ARM_A64
constexpr bool kVectorFp16 = true;
#else
constexpr bool kVectorFp16 = false;
#endif

// Lanes(d) 16-bit floats from element i of base (bf16, or fp16 where
// kVectorFp16), widened to fp32 exactly.
template <class DF>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<DF> LoadWidened(DF d, const void* base, size_t i, bool bf16) {
  namespace hn = hwy::HWY_NAMESPACE;
  if (bf16) {
    const hn::RebindToUnsigned<DF> du;
    const hn::Rebind<uint16_t, DF> d16;
    const auto u = hn::PromoteTo(du, hn::LoadU(d16, static_cast<const uint16_t*>(base) + i));
    return hn::BitCast(d, hn::ShiftLeft<16>(u));
  }
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, static_cast<const hwy::float16_t*>(base) + i));
}

}  // namespace HWY_NAMESPACE
}  // namespace strata::exec
HWY_AFTER_NAMESPACE();

#endif  // STRATA_HOST_WIDEN_INL_H_
