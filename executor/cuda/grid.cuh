// What the CUDA backend's kernel files share (private, nvcc only): the
// launch shape (256 threads, a grid capped well under CUDA's limit, walked
// by grid-stride loops with size_t indices) and the overflow flag.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "strata/executor/model_math.h"

namespace strata::exec::cuda {

constexpr int kThreads = 256;

inline unsigned Blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b == 0 ? 1 : b) : 65535 * 8);
}

#define STRATA_GRID_LOOP(i, n)                                                         \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

// Sets *overflow when v (a result written) is not finite; every writer
// writes 1, so the race between writers is on nothing.
__device__ inline void Flag(int* overflow, float v) {
  if (overflow != nullptr && !dm::Finite(v)) *overflow = 1;
}

}  // namespace strata::exec::cuda
