// The host Linear layers' kernels (linear_kernels.h), compiled once per
// SIMD target by Highway (foreach_target re-includes this file) and
// dispatched at run time. Every output is one chain of fused multiply-adds
// in increasing index, as in the scalar reference (mlp_kernels.h,
// std::fma): a fused multiply-add rounds once wherever it runs and the
// order does not depend on the vector width, so each target gives the same
// bits (targets without an FMA instruction go lane by lane through
// std::fma).
//
// Register blocking keeps each output's chain:
// - forward: MR batch rows x NV vectors of outputs in registers; each step
//   of k loads the NV weight vectors of a packed panel ([k][outputs]) and
//   broadcasts one x per row;
// - dW: NRB weight rows x KV vectors of k, over the batch in order;
// - dx: MRB batch rows x KV vectors of k, over weight rows in order.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/linear_kernels.cc"
#include "host/linear_kernels.h"

#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "host/convert.h"
#include "host/widen-inl.h"
#include "strata/core/tier.h"

HWY_BEFORE_NAMESPACE();
namespace strata::exec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_HAVE_SCALABLE
// Sizeless vectors cannot be held in arrays: plain floats there (the same
// operations, so the same bits, only slower).
using V = float;
constexpr size_t kN = 1;
HWY_INLINE V VZero() { return 0.0f; }
HWY_INLINE V VLoad(const float* p) { return *p; }
HWY_INLINE void VStore(V v, float* p) { *p = v; }
HWY_INLINE V VSet(float f) { return f; }
HWY_INLINE V VMulAdd(V acc, V a, V b) { return std::fma(a, b, acc); }
HWY_INLINE V VAdd(V a, V b) { return a + b; }
#else
using D = hn::CappedTag<float, 16>;
using V = hn::Vec<D>;
constexpr size_t kN = hn::MaxLanes(D());
HWY_INLINE V VZero() { return hn::Zero(D()); }
HWY_INLINE V VLoad(const float* p) { return hn::LoadU(D(), p); }
HWY_INLINE void VStore(V v, float* p) { hn::StoreU(v, D(), p); }
HWY_INLINE V VSet(float f) { return hn::Set(D(), f); }
#if HWY_NATIVE_FMA
// acc + a * b with one rounding, as std::fma in the reference.
HWY_INLINE V VMulAdd(V acc, V a, V b) { return hn::MulAdd(a, b, acc); }
#else
// No fused multiply-add instruction on this target (x86 before AVX2, the
// emulated targets): Highway's MulAdd would round twice, so lane by lane
// through std::fma, the same bits slowly (a CPU without FMA, from before
// 2013, dispatches here).
HWY_INLINE V VMulAdd(V acc, V a, V b) {
  const D d;
  alignas(64) float ta[kN], tb[kN], tc[kN];
  hn::Store(a, d, ta);
  hn::Store(b, d, tb);
  hn::Store(acc, d, tc);
  for (size_t l = 0; l < kN; ++l) tc[l] = std::fma(ta[l], tb[l], tc[l]);
  return hn::Load(d, tc);
}
#endif
HWY_INLINE V VAdd(V a, V b) { return hn::Add(a, b); }
#endif
constexpr size_t kV = 16 / kN;  // vectors per 16 floats

// Keeps a loaded vector in a register. Without it GCC folds the load into
// every multiply that uses the vector (a memory operand each time): twice
// the loads, and the kernels became load-bound at about half the rate of
// the register-held version (measured on Zen 3, AVX2).
HWY_INLINE void Pin(V& v) {
#if HWY_ARCH_X86 && !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  asm("" : "+v"(v.raw));
#else
  (void)v;
#endif
}

// Forward: a tile of kFwdMR batch rows x kFwdNV vectors of outputs (a
// panel of kFwdP outputs) in accumulators, 16 of 32 registers on AVX-512
// and 12 of 16 on AVX2 and SSE4; each step of k loads the panel's kFwdNV
// weight vectors once and broadcasts one x per row. Backward: kBwdRows rows
// x kBwdKV vectors, one broadcast per row; 6 x 2 measured best on Zen 3
// among 3x3, 5x2, 6x2 and 3x4.
constexpr size_t kFwdNV = kN == 1 ? 4 : 2;
constexpr size_t kFwdMR = kN == 1 ? 4 : kN >= 16 ? 8 : 6;
constexpr size_t kFwdP = kFwdNV * kN;
constexpr size_t kBwdKV = kV == 1 ? 4 : 2;
constexpr size_t kBwdRows = kV == 1 ? 4 : kV <= 4 ? 6 : 1;
constexpr size_t kBwdCols = kBwdKV * kN;

Blocking BlockingImpl() { return {kFwdMR, kFwdP, kBwdRows, kBwdRows, kBwdCols}; }

// The kernels' inner block: acc[r][v] = fma(g(s, r), vec(s)[v], acc[r][v])
// for steps s < steps in order, rows r < R, with vec(s) = vec + s * vstep
// (KV vectors, loaded once each) and g(s, r) = g[s * gstep + r * grow],
// one broadcast per row. The forward steps over k (vec a packed panel, g
// the rows of x), dW over the batch, dx over weight rows.
template <size_t R, size_t KV>
HWY_INLINE void BroadcastBlock(V (&acc)[R][KV], const float* HWY_RESTRICT vec, size_t vstep,
                               const float* HWY_RESTRICT g, size_t gstep, size_t grow, size_t steps) {
  for (size_t s = 0; s < steps; ++s) {
    V vv[KV];
    for (size_t v = 0; v < KV; ++v) {
      vv[v] = VLoad(vec + s * vstep + v * kN);
      Pin(vv[v]);
    }
    for (size_t r = 0; r < R; ++r) {
      const V gv = VSet(g[s * gstep + r * grow]);
      for (size_t v = 0; v < KV; ++v) acc[r][v] = VMulAdd(acc[r][v], gv, vv[v]);
    }
  }
}

// Continues the chains of outputs y[r][c], r < R, c < nc (<= kFwdP), over
// kc steps of k: acc = fma(x[r][k], wp[k][c], acc) in increasing k, from
// zero (first) or from y (the chain so far, held there as a float: exact);
// the last chunk writes bias[c] + acc. x's rows are ldx apart, wp is the
// packed panel ([kc][kFwdP], zero past nc), bias has kFwdP readable floats.
template <size_t R>
HWY_INLINE void ForwardTile(const float* HWY_RESTRICT x, size_t ldx, const float* HWY_RESTRICT wp, size_t kc,
                            bool first, bool last, const float* HWY_RESTRICT bias, size_t nc, float* HWY_RESTRICT y,
                            size_t ldy) {
  V acc[R][kFwdNV];
  alignas(64) float t[kFwdP];
  const bool whole = nc == kFwdP;
  for (size_t r = 0; r < R; ++r) {
    if (first) {
      for (size_t v = 0; v < kFwdNV; ++v) acc[r][v] = VZero();
    } else if (whole) {
      for (size_t v = 0; v < kFwdNV; ++v) acc[r][v] = VLoad(y + r * ldy + v * kN);
    } else {
      std::memcpy(t, y + r * ldy, nc * sizeof(float));
      std::fill(t + nc, t + kFwdP, 0.0f);
      for (size_t v = 0; v < kFwdNV; ++v) acc[r][v] = VLoad(t + v * kN);
    }
  }
  BroadcastBlock(acc, wp, kFwdP, x, 1, ldx, kc);
  for (size_t r = 0; r < R; ++r) {
    if (last)
      for (size_t v = 0; v < kFwdNV; ++v) acc[r][v] = VAdd(VLoad(bias + v * kN), acc[r][v]);
    if (whole) {
      for (size_t v = 0; v < kFwdNV; ++v) VStore(acc[r][v], y + r * ldy + v * kN);
    } else {
      for (size_t v = 0; v < kFwdNV; ++v) VStore(acc[r][v], t + v * kN);
      std::memcpy(y + r * ldy, t, nc * sizeof(float));
    }
  }
}

// ForwardTile for rows i < rows of x (ldx apart) against one packed panel,
// kFwdMR rows at a time, then the rest in one smaller tile.
template <size_t R>
HWY_INLINE void ForwardTail(const float* x, size_t ldx, size_t rows, const float* wp, size_t kc, bool first, bool last,
                            const float* bias, size_t nc, float* y, size_t ldy) {
  if constexpr (R > 0) {
    if (rows == R)
      ForwardTile<R>(x, ldx, wp, kc, first, last, bias, nc, y, ldy);
    else
      ForwardTail<R - 1>(x, ldx, rows, wp, kc, first, last, bias, nc, y, ldy);
  }
}
void ForwardPanelImpl(const float* x, size_t ldx, size_t rows, const float* wp, size_t kc, bool first, bool last,
                      const float* bias, size_t nc, float* y, size_t ldy) {
  size_t i = 0;
  for (; i + kFwdMR <= rows; i += kFwdMR) {
    // The next tile's chains, from y (L3 or memory when y is large): a
    // tile's k steps hide their latency, its own first loads would not.
    if (!first && i + 2 * kFwdMR <= rows)
      for (size_t r = 0; r < kFwdMR; ++r)
        for (size_t c = 0; c < nc; c += 16) hwy::Prefetch(y + (i + kFwdMR + r) * ldy + c);
    ForwardTile<kFwdMR>(x + i * ldx, ldx, wp, kc, first, last, bias, nc, y + i * ldy, ldy);
  }
  if (i < rows) ForwardTail<kFwdMR - 1>(x + i * ldx, ldx, rows - i, wp, kc, first, last, bias, nc, y + i * ldy, ldy);
}

// Stores a vector's 128-bit blocks, block b at p + b * stride.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
template <class DD>
HWY_INLINE void StoreQuads(DD d, hn::Vec<DD> v, float* p, size_t stride) {
  if constexpr (hn::MaxLanes(d) == 4) {
    hn::StoreU(v, d, p);
  } else {
    const hn::Half<DD> dh;
    StoreQuads(dh, hn::LowerHalf(dh, v), p, stride);
    StoreQuads(dh, hn::UpperHalf(dh, v), p + hn::MaxLanes(d) / 8 * stride, stride);
  }
}
#endif

// Loads kN weights of precision P from element i of w, widened to fp32
// exactly, as LowToFloat does (the same loads: widen-inl.h). fp16 only
// where the target converts it in vectors (kVectorFp16); PackPanelImpl
// widens fp16 rows first elsewhere.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
template <Precision P>
HWY_INLINE V LoadWide(const void* w, size_t i) {
  if constexpr (P == Precision::kFp32)
    return hn::LoadU(D(), static_cast<const float*>(w) + i);
  else
    return LoadWidened(D(), w, i, P == Precision::kBf16);
}

// PackPanelImpl's whole vectors of k: columns [0, kc / kN * kN) of the
// panel, four weight rows (precision P) at a time; returns where it ended.
template <Precision P>
size_t PackVectors(const void* HWY_RESTRICT w, size_t lds, size_t n, size_t kc, float* HWY_RESTRICT wp) {
  const D d;
  const hn::Repartition<uint64_t, D> du;
  const auto lo = [&](V a, V b) {
    return hn::BitCast(d, hn::InterleaveLower(du, hn::BitCast(du, a), hn::BitCast(du, b)));
  };
  const auto hi = [&](V a, V b) {
    return hn::BitCast(d, hn::InterleaveUpper(du, hn::BitCast(du, a), hn::BitCast(du, b)));
  };
  size_t k0 = 0;
  for (; k0 + kN <= kc; k0 += kN)
    for (size_t c = 0; c < kFwdP; c += 4) {
      V r[4];
      if (c + 4 <= n) {
        for (size_t q = 0; q < 4; ++q) r[q] = LoadWide<P>(w, (c + q) * lds + k0);
      } else {
        for (size_t q = 0; q < 4; ++q) r[q] = c + q < n ? LoadWide<P>(w, (c + q) * lds + k0) : VZero();
      }
      // Per block: t0 = a0 b0 a1 b1, t1 = c0 d0 c1 d1, t2 = a2 b2 a3 b3, t3 = c2 d2 c3 d3.
      const V t0 = hn::InterleaveLower(d, r[0], r[1]), t1 = hn::InterleaveLower(d, r[2], r[3]);
      const V t2 = hn::InterleaveUpper(d, r[0], r[1]), t3 = hn::InterleaveUpper(d, r[2], r[3]);
      const V u[4] = {lo(t0, t1), hi(t0, t1), lo(t2, t3), hi(t2, t3)};  // block b of u[j]: k = k0 + 4b + j
      for (size_t j = 0; j < 4; ++j) StoreQuads(d, u[j], wp + (k0 + j) * kFwdP + c, 4 * kFwdP);
    }
  return k0;
}
#endif

// One forward panel: wp[k][c] = W[c][k] for c < n, k < kc, widened; zero
// for n <= c < kFwdP. W's rows (precision p) are lds elements apart from w.
// Four rows at a time, transposed 4 x 4 within each 128-bit block (two
// rounds of interleaves), each block then holding one k of four outputs: a
// fifth of the instructions of a scalar transpose. Columns past the last
// whole vector, and fp16 where it cannot be loaded widened, go through
// `rows` (kFwdP x kc floats) by LowToFloat.
void PackPanelImpl(const void* HWY_RESTRICT w, size_t lds, size_t n, size_t kc, Precision p, float* HWY_RESTRICT rows,
                   float* HWY_RESTRICT wp) {
  size_t eb = static_cast<size_t>(BytesPerElement(p));
  const auto at = [&](size_t c, size_t k) { return static_cast<const std::byte*>(w) + (c * lds + k) * eb; };
  if (p == Precision::kFp16 && !kVectorFp16) {
    for (size_t c = 0; c < n; ++c) LowToFloat(at(c, 0), rows + c * kc, kc, p);
    w = rows;
    lds = kc;
    p = Precision::kFp32;
    eb = sizeof(float);
  }
  size_t k0 = 0;
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  if (p == Precision::kFp32)
    k0 = PackVectors<Precision::kFp32>(w, lds, n, kc, wp);
  else if (p == Precision::kBf16)
    k0 = PackVectors<Precision::kBf16>(w, lds, n, kc, wp);
  else
    k0 = PackVectors<Precision::kFp16>(w, lds, n, kc, wp);
#endif
  // Columns past the last whole vector (all of them on the scalar
  // targets), 16 at a time.
  while (k0 < kc) {
    const size_t m = std::min<size_t>(kc - k0, 16);
    alignas(64) float tail[kFwdP * 16];
    for (size_t c = 0; c < n; ++c) LowToFloat(at(c, k0), tail + c * m, m, p);
    for (size_t k = 0; k < m; ++k)
      for (size_t c = 0; c < kFwdP; ++c) wp[(k0 + k) * kFwdP + c] = c < n ? tail[c * m + k] : 0.0f;
    k0 += m;
  }
}

// dw[r][0:np] = sum over i < batch, in order, of dy[i][r] * xp[i][0:np],
// for r < kBwdRows (dy rows lddy apart; np a multiple of kBwdCols).
void WeightGradBlockImpl(const float* HWY_RESTRICT xp, size_t np, size_t batch, const float* HWY_RESTRICT dy,
                         size_t lddy, float* HWY_RESTRICT dw) {
  for (size_t c0 = 0; c0 < np; c0 += kBwdCols) {
    V acc[kBwdRows][kBwdKV];
    for (size_t r = 0; r < kBwdRows; ++r)
      for (size_t v = 0; v < kBwdKV; ++v) acc[r][v] = VZero();
    BroadcastBlock(acc, xp + c0, np, dy, lddy, 1, batch);
    for (size_t r = 0; r < kBwdRows; ++r)
      for (size_t v = 0; v < kBwdKV; ++v) VStore(acc[r][v], dw + r * np + c0 + v * kN);
  }
}

// acc[i][0:np] += dy[i][o] * wt[o][0:np] for o < on in order, for rows
// i < rows (a multiple of kBwdRows); row i of dy at dy + i * ldy for the
// whole blocks (i < full), in the zero-padded copy `tail` ([kBwdRows x ldy])
// for the last one otherwise.
void InputGradBlockImpl(const float* HWY_RESTRICT dy, size_t ldy, size_t full, const float* HWY_RESTRICT tail,
                        size_t rows, const float* HWY_RESTRICT wt, size_t np, size_t on, float* HWY_RESTRICT acc) {
  for (size_t i0 = 0; i0 < rows; i0 += kBwdRows)
    for (size_t c0 = 0; c0 < np; c0 += kBwdCols) {
      V a[kBwdRows][kBwdKV];
      for (size_t r = 0; r < kBwdRows; ++r)
        for (size_t v = 0; v < kBwdKV; ++v) a[r][v] = VLoad(acc + (i0 + r) * np + c0 + v * kN);
      BroadcastBlock(a, wt + c0, np, i0 < full ? dy + i0 * ldy : tail, 1, ldy, on);
      for (size_t r = 0; r < kBwdRows; ++r)
        for (size_t v = 0; v < kBwdKV; ++v) VStore(a[r][v], acc + (i0 + r) * np + c0 + v * kN);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace strata::exec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace strata::exec {
HWY_EXPORT(ForwardPanelImpl);
HWY_EXPORT(PackPanelImpl);
HWY_EXPORT(WeightGradBlockImpl);
HWY_EXPORT(InputGradBlockImpl);
HWY_EXPORT(BlockingImpl);

Blocking LinearBlocking() { return HWY_DYNAMIC_DISPATCH(BlockingImpl)(); }
void ForwardPanel(const float* x, size_t ldx, size_t rows, const float* wp, size_t kc, bool first, bool last,
                  const float* bias, size_t nc, float* y, size_t ldy) {
  HWY_DYNAMIC_DISPATCH(ForwardPanelImpl)(x, ldx, rows, wp, kc, first, last, bias, nc, y, ldy);
}
void PackWeightPanel(const void* w, size_t lds, size_t n, size_t kc, Precision p, float* rows, float* wp) {
  HWY_DYNAMIC_DISPATCH(PackPanelImpl)(w, lds, n, kc, p, rows, wp);
}
void WeightGradBlock(const float* xp, size_t np, size_t batch, const float* dy, size_t lddy, float* dw) {
  HWY_DYNAMIC_DISPATCH(WeightGradBlockImpl)(xp, np, batch, dy, lddy, dw);
}
void InputGradBlock(const float* dy, size_t ldy, size_t full, const float* tail, size_t rows, const float* wt,
                    size_t np, size_t on, float* acc) {
  HWY_DYNAMIC_DISPATCH(InputGradBlockImpl)(dy, ldy, full, tail, rows, wt, np, on, acc);
}

}  // namespace strata::exec
#endif  // HWY_ONCE
