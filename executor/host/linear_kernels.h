// The host Linear layers' kernels, one Highway dispatch each
// (linear_kernels.cc); linear_low.cc blocks, packs and splits around them.
// Every kernel continues or computes whole chains of fused multiply-adds in
// increasing index (linear_low.h's contract). Private to the host backend.
#pragma once

#include <cstddef>

#include "strata/core/tier.h"

namespace strata::exec {

// The dispatched target's register blocking.
struct Blocking {
  size_t fwd_mr, fwd_nr;  // forward: batch rows per tile; outputs per packed panel
  size_t bwd_nr, bwd_mr;  // dW: weight rows per block; dx: batch rows per block
  size_t bwd_cols;        // backward: columns (k) per block
};
Blocking LinearBlocking();

// The forward's weights for one panel: wp[k][c] = W[c][k] widened to fp32,
// for c < n (<= fwd_nr), k < kc; zero for n <= c < fwd_nr. W's rows
// (precision p) are lds elements apart from w. `rows`: scratch of fwd_nr x
// kc floats.
void PackWeightPanel(const void* w, size_t lds, size_t n, size_t kc, Precision p, float* rows, float* wp);

// Continues the chains of y[i][c] for rows i < rows of x (ldx apart) and
// outputs c < nc of a packed panel, over kc steps of k: from zero (first)
// or from y's floats, then y = bias[c] + chain (last). bias has fwd_nr
// readable floats.
void ForwardPanel(const float* x, size_t ldx, size_t rows, const float* wp, size_t kc, bool first, bool last,
                  const float* bias, size_t nc, float* y, size_t ldy);

// dw[r][0:np] = chain over i < batch, in order, of dy[i][r] * xp[i][0:np],
// for r < bwd_nr (dy rows lddy apart; np a multiple of bwd_cols).
void WeightGradBlock(const float* xp, size_t np, size_t batch, const float* dy, size_t lddy, float* dw);

// acc[i][0:np] continues over dy[i][o] * wt[o][0:np] for o < on in order,
// for rows i < rows (a multiple of bwd_mr); row i of dy at dy + i * ldy for
// the whole blocks (i < full), in the zero-padded copy `tail` ([bwd_mr x
// ldy]) for the last one otherwise.
void InputGradBlock(const float* dy, size_t ldy, size_t full, const float* tail, size_t rows, const float* wt,
                    size_t np, size_t on, float* acc);

}  // namespace strata::exec
