// Compiled once per SIMD target by Highway (foreach_target re-includes this
// file); the kernels are dispatched at run time. Every vector operation is a
// separate IEEE multiply and add, as in the scalar kernels (the build forbids
// FMA contraction), so each target gives the same bits.
//
// Register blocking keeps each output's summation order (linear_low.h):
// - forward: an MR x NR block of outputs (batch rows x weight rows) holds
//   its 16 partial sums per output in registers while k runs; each x and
//   weight vector loaded feeds NR or MR multiply-adds;
// - dW: NRB weight rows x KV vectors of k, summing over the batch in order;
// - dx: MRB batch rows x KV vectors of k, summing over weight rows in order.
// Widened weights and packed inputs are staged in cache-sized blocks.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "host/linear_low.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
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
HWY_INLINE V VMulAdd(V acc, V a, V b) { return acc + a * b; }
HWY_INLINE V VAdd(V a, V b) { return a + b; }
#else
using D = hn::CappedTag<float, 16>;
using V = hn::Vec<D>;
constexpr size_t kN = hn::MaxLanes(D());
HWY_INLINE V VZero() { return hn::Zero(D()); }
HWY_INLINE V VLoad(const float* p) { return hn::LoadU(D(), p); }
HWY_INLINE void VStore(V v, float* p) { hn::StoreU(v, D(), p); }
HWY_INLINE V VSet(float f) { return hn::Set(D(), f); }
// Two roundings, as the scalar reference (no FMA).
HWY_INLINE V VMulAdd(V acc, V a, V b) { return hn::Add(acc, hn::Mul(a, b)); }
HWY_INLINE V VAdd(V a, V b) { return hn::Add(a, b); }
#endif
constexpr size_t kV = 16 / kN;  // vectors per output's 16 partial sums

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

// Accumulators per block: 16 of 32 registers (AVX-512), 12 of 16 (AVX2,
// SSE4), each x or weight vector loaded once into a register and feeding
// several. Backward, 6 rows x 2 vectors (a broadcast and a product take the
// other registers) measured best on Zen 3 among 3x3, 5x2, 6x2 and 3x4.
constexpr size_t kFwdMR = kV == 1 ? 4 : kV == 2 ? 2 : 1;
constexpr size_t kFwdNR = kV == 1 ? 4 : kV <= 4 ? 3 : 1;
constexpr size_t kBwdKV = kV == 1 ? 4 : 2;
constexpr size_t kBwdRows = kV == 1 ? 4 : kV <= 4 ? 6 : 1;
constexpr size_t kBwdCols = kBwdKV * kN;

Blocking BlockingImpl() { return {kFwdMR, kFwdNR, kBwdRows, kBwdRows, kBwdCols}; }

// LinearForward's pairwise sum of an output's 16 partial sums, held in kV
// vectors (lane l of a[v] is partial sum v * kN + l): first p[j] + p[j + 8]
// for j < 8, then + p[j + 4], and so on, each step one vector addition.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
template <class DD>
HWY_INLINE float ReduceLanes(DD d, hn::Vec<DD> v) {
  if constexpr (hn::MaxLanes(d) == 1) {
    return hn::GetLane(v);
  } else {
    const hn::Half<DD> dh;
    return ReduceLanes(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}
#endif
HWY_INLINE float Reduce16(V* a) {
  for (size_t n = kV; n > 1; n /= 2)
    for (size_t j = 0; j < n / 2; ++j) a[j] = VAdd(a[j], a[j + n / 2]);
#if HWY_HAVE_SCALABLE
  return a[0];
#elif HWY_TARGET == HWY_SCALAR
  return hn::GetLane(a[0]);
#else
  return ReduceLanes(D(), a[0]);
#endif
}

// y[r][c] = bias[c] + x[r] . w[c] for r < MR, c < nc (the panel has NR
// rows, zero past nc): lane j of each output's 16 partial sums takes
// k = j (mod 16) in increasing k, k < kp (a multiple of 16), and the lanes
// are then summed pairwise.
template <size_t MR, size_t NR>
HWY_INLINE void ForwardMicro(const float* HWY_RESTRICT x, size_t ldx, const float* HWY_RESTRICT w, size_t kp,
                             const float* HWY_RESTRICT bias, size_t nc, float* HWY_RESTRICT y, size_t ldy) {
  V acc[MR][NR][kV];
  for (size_t r = 0; r < MR; ++r)
    for (size_t c = 0; c < NR; ++c)
      for (size_t v = 0; v < kV; ++v) acc[r][c][v] = VZero();
  for (size_t k = 0; k < kp; k += 16) {
    for (size_t v = 0; v < kV; ++v) {
      V xv[MR];
      for (size_t r = 0; r < MR; ++r) {
        xv[r] = VLoad(x + r * ldx + k + v * kN);
        Pin(xv[r]);
      }
      for (size_t c = 0; c < NR; ++c) {
        V wv = VLoad(w + c * kp + k + v * kN);
        Pin(wv);
        for (size_t r = 0; r < MR; ++r) acc[r][c][v] = VMulAdd(acc[r][c][v], xv[r], wv);
      }
    }
  }
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  if constexpr (kN == 8 && kV == 2) {
    // Four outputs' pairwise sums at once (Reduce16's steps, the same
    // additions in the same order): fold the two vectors; then lanes j and
    // j + 4 of two outputs in one vector, j and j + 2 of four, and adjacent
    // lanes. Per output that is about a third of Reduce16's instructions,
    // which at K = 64 cost as much as the products.
    const D d;
    const hn::Repartition<uint64_t, D> du;
    constexpr size_t kOut = MR * NR;
    V f[(kOut + 3) / 4 * 4];
    for (size_t q = 0; q < kOut; ++q) f[q] = VAdd(acc[q / NR][q % NR][0], acc[q / NR][q % NR][1]);
    for (size_t q = kOut; q < (kOut + 3) / 4 * 4; ++q) f[q] = VZero();
    for (size_t g = 0; g < kOut; g += 4) {
      const V ab = VAdd(hn::ConcatLowerLower(d, f[g + 1], f[g]), hn::ConcatUpperUpper(d, f[g + 1], f[g]));
      const V cd = VAdd(hn::ConcatLowerLower(d, f[g + 3], f[g + 2]), hn::ConcatUpperUpper(d, f[g + 3], f[g + 2]));
      const auto ab64 = hn::BitCast(du, ab), cd64 = hn::BitCast(du, cd);
      const V e = VAdd(hn::BitCast(d, hn::InterleaveLower(du, ab64, cd64)),
                       hn::BitCast(d, hn::InterleaveUpper(du, ab64, cd64)));
      alignas(32) float t[8];
      hn::Store(VAdd(e, hn::Shuffle2301(e)), d, t);
      const float sum[4] = {t[0], t[4], t[2], t[6]};  // outputs g, g + 1, g + 2, g + 3
      for (size_t q = g; q < std::min(g + 4, kOut); ++q)
        if (q % NR < nc) y[q / NR * ldy + q % NR] = bias[q % NR] + sum[q - g];
    }
    return;
  }
  if constexpr (kN == 16 && kV == 1) {
    // AVX-512: eight outputs' pairwise sums at once, Reduce16's additions on
    // the same operands: the 256-bit halves of two outputs (lane j + j + 8),
    // then 128-bit blocks of four (j + j + 4), then 64-bit pairs inside the
    // blocks of eight (j + j + 2), then adjacent lanes. Reduce16 per output
    // spends as many instructions as the products at K = 64.
    const D d;
    const hn::Repartition<uint64_t, D> du;
    constexpr size_t kOut = MR * NR, kPad = (kOut + 7) / 8 * 8;
    V f[kPad], g[kPad / 2], h[kPad / 4];
    for (size_t q = 0; q < kPad; ++q) f[q] = q < kOut ? acc[q / NR][q % NR][0] : VZero();
    for (size_t i = 0; i < kPad / 2; ++i)  // g[i]: output 2i in lanes 0-7, 2i + 1 in 8-15
      g[i] = VAdd(hn::ConcatLowerLower(d, f[2 * i + 1], f[2 * i]), hn::ConcatUpperUpper(d, f[2 * i + 1], f[2 * i]));
    for (size_t j = 0; j < kPad / 4; ++j) {  // h[j]'s blocks: outputs 4j, 4j + 2, 4j + 1, 4j + 3
      const V x = g[2 * j], yv = g[2 * j + 1];
      h[j] = VAdd(hn::OddEvenBlocks(hn::SwapAdjacentBlocks(yv), x), hn::OddEvenBlocks(yv, hn::SwapAdjacentBlocks(x)));
    }
    // Lane 4b of a step's result holds h[2k]'s block b, lane 4b + 2 h[2k + 1]'s.
    constexpr size_t kLaneOut[8] = {0, 4, 2, 6, 1, 5, 3, 7};  // lane / 2 -> output - 8k
    for (size_t k = 0; k < kPad / 8; ++k) {
      const auto a64 = hn::BitCast(du, h[2 * k]), b64 = hn::BitCast(du, h[2 * k + 1]);
      const V e = VAdd(hn::BitCast(d, hn::InterleaveLower(du, a64, b64)), hn::BitCast(d, hn::InterleaveUpper(du, a64, b64)));
      alignas(64) float t[16];
      hn::Store(VAdd(e, hn::Shuffle2301(e)), d, t);
      for (size_t l = 0; l < 8; ++l) {
        const size_t q = 8 * k + kLaneOut[l];
        if (q < kOut && q % NR < nc) y[q / NR * ldy + q % NR] = bias[q % NR] + t[2 * l];
      }
    }
    return;
  }
#endif
  for (size_t r = 0; r < MR; ++r)
    for (size_t c = 0; c < nc; ++c) y[r * ldy + c] = bias[c] + Reduce16(acc[r][c]);
}

// ForwardMicro for rows i < rows of x (ldx apart) against a panel of
// kFwdNR widened weight rows of kp floats.
void ForwardBlockImpl(const float* x, size_t ldx, size_t rows, const float* w, size_t kp, const float* bias,
                      size_t nc, float* y, size_t ldy) {
  size_t i = 0;
  for (; i + kFwdMR <= rows; i += kFwdMR)
    ForwardMicro<kFwdMR, kFwdNR>(x + i * ldx, ldx, w, kp, bias, nc, y + i * ldy, ldy);
  for (; i < rows; ++i) ForwardMicro<1, kFwdNR>(x + i * ldx, ldx, w, kp, bias, nc, y + i * ldy, ldy);
}

// The backward's block: acc[r][v] += g(s, r) * vec(s)[v] for steps s <
// steps in order, rows r < kBwdRows, with vec(s) = vec + s * vstep
// (kBwdKV vectors) and g(s, r) = g[s * gstep + r * grow], one broadcast per
// row. dW steps over the batch, dx over weight rows.
HWY_INLINE void BroadcastBlock(V (&acc)[kBwdRows][kBwdKV], const float* HWY_RESTRICT vec, size_t vstep,
                               const float* HWY_RESTRICT g, size_t gstep, size_t grow, size_t steps) {
  for (size_t s = 0; s < steps; ++s) {
    V vv[kBwdKV];
    for (size_t v = 0; v < kBwdKV; ++v) {
      vv[v] = VLoad(vec + s * vstep + v * kN);
      Pin(vv[v]);
    }
    for (size_t r = 0; r < kBwdRows; ++r) {
      const V gv = VSet(g[s * gstep + r * grow]);
      for (size_t v = 0; v < kBwdKV; ++v) acc[r][v] = VMulAdd(acc[r][v], gv, vv[v]);
    }
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
HWY_EXPORT(ForwardBlockImpl);
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

// x's rows as the forward kernel reads them (kp floats apart, 64-byte
// aligned): x itself when they already are, else a padded copy in this
// thread's scratch.
const float* KernelRows(const float* x, size_t rows, size_t in, size_t kp) {
  if (kp == in && reinterpret_cast<uintptr_t>(x) % 64 == 0) return x;
  float* xpad = Scratch(3, rows * kp);
  CopyPadded(x, in, rows, in, xpad, kp);
  return xpad;
}

// dy's column blocks [q0, q1) of nr columns packed for the weight gradient,
// [block][batch][nr] (zero past out): each block's broadcasts then come from
// one contiguous run over the batch (dy's own rows can be a power of two
// apart, which made the whole batch meet in one L1 set).
void PackDyBlocks(const float* dy, size_t batch, size_t out, size_t nr, size_t q0, size_t q1, float* dyb) {
  for (size_t q = q0; q < q1; ++q)
    CopyPadded(dy + q * nr, out, batch, std::min(nr, out - q * nr), dyb + q * batch * nr, nr);
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

// Outputs [o0, o1) of the forward. x has ldx >= kp readable floats per row.
// A group of weight rows (up to about 256 KiB) is widened once; against it
// the batch goes in blocks of kFwdRows rows (x's block stays in L2 while
// every panel of the group meets it; a panel stays in L1 for the block).
// Chunking k as well (to hold both in L1) measured slower: the partial
// sums then go through memory between chunks.
constexpr size_t kFwdRows = 16;
void ForwardOutputs(const float* x, size_t ldx, const void* w, const float* bias, float* y, size_t batch, size_t in,
                    size_t out, size_t o0, size_t o1, Precision p) {
  constexpr size_t kRows = kFwdRows;
  const Blocking b = HWY_DYNAMIC_DISPATCH(BlockingImpl)();
  const size_t nr = b.fwd_nr;
  const size_t kp = RoundUp(in, 16);
  const size_t group = std::max(nr, std::min(RoundUp(o1 - o0, nr), (65536 / kp) / nr * nr));
  float* wt = Scratch(0, group * kp);
  for (size_t g0 = o0; g0 < o1; g0 += group) {
    const size_t gn = std::min(group, o1 - g0), panels = (gn + nr - 1) / nr;
    Widen(w, g0, gn, in, 0, in, kp, p, wt);
    std::fill(wt + gn * kp, wt + panels * nr * kp, 0.0f);
    for (size_t i0 = 0; i0 < batch; i0 += kRows) {
      const size_t rows = std::min(kRows, batch - i0);
      for (size_t j = 0; j < panels; ++j)
        HWY_DYNAMIC_DISPATCH(ForwardBlockImpl)(x + i0 * ldx, ldx, rows, wt + j * nr * kp, kp, bias + g0 + j * nr,
                                               std::min(nr, gn - j * nr), y + i0 * out + g0 + j * nr, out);
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
      // x[:, c0:c0+n] packed (np floats per row, zero padded).
      float* xp = Scratch(0, batch * np);
      CopyPadded(x + c0, in, batch, n, xp, np);
      float* dw = Scratch(1, b.bwd_nr * np);
      for (size_t o0 = oa; o0 < ob; o0 += b.bwd_nr) {
        HWY_DYNAMIC_DISPATCH(WeightGradBlockImpl)(xp, np, batch, dyb + o0 * batch, b.bwd_nr, dw);
        for (size_t r = 0; r < std::min(b.bwd_nr, ob - o0); ++r)
          overflow |= AccumulateFloatsToLow(At(grad_w, (o0 + r) * in + c0, eb), dw + r * np, n, p, overwrite);
      }
    }
    if (dx != nullptr) {
      // dx[:, c0:c0+n] accumulated over weight rows in order, staged in a
      // padded block; the weight rows widened a chunk at a time.
      const size_t batch_pad = RoundUp(batch, b.bwd_mr);
      float* acc = Scratch(1, batch_pad * np);
      std::fill(acc, acc + batch_pad * np, 0.0f);
      const size_t oc = std::max<size_t>(1, 32768 / np);
      float* wt = Scratch(2, oc * np);
      for (size_t o0 = 0; o0 < out; o0 += oc) {
        const size_t on = std::min(oc, out - o0);
        Widen(w, o0, on, in, c0, n, np, p, wt);
        // (No tail rows: dy_tail is null, and an offset on it undefined.)
        HWY_DYNAMIC_DISPATCH(InputGradBlockImpl)(dy + o0, out, batch / b.bwd_mr * b.bwd_mr,
                                                 dy_tail != nullptr ? dy_tail + o0 : nullptr, batch_pad, wt, np, on, acc);
      }
      for (size_t i = 0; i < batch; ++i) std::memcpy(dx + i * in + c0, acc + i * np, n * sizeof(float));
    }
  }
  return overflow;
}

}  // namespace

void LinearForwardLow(const float* x, const void* w, const void* b, float* y, size_t batch, size_t in, size_t out,
                      Precision p, WorkerPool* pool) {
  std::vector<float> bias(out, 0.0f);
  if (b != nullptr) LowToFloat(b, bias.data(), out, p);
  // Rows of x padded to a multiple of 16 when they are not already.
  const size_t kp = RoundUp(in, 16);
  const size_t nr = HWY_DYNAMIC_DISPATCH(BlockingImpl)().fwd_nr;
  const size_t panels = (out + nr - 1) / nr;
  const size_t row_blocks = (batch + kFwdRows - 1) / kFwdRows;
  // Small weights (one widened group) and a batch of several row blocks:
  // the parts split the batch by whole row blocks, each computing every
  // output of its rows (the same blocks, so the same bits, as one thread).
  // Split by outputs instead, the parts wrote neighbouring floats of every
  // row of y: a shared cache line per row unless y's rows happen to be
  // 64-byte aligned at the split, and each part read all of x, written by
  // the caller's core (gpt-tiny's 128x64x64: two threads 0.46x of one).
  const bool by_rows = out * kp <= 65536 && row_blocks >= 2;
  const int parts = Parts(pool, in * out * std::max<size_t>(batch, 1) / 16, by_rows ? row_blocks : panels);
  if (by_rows && parts > 1) {
    pool->Run(parts, [&](int j) {
      const size_t r0 = std::min(batch, row_blocks * j / parts * kFwdRows);
      const size_t r1 = std::min(batch, row_blocks * (j + 1) / parts * kFwdRows);
      if (r0 >= r1) return;
      // Each part pads its own rows (its core's cache, in parallel).
      ForwardOutputs(KernelRows(x + r0 * in, r1 - r0, in, kp), kp, w, bias.data(), y + r0 * out, r1 - r0, in, out, 0,
                     out, p);
    });
    return;
  }
  const float* xs = KernelRows(x, batch, in, kp);
  auto outputs = [&](int j) {
    const size_t o0 = std::min(out, panels * j / parts * nr), o1 = std::min(out, panels * (j + 1) / parts * nr);
    ForwardOutputs(xs, kp, w, bias.data(), y, batch, in, out, o0, o1, p);
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
