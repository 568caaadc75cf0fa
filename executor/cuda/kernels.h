// The CUDA backend's kernels (private), launched on a stream: C++17 and
// free of the project's C++20 headers, so that nvcc under CMake 3.25
// compiles kernels.cu (../shared/PITFALLS.md). The per-element math is
// adam_math.h's (STRATA_HD), the host kernels' own: the same rounding and
// the same Adam update, bit for bit. Element formats are Precision's values
// (kFp16 0, kBf16 1, kFp32 2). Reductions have no atomics: each output
// element is summed by one thread in a fixed order. `overflow` (device
// memory, may be null) is set to 1 when a result written is not finite.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "strata/executor/adam_math.h"

namespace strata::exec::cuda {

// dst[i] = round(dst[i] + src[i]), both in format `fmt`.
cudaError_t Accumulate(void* dst, const void* src, size_t n, int fmt, int* overflow, cudaStream_t s);
// dst[i] = round(dst[i] + round(src[i])) for fp32 src (a reduced gradient
// added into one in the plan's precision).
cudaError_t AccumulateFloats(void* dst, const float* src, size_t n, int fmt, int* overflow, cudaStream_t s);
// dst[i] = round(src[i]).
cudaError_t FromFloat(void* dst, const float* src, size_t n, int fmt, int* overflow, cudaStream_t s);
// dst[i] = src[i] widened to fp32 (exact).
cudaError_t ToFloat(float* dst, const void* src, size_t n, int fmt, cudaStream_t s);
// out[i] = (blocks[0][i] + blocks[1][i] + ... + blocks[ranks-1][i]) / ranks,
// summed in fp32 in rank order (the host backend's reduce-scatter sum).
cudaError_t SumBlocks(float* out, const void* blocks, size_t n, size_t ranks, int fmt, cudaStream_t s);
// x[i] = x[i] / d.
cudaError_t Divide(float* x, size_t n, float d, cudaStream_t s);

struct AdamKernelArgs {
  float* master;
  const void* grad;  // in `fmt`, or fp32 with grad_fp32
  bool grad_fp32;
  float* exp_avg;
  float* exp_avg_sq;
  void* out;  // the new weights in `fmt`
  int fmt;
  size_t n;
};
// AdamElement over the tile, then the copy-out rounded to `fmt`: one pass.
cudaError_t Adam(const AdamKernelArgs& a, const AdamStepConsts& c, cudaStream_t s);
// The roofline of Adam's access shape (bench/gpu_bench): the same loads and
// stores as Adam over the same arrays (master, gradient, m, v in; master,
// m, v and the copy-out written), one addition each instead of the math.
cudaError_t AdamShapedStream(const AdamKernelArgs& a, cudaStream_t s);

}  // namespace strata::exec::cuda
