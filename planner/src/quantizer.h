// DeepSpeed's quantizer grouping (private to the planner): how many fp32
// scales a quantized tensor carries. ZeRO++'s qwZ quantizes each rank's
// shard with partition_parameters.py CUDAQuantizer.quantize: from
// ceil(n / 8000) groups, the first count whose 8 x count divides n, then
// doubled while 16 x count divides n and the groups stay above 8000
// elements. n not a multiple of 8 fails DeepSpeed's assertion; Strata then
// keeps ceil(n / 8000).
#pragma once

#include <cstdint>

namespace strata::detail {

inline int64_t QuantizerGroups(int64_t n) {
  constexpr int64_t kTarget = 8000;
  if (n <= 0) return 0;
  const int64_t first = (n + kTarget - 1) / kTarget;
  if (n % 8 != 0) return first;
  // The least divisor of n / 8 at or above `first` (the source counts up
  // one by one; trial division to sqrt finds the same).
  const int64_t m = n / 8;
  int64_t g = m;
  for (int64_t d = 1; d * d <= m; ++d) {
    if (m % d != 0) continue;
    if (d >= first && d < g) g = d;
    if (m / d >= first && m / d < g) g = m / d;
  }
  while (n % (16 * g) == 0 && n > kTarget * g) g *= 2;
  return g;
}

}  // namespace strata::detail
