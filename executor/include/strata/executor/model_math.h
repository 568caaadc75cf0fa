// The device model's per-thread math (devmodel/, issue #17): what one GPU
// thread computes for one output element or row, STRATA_HD so that the
// CUDA kernels (cuda/model_kernels.cu) and the host's emulation of them
// (devmodel/emulated_kernels.cc) run the same code, and host tests check it
// against the plain references (mlp_kernels.h). C++17, no library calls
// beyond expf, logf and sqrtf. Deterministic by construction: every output
// is written by one thread, every sum runs in a fixed order, no atomics.
//
// Formats are Precision's values: 0 fp16, 1 bf16, 2 fp32 (tier.h).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "strata/executor/adam_math.h"

namespace strata::exec::dm {

constexpr int kFp16 = 0, kBf16 = 1, kFp32 = 2;

STRATA_HD inline float LoadAs(const void* p, size_t i, int fmt) {
  if (fmt == kFp16) return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
  if (fmt == kBf16) return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
STRATA_HD inline float RoundAs(float v, int fmt) {
  if (fmt == kFp16) return HalfToFloat(FloatToHalf(v));
  if (fmt == kBf16) return Bf16ToFloat(FloatToBf16(v));
  return v;
}
// Stores round(v); returns the value stored, widened.
STRATA_HD inline float StoreAs(void* p, size_t i, float v, int fmt) {
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
STRATA_HD inline bool Finite(float v) { return v - v == 0.0f; }  // false for inf and NaN

// A gradient element added into the plan's gradient buffer, as the host's
// AccumulateFloatsToLow: dst = round(dst + round(v)); with `fresh` dst is
// taken as +0 and not read. Returns the value stored.
STRATA_HD inline float AddToGrad(void* dst, size_t i, float v, int fmt, bool fresh) {
  const float base = fresh ? 0.0f : LoadAs(dst, i, fmt);
  return StoreAs(dst, i, base + RoundAs(v, fmt), fmt);
}

// Element i of y [rows x cols] (a Linear's output, fp32): the bias (in
// fmt; null: none) added, then the ReLU when `relu`; `low` (null: none)
// gets the result rounded to fmt, the next layer's GEMM operand.
STRATA_HD inline void BiasActElement(float* y, void* low, const void* bias, int fmt, size_t cols, bool relu, size_t i) {
  float v = y[i];
  if (bias != nullptr) v = LoadAs(bias, i % cols, fmt) + v;  // the reference's b[o] + sum
  if (relu) v = v > 0.0f ? v : 0.0f;
  y[i] = v;
  if (low != nullptr) StoreAs(low, i, v, fmt);
}

// ReLU backward on element i, with y the ReLU's output: dy *= (y > 0);
// `low` (null: none) gets dy rounded to fmt.
STRATA_HD inline void ReluBackwardElement(const float* y, float* dy, void* low, int fmt, size_t i) {
  const float g = y[i] > 0.0f ? dy[i] : 0.0f;
  dy[i] = g;
  if (low != nullptr) StoreAs(low, i, g, fmt);
}

// Column c of m [rows x cols] summed over the rows in order (a bias's
// gradient: mlp_kernels.h's LinearBackward adds dy row by row).
STRATA_HD inline float ColumnSum(const float* m, size_t rows, size_t cols, size_t c) {
  float s = 0.0f;
  for (size_t r = 0; r < rows; ++r) s += m[r * cols + c];
  return s;
}

// Row r of the mean softmax cross-entropy over `batch` rows of `classes`
// logits (mlp_kernels.h's SoftmaxCrossEntropy<float>, its operations in its
// order): writes d(loss)/d(logits) scaled by `scale` / batch into dlogits
// (fp32) and, rounded to fmt, into `low` (null: none); returns the row's
// loss, log(sum exp) - z[label]. The mean is the caller's: the rows' losses
// summed in row order, divided by the batch.
STRATA_HD inline float SoftmaxXentRow(const float* logits, const int32_t* labels, float* dlogits, void* low, int fmt,
                                      size_t batch, size_t classes, float scale, size_t r) {
  const float* z = logits + r * classes;
  float mx = z[0];
  for (size_t c = 1; c < classes; ++c) mx = z[c] > mx ? z[c] : mx;
  float sum = 0.0f;
  for (size_t c = 0; c < classes; ++c) sum += expf(z[c] - mx);
  const float log_sum = logf(sum) + mx;
  const int32_t label = labels[r];
  for (size_t c = 0; c < classes; ++c) {
    const float p = expf(z[c] - log_sum);
    const float g = (p - (static_cast<int32_t>(c) == label ? 1.0f : 0.0f)) * scale / static_cast<float>(batch);
    dlogits[r * classes + c] = g;
    if (low != nullptr) StoreAs(low, r * classes + c, g, fmt);
  }
  return log_sum - z[label];
}

// Element (i, j) of C [m x n] (column-major, ldc) = beta * C + op(A) op(B),
// op(A) [m x k], op(B) [k x n], column-major with leading dimensions lda and
// ldb (BLAS's convention, cuBLAS's call), operands in fmt, the products
// summed over k in order in fp32. The device model's reference GEMM: the
// host emulation runs it; cuBLAS sums in its own order (tests compare with
// a tolerance). beta is 0 or 1.
STRATA_HD inline void GemmElement(bool trans_a, bool trans_b, size_t k, const void* a, size_t lda, const void* b,
                                  size_t ldb, float* c, size_t ldc, int fmt, bool accumulate, size_t i, size_t j) {
  float s = 0.0f;
  for (size_t p = 0; p < k; ++p) {
    const float av = LoadAs(a, trans_a ? i * lda + p : p * lda + i, fmt);
    const float bv = LoadAs(b, trans_b ? p * ldb + j : j * ldb + p, fmt);
    s += av * bv;
  }
  float& out = c[j * ldc + i];
  out = accumulate ? out + s : s;
}

// GemmElement's sum over operands already widened to fp32 and contiguous in
// k (a row of op(A), a column of op(B)): the same products in the same
// order, so the same bits (widening is exact; the build does not contract
// a * b + s into an FMA). The host emulation's fast path.
STRATA_HD inline float DotInOrder(const float* a, const float* b, size_t k) {
  float s = 0.0f;
  for (size_t p = 0; p < k; ++p) s += a[p] * b[p];
  return s;
}

}  // namespace strata::exec::dm
