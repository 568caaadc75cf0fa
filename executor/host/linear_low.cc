// Compiled once per SIMD target by Highway (foreach_target re-includes this
// file); the kernels are dispatched at run time. Every output is one chain
// of fused multiply-adds in increasing index, as in the scalar reference
// (mlp_kernels.h, std::fma): a fused multiply-add rounds once wherever it
// runs and the order does not depend on the vector width, so each target
// gives the same bits (targets without an FMA instruction go lane by lane
// through std::fma).
//
// Register blocking keeps each output's chain (linear_low.h):
// - forward: MR batch rows x NV vectors of outputs in registers; each step
//   of k loads the NV weight vectors of a packed panel ([k][outputs]) and
//   broadcasts one x per row;
// - dW: NRB weight rows x KV vectors of k, over the batch in order;
// - dx: MRB batch rows x KV vectors of k, over weight rows in order.
// Packed weights, inputs and staged sums are held in cache-sized blocks.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/linear_low.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <vector>

#include "host/convert.h"
#include "host/linear_low.h"
#include "host/worker_pool.h"
#include "strata/core/tier.h"

#ifndef STRATA_LINEAR_LOW_BLOCKING
#define STRATA_LINEAR_LOW_BLOCKING
namespace strata::exec {
// A target's register blocking.
struct Blocking {
  size_t fwd_mr, fwd_nr;  // forward: batch rows x weight rows per block
  size_t bwd_nr, bwd_mr;  // dW: weight rows per block; dx: batch rows per block
  size_t bwd_cols;        // backward: columns (k) per block
};
}  // namespace strata::exec
#endif

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
HWY_INLINE void ForwardTail(const float* x, size_t ldx, size_t rows, const float* wp, size_t kc, bool first,
                            bool last, const float* bias, size_t nc, float* y, size_t ldy) {
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
// (exactly, as LowToFloat does). fp16 only on targets that convert it in
// vectors (convert.cc's kVectorFp16; the others widen rows first).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !HWY_HAVE_SCALABLE
constexpr bool kLoadFp16 = true;
#else
constexpr bool kLoadFp16 = false;
#endif
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
template <Precision P>
HWY_INLINE V LoadWide(const void* w, size_t i) {
  const D d;
  if constexpr (P == Precision::kFp32) {
    return hn::LoadU(d, static_cast<const float*>(w) + i);
  } else if constexpr (P == Precision::kBf16) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, static_cast<const uint16_t*>(w) + i))));
  } else {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, static_cast<const hwy::float16_t*>(w) + i));
#else
    return hn::Zero(d);  // not reached: PackPanelImpl widens fp16 rows first here
#endif
  }
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
  if (p == Precision::kFp16 && !kLoadFp16) {
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
                        size_t rows, const float* HWY_RESTRICT wt,
                        size_t np, size_t on, float* HWY_RESTRICT acc) {
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

namespace {

const std::byte* At(const void* base, size_t i, size_t bytes_per) {
  return static_cast<const std::byte*>(base) + i * bytes_per;
}
std::byte* At(void* base, size_t i, size_t bytes_per) { return static_cast<std::byte*>(base) + i * bytes_per; }

size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// A per-thread scratch buffer that only grows (a kernel call must not pay
// an mmap and its page faults for a few hundred KiB), 64-byte aligned so
// that no vector load straddles two cache lines.
float* Scratch(int which, size_t n) {
  struct Buf {
    float* p = nullptr;
    size_t n = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf buf[4];
  Buf& b = buf[which];
  if (b.n < n) {
    std::free(b.p);
    b.n = RoundUp(n, 16);
    b.p = static_cast<float*>(std::aligned_alloc(64, b.n * sizeof(float)));
    if (b.p == nullptr) throw std::bad_alloc();
  }
  return b.p;
}

// Parts for a kernel over `elements` weights: one per pool thread once each
// part has at least this many (a wake-up costs microseconds, a part of 64K
// weights about ten).
int Parts(const WorkerPool* pool, size_t elements, size_t units) {
  constexpr size_t kMinPerPart = size_t{1} << 14;
  constexpr size_t kMaxParts = 64;
  if (pool == nullptr) return 1;
  const size_t by_size = std::max<size_t>(1, elements / kMinPerPart);
  return static_cast<int>(std::min({static_cast<size_t>(pool->size()), by_size, std::max<size_t>(units, 1), kMaxParts}));
}

// Columns [c0, c0 + n) of rows [first, first + rows) of W (rows `in` wide)
// widened to fp32 into dst, ld floats per row, zero from n to ld.
void Widen(const void* w, size_t first, size_t rows, size_t in, size_t c0, size_t n, size_t ld, Precision p,
           float* dst) {
  const size_t eb = static_cast<size_t>(BytesPerElement(p));
  for (size_t r = 0; r < rows; ++r) {
    float* d = dst + r * ld;
    LowToFloat(At(w, (first + r) * in + c0, eb), d, n, p);
    std::fill(d + n, d + ld, 0.0f);
  }
}

// rows x cols floats from src (ld_src apart) into dst (ld_dst apart), zero
// from cols to ld_dst.
void CopyPadded(const float* src, size_t ld_src, size_t rows, size_t cols, float* dst, size_t ld_dst) {
  for (size_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * ld_dst, src + r * ld_src, cols * sizeof(float));
    std::fill(dst + r * ld_dst + cols, dst + (r + 1) * ld_dst, 0.0f);
  }
}

// dy's column blocks [q0, q1) of nr columns packed for the weight gradient,
// [block][batch][nr] (zero past out): each block's broadcasts then come from
// one contiguous run over the batch (dy's own rows can be a power of two
// apart, which made the whole batch meet in one L1 set).
// Row by row; the block width a constant where it can be, so that a
// block's row is one or two moves (a memcpy call per block and row, then
// scalar copies, were a fifth of gpt-tiny's backward).
template <size_t NR>
void PackDyBlocksN(const float* dy, size_t batch, size_t out, size_t nr, size_t q0, size_t q1, float* dyb) {
  const size_t w = NR != 0 ? NR : nr;
  for (size_t i = 0; i < batch; ++i) {
    const float* row = dy + i * out;
    for (size_t q = q0; q < q1; ++q) {
      float* d = dyb + (q * batch + i) * w;
      const size_t c0 = q * w;
      if (c0 + w <= out) {
        if constexpr (NR != 0)
          std::memcpy(d, row + c0, NR * sizeof(float));  // one or two moves
        else
          std::memcpy(d, row + c0, w * sizeof(float));
      } else {
        for (size_t c = 0; c < w; ++c) d[c] = c0 + c < out ? row[c0 + c] : 0.0f;
      }
    }
  }
}
void PackDyBlocks(const float* dy, size_t batch, size_t out, size_t nr, size_t q0, size_t q1, float* dyb) {
  switch (nr) {
    case 4: return PackDyBlocksN<4>(dy, batch, out, nr, q0, q1, dyb);
    case 6: return PackDyBlocksN<6>(dy, batch, out, nr, q0, q1, dyb);
    default: return PackDyBlocksN<0>(dy, batch, out, nr, q0, q1, dyb);
  }
}

// The input gradient reads dy a block of mr rows at a time (six streams fit
// L1's ways): dy's rows past the whole blocks, padded with zero rows to a
// block ([mr x out]); empty when there are none or no input gradient.
std::vector<float> DyTail(const float* dy, size_t batch, size_t out, size_t mr, bool input_gradient) {
  const size_t full = batch / mr * mr;
  std::vector<float> tail(input_gradient && full < batch ? mr * out : 0, 0.0f);
  if (!tail.empty()) std::memcpy(tail.data(), dy + full * out, (batch - full) * out * sizeof(float));
  return tail;
}

// The bias gradient's [oa, ob): each db[o] sums over the batch in order; row
// by row, so the loop reads dy as it lies (column by column it strode
// through memory). Returns whether a sum overflowed the 16-bit gradient.
bool BiasGradient(const float* dy, size_t batch, size_t out, size_t oa, size_t ob, void* grad_b, Precision p,
                  bool overwrite) {
  float* db = Scratch(2, ob - oa);
  std::fill(db, db + (ob - oa), 0.0f);
  for (size_t i = 0; i < batch; ++i)
    for (size_t o = oa; o < ob; ++o) db[o - oa] += dy[i * out + o];
  return AccumulateFloatsToLow(At(grad_b, oa, static_cast<size_t>(BytesPerElement(p))), db, ob - oa, p, overwrite);
}

// Outputs [c0, c0 + n) of W (n <= the panel's width), input columns
// [k0, k0 + kc), packed as one forward panel (PackPanelImpl; `rows` its
// scratch of a panel's width x kc floats).
void PackPanel(const void* w, size_t in, size_t c0, size_t n, size_t k0, size_t kc, Precision p, float* rows,
               float* wp) {
  HWY_DYNAMIC_DISPATCH(PackPanelImpl)(At(w, c0 * in + k0, static_cast<size_t>(BytesPerElement(p))), in, n, kc, p,
                                      rows, wp);
}

// Outputs [o0, o1) of the forward (o0 a multiple of the panel width), for
// the batch's rows (x's rows `in` apart, y's `out`). k goes in chunks; per
// chunk, each panel of outputs is packed ([kc][panel width], sized to stay
// in L1) and every batch row's chains are continued through it, the chunk
// of x staying in L2 while the panels pass. Between chunks the chains wait
// in y as floats, so chunking changes no bit.
constexpr size_t kFwdRows = 16;  // LinearForwardLow's split of the batch
void ForwardOutputs(const float* x, const void* w, const float* bias, float* y, size_t batch, size_t in, size_t out,
                    size_t o0, size_t o1, Precision p) {
  const Blocking b = HWY_DYNAMIC_DISPATCH(BlockingImpl)();
  const size_t np = b.fwd_nr;
  const size_t kc_max = std::max<size_t>(16, 8192 / np);  // a panel of 32 KiB
  float* wp = Scratch(0, kc_max * np);
  float* rows = Scratch(1, kc_max * np);
  // x's chunk copied with rows kc_max + 16 floats apart when x's own rows
  // are a multiple of 1 KiB apart: a tile's eight rows 4 or 12 KiB apart
  // all fell in one L1 set (512x4096x1024 and 512x768x3072: 0.73 and 0.75
  // of OpenBLAS, 0.84 with the copy, Sapphire Rapids).
  const bool copy_x = in > kc_max && (in * sizeof(float)) % 1024 == 0;
  const size_t ldx = copy_x ? kc_max + 16 : in;
  float* xc = copy_x ? Scratch(2, batch * ldx) : nullptr;
  for (size_t k0 = 0; k0 < in; k0 += kc_max) {
    const size_t kc = std::min(kc_max, in - k0);
    const bool first = k0 == 0, last = k0 + kc == in;
    if (copy_x)
      for (size_t i = 0; i < batch; ++i) std::memcpy(xc + i * ldx, x + i * in + k0, kc * sizeof(float));
    const float* xk = copy_x ? xc : x + k0;
    for (size_t c0 = o0; c0 < o1; c0 += np) {
      const size_t n = std::min(np, o1 - c0);
      PackPanel(w, in, c0, n, k0, kc, p, rows, wp);
      HWY_DYNAMIC_DISPATCH(ForwardPanelImpl)(xk, ldx, batch, wp, kc, first, last, bias + c0, n, y + c0, out);
    }
  }
}

// Input columns [k0, k1) of the backward: dW[oa:ob, k0:k1] and dx[:, k0:k1]
// (oa a multiple of bwd_nr). dyb is dy packed by blocks of bwd_nr columns,
// [blocks][batch][bwd_nr] (zero past out); dy_tail is dy's last rows, a
// partial block of the dx blocking, padded to a whole one with zero rows
// ([bwd_mr x out]).
bool BackwardColumns(const float* x, const void* w, const float* dy, const float* dyb, const float* dy_tail,
                     float* dx, void* grad_w, size_t batch, size_t in, size_t out, size_t k0, size_t k1, size_t oa,
                     size_t ob, Precision p, bool overwrite) {
  const Blocking b = HWY_DYNAMIC_DISPATCH(BlockingImpl)();
  const size_t eb = static_cast<size_t>(BytesPerElement(p));
  const size_t cb = b.bwd_cols;
  // Column chunks whose packed inputs (batch x kc) stay near 256 KiB.
  const size_t kc = std::max(cb, std::min(RoundUp(k1 - k0, cb), (65536 / std::max<size_t>(batch, 1)) / cb * cb));
  bool overflow = false;
  for (size_t c0 = k0; c0 < k1; c0 += kc) {
    const size_t n = std::min(kc, k1 - c0), np = RoundUp(n, cb);
    if (grad_w != nullptr) {
      // x[:, c0:c0+n] packed (np floats per row, zero padded): x itself
      // when that is whole rows of x, unpadded.
      const float* xp = x;
      if (n != in || np != in) {
        float* xc = Scratch(0, batch * np);
        CopyPadded(x + c0, in, batch, n, xc, np);
        xp = xc;
      }
      float* dw = Scratch(1, b.bwd_nr * np);
      for (size_t o0 = oa; o0 < ob; o0 += b.bwd_nr) {
        HWY_DYNAMIC_DISPATCH(WeightGradBlockImpl)(xp, np, batch, dyb + o0 * batch, b.bwd_nr, dw);
        for (size_t r = 0; r < std::min(b.bwd_nr, ob - o0); ++r)
          overflow |= AccumulateFloatsToLow(At(grad_w, (o0 + r) * in + c0, eb), dw + r * np, n, p, overwrite);
      }
    }
    if (dx != nullptr) {
      // dx[:, c0:c0+n] accumulated over weight rows in order, staged in a
      // padded block (dx itself when that is whole unpadded rows and
      // blocks); the weight rows widened a chunk at a time (fp32 ones
      // read in place when whole and unpadded).
      const size_t batch_pad = RoundUp(batch, b.bwd_mr);
      const bool whole = n == in && np == in;
      float* acc = whole && batch_pad == batch ? dx : Scratch(1, batch_pad * np);
      std::fill(acc, acc + batch_pad * np, 0.0f);
      const size_t oc = std::max<size_t>(1, 32768 / np);
      const bool in_place = whole && p == Precision::kFp32;
      float* wt = in_place ? nullptr : Scratch(2, oc * np);
      for (size_t o0 = 0; o0 < out; o0 += oc) {
        const size_t on = std::min(oc, out - o0);
        const float* wo = in_place ? static_cast<const float*>(w) + o0 * in : wt;
        if (!in_place) Widen(w, o0, on, in, c0, n, np, p, wt);
        // (No tail rows: dy_tail is null, and an offset on it undefined.)
        HWY_DYNAMIC_DISPATCH(InputGradBlockImpl)(dy + o0, out, batch / b.bwd_mr * b.bwd_mr,
                                                 dy_tail != nullptr ? dy_tail + o0 : nullptr, batch_pad, wo, np, on, acc);
      }
      if (acc != dx)
        for (size_t i = 0; i < batch; ++i) std::memcpy(dx + i * in + c0, acc + i * np, n * sizeof(float));
    }
  }
  return overflow;
}

}  // namespace

void LinearForwardLow(const float* x, const void* w, const void* b, float* y, size_t batch, size_t in, size_t out,
                      Precision p, WorkerPool* pool) {
  const size_t np = HWY_DYNAMIC_DISPATCH(BlockingImpl)().fwd_nr;
  // The bias padded to whole panels (the last tile reads a panel's width),
  // in the caller's scratch (the parts only read it).
  const size_t nb = RoundUp(out, np);
  float* bias = Scratch(3, nb);
  if (b != nullptr) LowToFloat(b, bias, out, p);
  std::fill(bias + (b != nullptr ? out : 0), bias + nb, 0.0f);
  if (in == 0) {  // no chain: each output is its bias (0 + the empty sum)
    for (size_t i = 0; i < batch; ++i)
      for (size_t o = 0; o < out; ++o) y[i * out + o] = bias[o] + 0.0f;
    return;
  }
  const size_t panels = (out + np - 1) / np;
  const size_t row_blocks = (batch + kFwdRows - 1) / kFwdRows;
  // Small weights (up to 64K) and a batch of several row blocks: the parts
  // split the batch by blocks of rows, each computing every output of its
  // rows. Split by outputs instead, the parts wrote neighbouring floats of
  // every row of y: a shared cache line per row unless y's rows happen to
  // be 64-byte aligned at the split (gpt-tiny's 128x64x64: two threads
  // 0.46x of one). Every output is one chain however it is split, so the
  // bits are one thread's.
  const bool by_rows = out * in <= 65536 && row_blocks >= 2;
  const int parts = Parts(pool, in * out * std::max<size_t>(batch, 1) / 16, by_rows ? row_blocks : panels);
  if (by_rows && parts > 1) {
    pool->Run(parts, [&](int j) {
      const size_t r0 = std::min(batch, row_blocks * j / parts * kFwdRows);
      const size_t r1 = std::min(batch, row_blocks * (j + 1) / parts * kFwdRows);
      if (r0 < r1) ForwardOutputs(x + r0 * in, w, bias, y + r0 * out, r1 - r0, in, out, 0, out, p);
    });
    return;
  }
  auto outputs = [&](int j) {
    const size_t o0 = std::min(out, panels * j / parts * np), o1 = std::min(out, panels * (j + 1) / parts * np);
    if (o0 < o1) ForwardOutputs(x, w, bias, y, batch, in, out, o0, o1, p);
  };
  if (parts == 1)
    outputs(0);
  else
    pool->Run(parts, outputs);
}

// The backward split by weight rows: part j computes the weight (and bias)
// gradient of its block of weight rows over the whole batch, so each part
// writes whole rows of it; and the input gradient of its block of batch
// rows over every weight row when the weights are small (one widened chunk)
// and the batch has a block for each part, else of its block of input
// columns. Whole blocks of each blocking, so the same bits as one thread.
// Split by input columns for both (the large shapes' way, below), the parts
// wrote neighbouring elements of every row of dx and of the weight gradient:
// a cache line shared per row (gpt-tiny's layers: two threads no faster
// than one; the seed's batch of 4: 0.92x).
bool BackwardByWeightRows(const float* x, const void* w, const float* dy, float* dx, void* grad_w, void* grad_b,
                          size_t batch, size_t in, size_t out, Precision p, bool overwrite, WorkerPool* pool,
                          int parts, bool dx_by_rows) {
  const Blocking bl = HWY_DYNAMIC_DISPATCH(BlockingImpl)();
  const size_t nr = bl.bwd_nr, blocks_o = (out + nr - 1) / nr;
  const size_t mr = bl.bwd_mr, blocks_i = (batch + mr - 1) / mr;
  const size_t blocks_k = (in + bl.bwd_cols - 1) / bl.bwd_cols;
  float* dyb = grad_w != nullptr ? Scratch(3, blocks_o * batch * nr) : nullptr;
  const std::vector<float> dy_tail = DyTail(dy, batch, out, mr, dx != nullptr);
  bool flags[64] = {};
  pool->Run(parts, [&](int j) {
    const size_t qa = blocks_o * j / parts, qb = blocks_o * (j + 1) / parts;
    const size_t oa = std::min(out, qa * nr), ob = std::min(out, qb * nr);
    if (grad_w != nullptr && oa < ob) {
      PackDyBlocks(dy, batch, out, nr, qa, qb, dyb);
      flags[j] |= BackwardColumns(x, w, dy, dyb, nullptr, nullptr, grad_w, batch, in, out, 0, in, oa, ob, p, overwrite);
    }
    if (grad_b != nullptr && oa < ob) flags[j] |= BiasGradient(dy, batch, out, oa, ob, grad_b, p, overwrite);
    if (dx == nullptr) return;
    if (dx_by_rows) {
      const size_t r0 = std::min(batch, blocks_i * j / parts * mr), r1 = std::min(batch, blocks_i * (j + 1) / parts * mr);
      const float* tail = r1 == batch && !dy_tail.empty() ? dy_tail.data() : nullptr;
      if (r0 < r1)
        flags[j] |= BackwardColumns(x, w, dy + r0 * out, nullptr, tail, dx + r0 * in, nullptr, r1 - r0, in, out, 0, in,
                                    0, 0, p, overwrite);
    } else {
      const size_t k0 = std::min(in, blocks_k * j / parts * bl.bwd_cols);
      const size_t k1 = std::min(in, blocks_k * (j + 1) / parts * bl.bwd_cols);
      if (k0 < k1)
        flags[j] |= BackwardColumns(x, w, dy, nullptr, dy_tail.data(), dx, nullptr, batch, in, out, k0, k1, 0, 0, p,
                                    overwrite);
    }
  });
  bool overflow = false;
  for (int j = 0; j < parts; ++j) overflow |= flags[j];
  return overflow;
}

bool LinearBackwardLow(const float* x, const void* w, const float* dy, float* dx, void* grad_w, void* grad_b,
                       size_t batch, size_t in, size_t out, Precision p, bool overwrite, WorkerPool* pool) {
  const Blocking bl = HWY_DYNAMIC_DISPATCH(BlockingImpl)();
  const size_t blocks_i = (batch + bl.bwd_mr - 1) / bl.bwd_mr;
  if (pool != nullptr && pool->size() > 1) {
    const bool small = RoundUp(in, bl.bwd_cols) * out <= 32768;  // one widened chunk (BackwardColumns' oc)
    if (small || blocks_i < 2) {
      const size_t blocks_o = (out + bl.bwd_nr - 1) / bl.bwd_nr, blocks_k = (in + bl.bwd_cols - 1) / bl.bwd_cols;
      const bool dx_by_rows = small && blocks_i >= static_cast<size_t>(pool->size());
      const int parts = Parts(pool, in * out * std::max<size_t>(batch, 1) / 16,
                              std::min(blocks_o, dx_by_rows ? blocks_i : blocks_k));
      if (parts > 1)
        return BackwardByWeightRows(x, w, dy, dx, grad_w, grad_b, batch, in, out, p, overwrite, pool, parts,
                                    dx_by_rows);
    }
  }
  // Column ranges start on multiples of the column block (any split gives
  // the same bits; this one keeps vector loops whole).
  const size_t blocks = (in + bl.bwd_cols - 1) / bl.bwd_cols;
  const int parts = Parts(pool, in * out * std::max<size_t>(batch, 1) / 16, blocks);
  auto run = [&](const std::function<void(int)>& fn) {
    if (parts == 1)
      fn(0);
    else
      pool->Run(parts, fn);
  };
  const size_t nr = bl.bwd_nr, blocks_o = (out + nr - 1) / nr;
  float* dyb = grad_w != nullptr ? Scratch(3, blocks_o * batch * nr) : nullptr;
  if (grad_w != nullptr)  // the packing split among the threads too
    run([&](int j) { PackDyBlocks(dy, batch, out, nr, blocks_o * j / parts, blocks_o * (j + 1) / parts, dyb); });
  const std::vector<float> dy_tail = DyTail(dy, batch, out, bl.bwd_mr, dx != nullptr);
  bool flags[64] = {};  // per part (Parts gives at most 64)
  run([&](int j) {
    const size_t k0 = std::min(in, blocks * j / parts * bl.bwd_cols);
    const size_t k1 = std::min(in, blocks * (j + 1) / parts * bl.bwd_cols);
    if (k0 < k1)
      flags[j] = BackwardColumns(x, w, dy, dyb, dy_tail.data(), dx, grad_w, batch, in, out, k0, k1, 0, out, p,
                                 overwrite);
  });
  bool overflow = false;
  for (int j = 0; j < parts; ++j) overflow |= flags[j];
  if (grad_b != nullptr) overflow |= BiasGradient(dy, batch, out, 0, out, grad_b, p, overwrite);
  return overflow;
}

}  // namespace strata::exec
#endif  // HWY_ONCE
