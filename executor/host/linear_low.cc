// The host Linear layers (linear_low.h) around their kernels
// (linear_kernels.h): packing, cache blocking, the split among the pool's
// threads and the gradients' accumulation. Every output's chain is computed
// whole by one kernel call sequence of one thread, so neither the blocking
// nor the split changes a bit.
#include "host/linear_low.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "host/convert.h"
#include "host/linear_kernels.h"
#include "host/worker_pool.h"
#include "strata/core/tier.h"

namespace strata::exec {

namespace {

const std::byte* At(const void* base, size_t i, size_t bytes_per) {
  return static_cast<const std::byte*>(base) + i * bytes_per;
}
std::byte* At(void* base, size_t i, size_t bytes_per) { return static_cast<std::byte*>(base) + i * bytes_per; }

size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// A per-thread scratch buffer that only grows (a kernel call must not pay
// an mmap and its page faults for a few hundred KiB), 64-byte aligned so
// that no vector load straddles two cache lines. Slots: the parts' own
// work takes 0-2 (ForwardOutputs, BackwardColumns, BiasGradient) and the
// forward's bias 3; the backward's caller keeps dy's packed blocks in 3 and
// its tail rows in 4 while it runs part 0 on the same thread.
float* Scratch(int which, size_t n) {
  struct Buf {
    float* p = nullptr;
    size_t n = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf buf[5];
  Buf& b = buf[which];
  if (b.n < n) {
    std::free(b.p);
    b.n = RoundUp(n, 16);
    b.p = static_cast<float*>(std::aligned_alloc(64, b.n * sizeof(float)));
    if (b.p == nullptr) throw std::bad_alloc();
  }
  return b.p;
}

// Parts for a kernel of `flops`: one per pool thread once each part has at
// least the kernel's minimum, and at most `units` (its blocks). The minimum
// is what waking a sleeping worker costs: the executor's kernels find the
// pool's worker asleep (other streams ran in between, longer than its
// spin), and a wake-up took 100-250 us on a 2-vCPU VM, against a few
// microseconds for a small layer's whole kernel. gemm_bench's
// strata_fp16_2t_cold / strata_fp16_cold, per shape: gpt-tiny's layers
// 0.05-0.49 and the seed's 0.55 / 0.86 when split (each part under 10
// MFLOP); mlp 64x1024x1024's at 67 / 134 MFLOP a part and everything
// larger 1.6-2.0.
constexpr size_t kMaxParts = 64;
SplitThresholds min_flops_per_part = {64e6, 64e6};  // of 2 and 4 x batch x in x out (dW and dx)
int Parts(const WorkerPool* pool, double flops, double min_per_part, size_t units) {
  if (pool == nullptr) return 1;
  const double fit = min_per_part > 0 ? flops / min_per_part : static_cast<double>(kMaxParts);
  const auto by_size = static_cast<size_t>(std::clamp(fit, 1.0, static_cast<double>(kMaxParts)));
  return static_cast<int>(
      std::min({static_cast<size_t>(pool->size()), by_size, std::max<size_t>(units, 1), kMaxParts}));
}
double Flops(size_t batch, size_t in, size_t out, double per_mac) {
  return per_mac * static_cast<double>(std::max<size_t>(batch, 1)) * static_cast<double>(in) * static_cast<double>(out);
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
// Block by block, so that the writes run on (row by row, each row's
// blocks were written a batch apart: two KiB strides that met the reads
// at the same 4 KiB offsets, 40% of gpt-tiny's qkv backward); the block
// width a constant where it can be, so that a block's row is one or two
// moves (a memcpy call per block and row, then scalar copies, were a fifth
// of gpt-tiny's backward).
template <size_t NR>
void PackDyBlocksN(const float* dy, size_t batch, size_t out, size_t nr, size_t q0, size_t q1, float* dyb) {
  const size_t w = NR != 0 ? NR : nr;
  for (size_t q = q0; q < q1; ++q) {
    float* d = dyb + q * batch * w;
    const size_t c0 = q * w;
    if (c0 + w <= out) {
      for (size_t i = 0; i < batch; ++i, d += w)
        std::memcpy(d, dy + i * out + c0, w * sizeof(float));  // w constant: one or two moves
    } else {
      for (size_t i = 0; i < batch; ++i, d += w)
        for (size_t c = 0; c < w; ++c) d[c] = c0 + c < out ? dy[i * out + c0 + c] : 0.0f;
    }
  }
}
void PackDyBlocks(const float* dy, size_t batch, size_t out, size_t nr, size_t q0, size_t q1, float* dyb) {
  switch (nr) {
    case 4:
      return PackDyBlocksN<4>(dy, batch, out, nr, q0, q1, dyb);
    case 6:
      return PackDyBlocksN<6>(dy, batch, out, nr, q0, q1, dyb);
    default:
      return PackDyBlocksN<0>(dy, batch, out, nr, q0, q1, dyb);
  }
}

// The input gradient reads dy a block of mr rows at a time (six streams fit
// L1's ways): dy's rows past the whole blocks, padded with zero rows to a
// block ([mr x out]), in the caller's scratch (the parts only read it);
// null when there are none or no input gradient.
const float* DyTail(const float* dy, size_t batch, size_t out, size_t mr, bool input_gradient) {
  const size_t full = batch / mr * mr;
  if (!input_gradient || full == batch) return nullptr;
  float* tail = Scratch(4, mr * out);
  std::memcpy(tail, dy + full * out, (batch - full) * out * sizeof(float));
  std::fill(tail + (batch - full) * out, tail + mr * out, 0.0f);
  return tail;
}

// Per part: whether a gradient it wrote overflowed, each on its own cache
// line (the parts write them as they finish; packed, the worker's write
// took the line from under the caller's stack frame).
struct alignas(64) PartFlag {
  bool overflow;  // set false before the Run, for the parts there are only
};

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

// b's [o0, o1) widened to fp32 in this thread's scratch, zero from there to
// nb floats (all zero when b is null).
const float* WidenedBias(const void* b, size_t o0, size_t o1, size_t nb, Precision p) {
  float* bias = Scratch(3, nb);
  const size_t n = b != nullptr ? o1 - o0 : 0;
  if (n > 0) LowToFloat(At(b, o0, static_cast<size_t>(BytesPerElement(p))), bias, n, p);
  std::fill(bias + n, bias + nb, 0.0f);
  return bias;
}

// Outputs [o0, o1) of the forward (o0 a multiple of the panel width), for
// the batch's rows (x's rows `in` apart, y's `out`). k goes in chunks; per
// chunk, each panel of outputs is packed ([kc][panel width], sized to stay
// in L1) and every batch row's chains are continued through it, the chunk
// of x staying in L2 while the panels pass. Between chunks the chains wait
// in y as floats, so chunking changes no bit.
constexpr size_t kFwdRows = 16;  // LinearForwardLow's split of the batch
void ForwardOutputs(const float* x, const void* w, const void* b_low, float* y, size_t batch, size_t in, size_t out,
                    size_t o0, size_t o1, Precision p) {
  const Blocking b = LinearBlocking();
  const size_t np = b.fwd_nr, eb = static_cast<size_t>(BytesPerElement(p));
  // The range's bias widened here, by the part that reads it (widened by
  // the caller, its lines crossed to the other cores at every call),
  // padded to whole panels: the last tile reads a panel's width.
  const float* bias = WidenedBias(b_low, o0, o1, RoundUp(o1 - o0, np), p);
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
      PackWeightPanel(At(w, c0 * in + k0, eb), in, n, kc, p, rows, wp);
      ForwardPanel(xk, ldx, batch, wp, kc, first, last, bias + (c0 - o0), n, y + c0, out);
    }
  }
}

// Input columns [k0, k1) of the backward: dW[oa:ob, k0:k1] and dx[:, k0:k1]
// (oa a multiple of bwd_nr). dyb is dy packed by blocks of bwd_nr columns,
// [blocks][batch][bwd_nr] (zero past out); dy_tail is dy's last rows, a
// partial block of the dx blocking, padded to a whole one with zero rows
// ([bwd_mr x out]).
bool BackwardColumns(const float* x, const void* w, const float* dy, const float* dyb, const float* dy_tail, float* dx,
                     void* grad_w, size_t batch, size_t in, size_t out, size_t k0, size_t k1, size_t oa, size_t ob,
                     Precision p, bool overwrite) {
  const Blocking b = LinearBlocking();
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
        WeightGradBlock(xp, np, batch, dyb + o0 * batch, b.bwd_nr, dw);
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
        InputGradBlock(dy + o0, out, batch / b.bwd_mr * b.bwd_mr, dy_tail != nullptr ? dy_tail + o0 : nullptr,
                       batch_pad, wo, np, on, acc);
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
  const size_t np = LinearBlocking().fwd_nr;
  if (in == 0) {  // no chain: each output is its bias (0 + the empty sum)
    const float* bias = WidenedBias(b, 0, out, out, p);
    for (size_t i = 0; i < batch; ++i)
      for (size_t o = 0; o < out; ++o) y[i * out + o] = bias[o] + 0.0f;
    return;
  }
  const size_t panels = (out + np - 1) / np;
  const size_t row_blocks = (batch + kFwdRows - 1) / kFwdRows;
  // The parts split the outputs by panels, each packing only its own
  // weights. Where two parts meet, each row of y has a cache line both write
  // unless the meeting point falls on a line boundary: y 64-byte aligned,
  // its rows whole lines apart and panels whole lines wide. For small
  // weights (up to 64K) and a batch of several row blocks, where that does
  // not hold or a large batch makes the packing cheap, the parts split the
  // batch instead, each packing all the weights. gpt-tiny's layers on two
  // threads, Sapphire Rapids: by aligned panels 1.7-1.9x of one thread, by
  // rows 1.5-1.7x (the packing twice), by unaligned panels 0.6-1.2x.
  // Every output is one chain however it is split, so the bits are one
  // thread's.
  constexpr size_t kLine = 64 / sizeof(float);
  const bool lines_apart = reinterpret_cast<uintptr_t>(y) % 64 == 0 && out % kLine == 0 && np % kLine == 0;
  const bool by_rows = out * in <= 65536 && row_blocks >= 2 && (!lines_apart || panels < 2 || batch > 512);
  const int parts = Parts(pool, Flops(batch, in, out, 2), min_flops_per_part.forward, by_rows ? row_blocks : panels);
  if (by_rows && parts > 1) {
    pool->Run(parts, [=](int j) {
      const size_t r0 = std::min(batch, row_blocks * j / parts * kFwdRows);
      const size_t r1 = std::min(batch, row_blocks * (j + 1) / parts * kFwdRows);
      if (r0 < r1) ForwardOutputs(x + r0 * in, w, b, y + r0 * out, r1 - r0, in, out, 0, out, p);
    });
    return;
  }
  auto outputs = [=](int j) {
    const size_t o0 = std::min(out, panels * j / parts * np), o1 = std::min(out, panels * (j + 1) / parts * np);
    if (o0 < o1) ForwardOutputs(x, w, b, y, batch, in, out, o0, o1, p);
  };
  if (parts == 1)
    outputs(0);
  else
    pool->Run(parts, outputs);
}

namespace {

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
                          size_t batch, size_t in, size_t out, Precision p, bool overwrite, WorkerPool* pool, int parts,
                          bool dx_by_rows) {
  const Blocking bl = LinearBlocking();
  const size_t nr = bl.bwd_nr, blocks_o = (out + nr - 1) / nr;
  const size_t mr = bl.bwd_mr, blocks_i = (batch + mr - 1) / mr;
  const size_t blocks_k = (in + bl.bwd_cols - 1) / bl.bwd_cols;
  float* dyb = grad_w != nullptr ? Scratch(3, blocks_o * batch * nr) : nullptr;
  const float* tail = DyTail(dy, batch, out, mr, dx != nullptr);
  const size_t cols = bl.bwd_cols;
  PartFlag flags[kMaxParts];
  for (int j = 0; j < parts; ++j) flags[j].overflow = false;
  PartFlag* flag = flags;
  pool->Run(parts, [=](int j) {
    const size_t qa = blocks_o * j / parts, qb = blocks_o * (j + 1) / parts;
    const size_t oa = std::min(out, qa * nr), ob = std::min(out, qb * nr);
    if (grad_w != nullptr && oa < ob) {
      PackDyBlocks(dy, batch, out, nr, qa, qb, dyb);
      flag[j].overflow |=
          BackwardColumns(x, w, dy, dyb, nullptr, nullptr, grad_w, batch, in, out, 0, in, oa, ob, p, overwrite);
    }
    if (grad_b != nullptr && oa < ob) flag[j].overflow |= BiasGradient(dy, batch, out, oa, ob, grad_b, p, overwrite);
    if (dx == nullptr) return;
    if (dx_by_rows) {
      const size_t r0 = std::min(batch, blocks_i * j / parts * mr),
                   r1 = std::min(batch, blocks_i * (j + 1) / parts * mr);
      if (r0 < r1)
        flag[j].overflow |= BackwardColumns(x, w, dy + r0 * out, nullptr, r1 == batch ? tail : nullptr, dx + r0 * in,
                                            nullptr, r1 - r0, in, out, 0, in, 0, 0, p, overwrite);
    } else {
      const size_t k0 = std::min(in, blocks_k * j / parts * cols), k1 = std::min(in, blocks_k * (j + 1) / parts * cols);
      if (k0 < k1)
        flag[j].overflow |=
            BackwardColumns(x, w, dy, nullptr, tail, dx, nullptr, batch, in, out, k0, k1, 0, 0, p, overwrite);
    }
  });
  bool overflow = false;
  for (int j = 0; j < parts; ++j) overflow |= flags[j].overflow;
  return overflow;
}

}  // namespace

SplitThresholds SetSplitThresholdsForTest(SplitThresholds t) {
  const SplitThresholds old = min_flops_per_part;
  min_flops_per_part = t;
  return old;
}

bool LinearBackwardLow(const float* x, const void* w, const float* dy, float* dx, void* grad_w, void* grad_b,
                       size_t batch, size_t in, size_t out, Precision p, bool overwrite, WorkerPool* pool) {
  const Blocking bl = LinearBlocking();
  const size_t blocks_i = (batch + bl.bwd_mr - 1) / bl.bwd_mr;
  if (pool != nullptr && pool->size() > 1) {
    const bool small = RoundUp(in, bl.bwd_cols) * out <= 32768;  // one widened chunk (BackwardColumns' oc)
    if (small || blocks_i < 2) {
      const size_t blocks_o = (out + bl.bwd_nr - 1) / bl.bwd_nr, blocks_k = (in + bl.bwd_cols - 1) / bl.bwd_cols;
      const bool dx_by_rows = small && blocks_i >= static_cast<size_t>(pool->size());
      const int parts = Parts(pool, Flops(batch, in, out, 4), min_flops_per_part.backward,
                              std::min(blocks_o, dx_by_rows ? blocks_i : blocks_k));
      if (parts > 1)
        return BackwardByWeightRows(x, w, dy, dx, grad_w, grad_b, batch, in, out, p, overwrite, pool, parts,
                                    dx_by_rows);
    }
  }
  // Column ranges start on multiples of the column block (any split gives
  // the same bits; this one keeps vector loops whole).
  const size_t blocks = (in + bl.bwd_cols - 1) / bl.bwd_cols;
  const int parts = Parts(pool, Flops(batch, in, out, 4), min_flops_per_part.backward, blocks);
  auto run = [&](const auto& fn) {
    if (parts == 1)
      fn(0);
    else
      pool->Run(parts, fn);
  };
  const size_t nr = bl.bwd_nr, blocks_o = (out + nr - 1) / nr;
  float* dyb = grad_w != nullptr ? Scratch(3, blocks_o * batch * nr) : nullptr;
  if (grad_w != nullptr)  // the packing split among the threads too
    run([=](int j) { PackDyBlocks(dy, batch, out, nr, blocks_o * j / parts, blocks_o * (j + 1) / parts, dyb); });
  const float* tail = DyTail(dy, batch, out, bl.bwd_mr, dx != nullptr);
  const size_t cols = bl.bwd_cols;
  PartFlag flags[kMaxParts];
  for (int j = 0; j < parts; ++j) flags[j].overflow = false;
  PartFlag* flag = flags;
  run([=](int j) {
    const size_t k0 = std::min(in, blocks * j / parts * cols), k1 = std::min(in, blocks * (j + 1) / parts * cols);
    if (k0 < k1)
      flag[j].overflow = BackwardColumns(x, w, dy, dyb, tail, dx, grad_w, batch, in, out, k0, k1, 0, out, p, overwrite);
  });
  bool overflow = false;
  for (int j = 0; j < parts; ++j) overflow |= flags[j].overflow;
  if (grad_b != nullptr) overflow |= BiasGradient(dy, batch, out, 0, out, grad_b, p, overwrite);
  return overflow;
}

}  // namespace strata::exec
