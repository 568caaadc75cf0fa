// Elements in the plan's low precision on the host (fp32 stays fp32): the
// scalar reference the vectorized kernels of convert.cc match (private).
// Every rounding here is the one a 16-bit GPU kernel would do, so results
// do not depend on which buffer, tier or copy an accumulation happens in.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "strata/core/tier.h"
#include "strata/executor/adam_math.h"

namespace strata::exec {

struct LowPrecision {
  Precision p;
  int bytes;
  explicit LowPrecision(Precision pr) : p(pr), bytes(pr == Precision::kFp32 ? 4 : 2) {}
  float Load(const std::byte* base, size_t i) const {
    if (p == Precision::kFp32) {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, base + 2 * i, 2);
    return p == Precision::kBf16 ? Bf16ToFloat(h) : HalfToFloat(h);
  }
  void Store(std::byte* base, size_t i, float f) const {
    if (p == Precision::kFp32) {
      std::memcpy(base + 4 * i, &f, 4);
      return;
    }
    const uint16_t h = p == Precision::kBf16 ? FloatToBf16(f) : FloatToHalf(f);
    std::memcpy(base + 2 * i, &h, 2);
  }
  float Round(float f) const {
    std::byte b[4];
    Store(b, 0, f);
    return Load(b, 0);
  }
};

}  // namespace strata::exec
