// The CUDA backend's element-wise kernels (kernels.h): grid-stride loops,
// the math of adam_math.h. A launcher clears the last error first, so the
// error it returns is its launch's own.
#include "kernels.h"

namespace strata::exec::cuda {
namespace {

constexpr int kFp16 = 0, kBf16 = 1;
constexpr int kThreads = 256;

__device__ inline float Load(const void* p, size_t i, int fmt) {
  if (fmt == kFp16) return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
  if (fmt == kBf16) return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
// Stores round(v); returns the value stored, widened.
__device__ inline float Store(void* p, size_t i, float v, int fmt) {
  if (fmt == kFp16) {
    const uint16_t h = FloatToHalf(v);
    static_cast<uint16_t*>(p)[i] = h;
    return HalfToFloat(h);
  }
  if (fmt == kBf16) {
    const uint16_t h = FloatToBf16(v);
    static_cast<uint16_t*>(p)[i] = h;
    return Bf16ToFloat(h);
  }
  static_cast<float*>(p)[i] = v;
  return v;
}
__device__ inline void Flag(int* overflow, float v) {
  if (overflow != nullptr && !isfinite(v)) *overflow = 1;  // every writer writes 1: no race on the value
}

unsigned Blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b == 0 ? 1 : b) : 65535 * 8);
}
#define STRATA_GRID_LOOP(i, n) \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void AccumulateKernel(void* dst, const void* src, size_t n, int fmt, int* overflow) {
  STRATA_GRID_LOOP(i, n) Flag(overflow, Store(dst, i, Load(dst, i, fmt) + Load(src, i, fmt), fmt));
}
__global__ void AccumulateFloatsKernel(void* dst, const float* src, size_t n, int fmt, int* overflow) {
  STRATA_GRID_LOOP(i, n) {
    float r = src[i];
    if (fmt == kFp16) r = HalfToFloat(FloatToHalf(r));
    else if (fmt == kBf16) r = Bf16ToFloat(FloatToBf16(r));
    Flag(overflow, Store(dst, i, Load(dst, i, fmt) + r, fmt));
  }
}
__global__ void FromFloatKernel(void* dst, const float* src, size_t n, int fmt, int* overflow) {
  STRATA_GRID_LOOP(i, n) Flag(overflow, Store(dst, i, src[i], fmt));
}
__global__ void ToFloatKernel(float* dst, const void* src, size_t n, int fmt) {
  STRATA_GRID_LOOP(i, n) dst[i] = Load(src, i, fmt);
}
__global__ void SumBlocksKernel(float* out, const void* blocks, size_t n, size_t ranks, int fmt) {
  STRATA_GRID_LOOP(i, n) {
    float s = 0.0f;
    for (size_t q = 0; q < ranks; ++q) s += Load(blocks, q * n + i, fmt);
    out[i] = s / static_cast<float>(ranks);
  }
}
__global__ void DivideKernel(float* x, size_t n, float d) {
  STRATA_GRID_LOOP(i, n) x[i] = x[i] / d;
}
__global__ void AdamKernel(AdamKernelArgs a, AdamStepConsts c) {
  STRATA_GRID_LOOP(i, a.n) {
    float p = a.master[i], m = a.exp_avg[i], v = a.exp_avg_sq[i];
    const float g = a.grad_fp32 ? static_cast<const float*>(a.grad)[i] : Load(a.grad, i, a.fmt);
    AdamElement(p, g, m, v, c);
    a.master[i] = p;
    a.exp_avg[i] = m;
    a.exp_avg_sq[i] = v;
    Store(a.out, i, p, a.fmt);
  }
}

__global__ void AdamShapedStreamKernel(AdamKernelArgs a) {
  STRATA_GRID_LOOP(i, a.n) {
    const float g = a.grad_fp32 ? static_cast<const float*>(a.grad)[i] : Load(a.grad, i, a.fmt);
    const float p = a.master[i] + g;
    a.master[i] = p;
    a.exp_avg[i] = a.exp_avg[i] + g;
    a.exp_avg_sq[i] = a.exp_avg_sq[i] + g;
    Store(a.out, i, p, a.fmt);
  }
}

}  // namespace

cudaError_t AdamShapedStream(const AdamKernelArgs& a, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  AdamShapedStreamKernel<<<Blocks(a.n), kThreads, 0, s>>>(a);
  return cudaGetLastError();
}
cudaError_t Accumulate(void* dst, const void* src, size_t n, int fmt, int* overflow, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  AccumulateKernel<<<Blocks(n), kThreads, 0, s>>>(dst, src, n, fmt, overflow);
  return cudaGetLastError();
}
cudaError_t AccumulateFloats(void* dst, const float* src, size_t n, int fmt, int* overflow, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  AccumulateFloatsKernel<<<Blocks(n), kThreads, 0, s>>>(dst, src, n, fmt, overflow);
  return cudaGetLastError();
}
cudaError_t FromFloat(void* dst, const float* src, size_t n, int fmt, int* overflow, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  FromFloatKernel<<<Blocks(n), kThreads, 0, s>>>(dst, src, n, fmt, overflow);
  return cudaGetLastError();
}
cudaError_t ToFloat(float* dst, const void* src, size_t n, int fmt, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  ToFloatKernel<<<Blocks(n), kThreads, 0, s>>>(dst, src, n, fmt);
  return cudaGetLastError();
}
cudaError_t SumBlocks(float* out, const void* blocks, size_t n, size_t ranks, int fmt, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  SumBlocksKernel<<<Blocks(n), kThreads, 0, s>>>(out, blocks, n, ranks, fmt);
  return cudaGetLastError();
}
cudaError_t Divide(float* x, size_t n, float d, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  DivideKernel<<<Blocks(n), kThreads, 0, s>>>(x, n, d);
  return cudaGetLastError();
}
cudaError_t Adam(const AdamKernelArgs& a, const AdamStepConsts& c, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  AdamKernel<<<Blocks(a.n), kThreads, 0, s>>>(a, c);
  return cudaGetLastError();
}

}  // namespace strata::exec::cuda
