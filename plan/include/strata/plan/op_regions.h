// The byte regions an op touches, as the executor's contract (plan.h, Move
// and Op) defines them: what the validator's layout and hazard checks and
// the fresh-bytes analysis (fresh_bytes.h) walk.
#pragma once

#include "strata/plan/plan.h"

namespace strata {

// Calls f(region, what, write, rank) for every region op names: move
// sources read and destinations written; compute params read and
// gradients written; optimizer states written and gradients read. `rank`
// is the rank the access happens on (-1: every rank; a move naming a rank
// touches that rank's memory only, except an allreduce's source, read on
// every rank, and an allgather's destination, written on every rank).
// Regions may be unset (buffer -1) or the optimizer's output (kOpOutput).
template <typename F>
void ForEachRegion(const Op& op, F&& f) {
  for (const Move& m : op.moves) {
    f(m.src, "move source", false, op.kind == OpKind::kAllReduce ? -1 : m.rank);
    f(m.dst, "move destination", true, op.kind == OpKind::kAllGather ? -1 : m.rank);
  }
  for (const Region& r : op.params) f(r, "param", false, -1);
  for (const Region& r : op.grads) f(r, "grad", true, -1);
  f(op.master, "master", true, -1);
  f(op.exp_avg, "exp_avg", true, -1);
  f(op.exp_avg_sq, "exp_avg_sq", true, -1);
  f(op.grad_in, "grad_in", false, -1);
}

// Whether a backward stores (=) its k-th gradient rather than adding it
// (Op::grads_store, or a mask of its layout).
inline bool StoresGrad(uint32_t grads_store, size_t k) { return k < 32 && ((grads_store >> k) & 1u) != 0; }
inline bool StoresGrad(const Op& op, size_t k) { return StoresGrad(op.grads_store, k); }

}  // namespace strata
