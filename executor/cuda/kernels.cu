// The CUDA backend's element-wise kernels (kernels.h): grid-stride loops,
// the math of adam_math.h, loads and stores as model_math.h's. A launcher
// clears the last error first, so the error it returns is its launch's own.
#include "kernels.h"

#include "grid.cuh"

namespace strata::exec::cuda {
namespace {

using dm::LoadAs;
using dm::StoreAs;

__global__ void AccumulateKernel(void* dst, const void* src, size_t n, int fmt, int* overflow) {
  STRATA_GRID_LOOP(i, n) Flag(overflow, StoreAs(dst, i, LoadAs(dst, i, fmt) + LoadAs(src, i, fmt), fmt));
}
__global__ void AccumulateFloatsKernel(void* dst, const float* src, size_t n, int fmt, int* overflow) {
  STRATA_GRID_LOOP(i, n) Flag(overflow, dm::AddToGrad(dst, i, src[i], fmt, false));  // round(dst + round(src))
}
__global__ void FromFloatKernel(void* dst, const float* src, size_t n, int fmt, int* overflow) {
  STRATA_GRID_LOOP(i, n) Flag(overflow, StoreAs(dst, i, src[i], fmt));
}
__global__ void ToFloatKernel(float* dst, const void* src, size_t n, int fmt) {
  STRATA_GRID_LOOP(i, n) dst[i] = LoadAs(src, i, fmt);
}
__global__ void SumBlocksKernel(float* out, const void* blocks, size_t n, size_t ranks, int fmt) {
  STRATA_GRID_LOOP(i, n) {
    float s = 0.0f;
    for (size_t q = 0; q < ranks; ++q) s += LoadAs(blocks, q * n + i, fmt);
    out[i] = s / static_cast<float>(ranks);
  }
}
__global__ void DivideKernel(float* x, size_t n, float d) {
  STRATA_GRID_LOOP(i, n) x[i] = x[i] / d;
}
__global__ void AdamKernel(AdamKernelArgs a, AdamStepConsts c) {
  STRATA_GRID_LOOP(i, a.n) {
    float p = a.master[i], m = a.exp_avg[i], v = a.exp_avg_sq[i];
    const float g = a.grad_fp32 ? static_cast<const float*>(a.grad)[i] : LoadAs(a.grad, i, a.fmt);
    AdamElement(p, g, m, v, c);
    a.master[i] = p;
    a.exp_avg[i] = m;
    a.exp_avg_sq[i] = v;
    StoreAs(a.out, i, p, a.fmt);
  }
}

__global__ void AdamShapedStreamKernel(AdamKernelArgs a) {
  STRATA_GRID_LOOP(i, a.n) {
    const float g = a.grad_fp32 ? static_cast<const float*>(a.grad)[i] : LoadAs(a.grad, i, a.fmt);
    const float p = a.master[i] + g;
    a.master[i] = p;
    a.exp_avg[i] = a.exp_avg[i] + g;
    a.exp_avg_sq[i] = a.exp_avg_sq[i] + g;
    StoreAs(a.out, i, p, a.fmt);
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
