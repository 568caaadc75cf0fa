// The CUDA backend's element-wise kernels (kernels.h): grid-stride loops,
// the math of adam_math.h, loads and stores as model_math.h's. A launcher
// clears the last error first, so the error it returns is its launch's own.
#include <cstdint>

#include "grid.cuh"
#include "kernels.h"

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
__global__ void DivideKernel(float* x, size_t n, float d) { STRATA_GRID_LOOP(i, n) x[i] = x[i] / d; }

// Adam's access shape, with the element math a parameter: AdamMath (the
// fused Adam) or StreamMath (one addition per array: the roofline of the
// same loads and stores, bench/gpu_bench). Step(p, g, m, v) updates one
// parameter from its fp32 gradient.
struct AdamMath {
  AdamStepConsts c;
  __device__ void operator()(float& p, float g, float& m, float& v) const { AdamElement(p, g, m, v, c); }
};
struct StreamMath {
  __device__ void operator()(float& p, float g, float& m, float& v) const {
    p = p + g;
    m = m + g;
    v = v + g;
  }
};

// One parameter: loads, the math, stores (the new weight rounded to fmt).
template <typename Step>
__device__ inline void OneParam(const AdamKernelArgs& a, const Step& step, size_t i) {
  float p = a.master[i], m = a.exp_avg[i], v = a.exp_avg_sq[i];
  const float g = a.grad_fp32 ? static_cast<const float*>(a.grad)[i] : LoadAs(a.grad, i, a.fmt);
  step(p, g, m, v);
  a.master[i] = p;
  a.exp_avg[i] = m;
  a.exp_avg_sq[i] = v;
  StoreAs(a.out, i, p, a.fmt);
}
__device__ inline float Widen16(unsigned short h, int fmt) {
  return fmt == dm::kFp16 ? HalfToFloat(h) : Bf16ToFloat(h);
}
__device__ inline unsigned short Round16(float f, int fmt) {
  return fmt == dm::kFp16 ? FloatToHalf(f) : FloatToBf16(f);
}
template <typename Step>
__global__ void AdamShapeKernel(AdamKernelArgs a, Step step) {
  STRATA_GRID_LOOP(i, a.n) OneParam(a, step, i);
}
// Four parameters per thread with 16-byte loads and stores of the fp32
// arrays and 8-byte ones of 16-bit gradients and copies (when aligned so:
// the launchers check, Aligned4), the same math and rounding per element as
// AdamShapeKernel, so the same bits. The last n % 4 parameters go one by one.
template <typename Step>
__global__ void AdamShapeKernel4(AdamKernelArgs a, Step step) {
  const size_t quads = a.n / 4;
  const bool g32 = a.grad_fp32 || a.fmt == dm::kFp32;
  STRATA_GRID_LOOP(q, quads) {
    float4 p = reinterpret_cast<const float4*>(a.master)[q];
    float4 m = reinterpret_cast<const float4*>(a.exp_avg)[q];
    float4 v = reinterpret_cast<const float4*>(a.exp_avg_sq)[q];
    float4 g;
    if (g32) {
      g = reinterpret_cast<const float4*>(a.grad)[q];
    } else {
      const ushort4 h = reinterpret_cast<const ushort4*>(a.grad)[q];
      g = make_float4(Widen16(h.x, a.fmt), Widen16(h.y, a.fmt), Widen16(h.z, a.fmt), Widen16(h.w, a.fmt));
    }
    step(p.x, g.x, m.x, v.x);
    step(p.y, g.y, m.y, v.y);
    step(p.z, g.z, m.z, v.z);
    step(p.w, g.w, m.w, v.w);
    reinterpret_cast<float4*>(a.master)[q] = p;
    reinterpret_cast<float4*>(a.exp_avg)[q] = m;
    reinterpret_cast<float4*>(a.exp_avg_sq)[q] = v;
    if (a.fmt == dm::kFp32) {
      reinterpret_cast<float4*>(a.out)[q] = p;
    } else {
      reinterpret_cast<ushort4*>(a.out)[q] =
          make_ushort4(Round16(p.x, a.fmt), Round16(p.y, a.fmt), Round16(p.z, a.fmt), Round16(p.w, a.fmt));
    }
  }
  STRATA_GRID_LOOP(t, a.n - 4 * quads) OneParam(a, step, 4 * quads + t);
}

// Adam's launcher's test: every array aligned for the 4-wide access.
bool Aligned4(const AdamKernelArgs& a) {
  auto on = [](const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  const size_t g = a.grad_fp32 || a.fmt == dm::kFp32 ? 16 : 8, o = a.fmt == dm::kFp32 ? 16 : 8;
  return on(a.master, 16) && on(a.exp_avg, 16) && on(a.exp_avg_sq, 16) && on(a.grad, g) && on(a.out, o);
}

template <typename Step>
cudaError_t LaunchAdamShape(const AdamKernelArgs& a, const Step& step, cudaStream_t s) {
  (void)cudaGetLastError();  // an earlier call's unchecked error is not this launch's
  if (Aligned4(a))
    AdamShapeKernel4<<<Blocks(a.n / 4 > 0 ? a.n / 4 : 1), kThreads, 0, s>>>(a, step);
  else
    AdamShapeKernel<<<Blocks(a.n), kThreads, 0, s>>>(a, step);
  return cudaGetLastError();
}

}  // namespace

cudaError_t AdamShapedStream(const AdamKernelArgs& a, cudaStream_t s) { return LaunchAdamShape(a, StreamMath{}, s); }
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
  return LaunchAdamShape(a, AdamMath{c}, s);
}

}  // namespace strata::exec::cuda
