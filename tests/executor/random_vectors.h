// Seeded random vectors for the executor's tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace strata::testing {

// n values from N(0, sd), the same for the same seed.
inline std::vector<float> Normal(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace strata::testing
