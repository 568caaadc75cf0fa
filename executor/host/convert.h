// Vectorized precision conversions and low-precision accumulation on host
// memory (the host backend's, and the CUDA backend's host-side math),
// dispatched at run time by Highway.
// Each gives exactly the scalar results of LowPrecision (low_precision.h):
// round to nearest even, subnormals kept, overflow to inf; tested against
// it element by element, including inf, NaN and subnormal inputs.
#pragma once

#include <cstddef>

#include "strata/core/tier.h"

namespace strata::exec {

// dst[i] = src[i] widened to fp32.
void LowToFloat(const void* src, float* dst, size_t n, Precision p);
// dst[i] = round(src[i]).
void FloatToLow(const float* src, void* dst, size_t n, Precision p);
// dst[i] = round(dst[i] + round(src[i])) for fp32 src; true if any result
// is not finite. With `onto_zeros`, dst is taken as +0 and not read: the
// result of adding into a zeroed dst (so -0 becomes +0), for a fresh buffer.
bool AccumulateFloatsToLow(void* dst, const float* src, size_t n, Precision p, bool onto_zeros = false);
// dst[i] = round(dst[i] + src[i]), both in precision p; true if any result
// is not finite.
bool AccumulateLow(void* dst, const void* src, size_t n, Precision p);

}  // namespace strata::exec
