// Linear layers on low-precision weights (or fp32 ones: the GPT's, and
// the MLP's in fp32), for the host backend: the same
// results, bit for bit, as widening the weights to fp32 and running
// LinearForward / LinearBackward (mlp_kernels.h) on them, with the gradient
// then added into its low-precision buffer (AccumulateFloatsToLow), but
// without the fp32 copies: a weight row is widened a chunk at a time into a
// cache-resident tile, and its gradient is accumulated from one. Memory
// traffic per weight drops from about 10 bytes (forward) and 40 (backward)
// to 2 and 6, which is what lets a host "GPU" run faster than it copies.
//
// Bit-exactness holds because every output keeps its one chain of fused
// multiply-adds in increasing index whatever the blocking: forward over k
// (chunked, the chain waiting in y as a float between chunks), dW over the
// batch, dx over output rows. With a pool, the forward splits its outputs
// (or, for small weights, its batch rows) and the backward its input
// columns (or weight and batch rows) among the pool's threads: each chain
// is computed whole by one thread, so the bits are those of one thread.
#pragma once

#include <cstddef>

#include "strata/core/tier.h"

namespace strata::exec {

class WorkerPool;

// y[batch x out] = x W^T + b, with W [out x in] and b [out] in precision p
// (b may be null).
void LinearForwardLow(const float* x, const void* w, const void* b, float* y, size_t batch, size_t in, size_t out,
                      Precision p, WorkerPool* pool = nullptr);

// grad_w += dy^T x and grad_b += sum_i dy (rounded to p as
// AccumulateFloatsToLow rounds: the fp32 sums first, then the addition),
// dx = dy W (dx may be null; grad_w and grad_b may be null: no gradient).
// With `overwrite`, the gradients' prior contents are not read: the result
// is what accumulating onto zeros gives (AccumulateFloatsToLow's
// onto_zeros), so a gradient buffer just allocated needs neither zeroing
// nor a read pass.
// Returns true if any gradient element written is not finite.
bool LinearBackwardLow(const float* x, const void* w, const float* dy, float* dx, void* grad_w, void* grad_b,
                       size_t batch, size_t in, size_t out, Precision p, bool overwrite = false,
                       WorkerPool* pool = nullptr);

// The least work, in FLOPs, each part of a split call gets (linear_low.cc:
// 64 MFLOP forward and backward, measured by gemm_bench). Tests lower it to
// split small shapes; returns the previous values. Not thread-safe: set it
// before any kernel runs.
struct SplitThresholds {
  double forward, backward;
};
SplitThresholds SetSplitThresholdsForTest(SplitThresholds t);

}  // namespace strata::exec
