// FSDP2 front end: compute ops with their activations, the reshard after
// forward, and each unit's gradient reduction (fsdp_builder.h; the source:
// docs/fsdp2-source.md sections 3 and 5).
#include "fsdp_builder.h"

namespace strata::detail {

void FsdpBuilder::Compute(int pos) {
  const int mi = pos_.seq[pos].module;
  const ModuleSpec& m = graph_.modules[mi];
  const int u = unit_of_module_[mi];
  const FsdpUnit& unit = units_[u];
  const bool bwd = Backward(pos), rec = Recompute(pos);
  const int l = m.layer;
  const bool ckpt = s_.training.activation_checkpointing && l >= 0;
  em_.SetPhase(bwd || rec ? Phase::kBackward : Phase::kForward);
  em_.SetModule(mi);
  Op op = em_.NewComputeOp(mi, bwd, rec);
  op.deps = {gather_op_[u], last_compute_};
  if (!m.param_groups.empty()) AddOnce(op.reads, gathered_[u]);
  for (size_t k = 0; k < m.param_groups.size(); ++k) {
    const int gi = m.param_groups[k];
    const size_t at = static_cast<size_t>(std::find(unit.groups.begin(), unit.groups.end(), gi) - unit.groups.begin());
    op.params.push_back(R(gathered_[u], Lp(unit.off[at]), graph_.param_groups[gi].elements.bytes(lp_)));
    if (!bwd) continue;
    // Autograd's unsharded gradients, laid out as the reduce-scatter input
    // (chunk_cat): each parameter's padded rows (the first gradient of a
    // group stores, zeros over its padding: MarkFreshBytes).
    if (ugrad_[u] < 0) {
      ugrad_[u] = em_.NewBuffer(em_.Tag() + "fsdp.grad.unsharded." + unit.name, Tier::kGpu, StateKind::kGrad,
                                Lp(unit.shard * shard_));
      op.allocs.push_back(ugrad_[u]);
    }
    AddOnce(op.writes, ugrad_[u]);
    op.grads.push_back(R(ugrad_[u], Lp(unit.off[at]), Lp(part_[static_cast<size_t>(gi)] * shard_)));
  }
  if (rec || !bwd) {
    op.flops = m.fwd_flops;
    act_[mi] = em_.NewBuffer(em_.Tag() + (rec ? "act.recompute." : "act.") + m.name, Tier::kGpu, StateKind::kActivation,
                             m.act_bytes);
    op.allocs.push_back(act_[mi]);
    op.writes.push_back(act_[mi]);
  }
  if (ckpt && !bwd && mi == pos_.layer_first[l]) {
    // torch.utils.checkpoint keeps the layer's input on the GPU.
    if (rec) {
      op.reads.push_back(ckpt_[l]);
    } else {
      ckpt_[l] = em_.NewBuffer(em_.Tag() + "ckpt.layer" + std::to_string(l), Tier::kGpu, StateKind::kActivation,
                               graph_.checkpoint_bytes[l]);
      op.allocs.push_back(ckpt_[l]);
      op.writes.push_back(ckpt_[l]);
    }
  }
  if (ckpt && !bwd && !rec && mi == pos_.layer_last[l])
    for (int k = pos_.layer_first[l]; k <= pos_.layer_last[l]; ++k) op.frees.push_back(act_[k]), act_[k] = -1;
  if (bwd) {
    op.flops = 2 * m.fwd_flops;
    if (act_[mi] >= 0) op.reads.push_back(act_[mi]), op.frees.push_back(act_[mi]), act_[mi] = -1;
    if (ckpt && mi == pos_.layer_first[l]) op.frees.push_back(ckpt_[l]), ckpt_[l] = -1;
  }
  // Reshard after forward (PG.post_forward): free the unsharded parameters,
  // or keep this rank's 1/k of each (FSDPParam.to_sharded_post_forward);
  // after backward (post_backward) always free them.
  const bool fwd_end = !bwd && !rec && pos == unit.last_fwd && Resharded(u);
  if (fwd_end && post_k_ > 0) {
    post_shard_[u] = em_.NewBuffer(em_.Tag() + "fsdp.post_forward." + unit.name, Tier::kGpu, StateKind::kGatherBuffer,
                                   Lp(unit.shard * shard_ / post_k_));
    op.allocs.push_back(post_shard_[u]);
    op.writes.push_back(post_shard_[u]);
    for (size_t k = 0; k < unit.groups.size(); ++k) {
      const int64_t slice = part_[static_cast<size_t>(unit.groups[k])] * shard_ / post_k_;
      for (int r = 0; r < plan_.world_size; ++r)
        op.moves.push_back({R(gathered_[u], Lp(unit.off[k] + (r % post_k_) * slice), Lp(slice)),
                            R(post_shard_[u], Lp(unit.off[k] / post_k_), Lp(slice)), false, false, r});
    }
  }
  if (fwd_end || (bwd && pos == unit.last_bwd)) {
    AddOnce(op.reads, gathered_[u]);
    op.frees.push_back(gathered_[u]);
    gathered_[u] = -1;
  }
  last_compute_ = em_.Emit(std::move(op));
  if (bwd && pos == unit.last_bwd) ReduceScatter(u);
}

// post_backward's foreach_reduce (COLL): the unit's gradients reduce-
// scattered in reduce_dtype over the shard group, then all-reduced over the
// replicate group (HSDP), cast to fp32 and added to the sharded gradient;
// under CPU offload copied to the CPU. The input stays referenced until
// the next unit's post_backward (reduce_scatter_states, one deep).
void FsdpBuilder::ReduceScatter(int u) {
  const FsdpUnit& unit = units_[u];
  const bool first = em_.micro() == 0, offload = tier_ == Tier::kCpu;
  em_.Outside(Phase::kBackward);
  Op op = em_.NewOp(em_.Tag() + "reduce_scatter." + unit.name, OpKind::kReduceScatter, Stream::kComm);
  const int64_t whole = unit.shard * shard_;
  op.group = shard_group_;
  op.bytes = Bytes(whole * reduce_);
  op.deps = {last_compute_};
  op.reads = {ugrad_[u]};
  // chunk_cat into the reduce-dtype input, a buffer of its own when the
  // dtype differs (autograd's gradients then go: unsharded_grads.clear());
  // the input is what stays referenced until the next reduce-scatter.
  BufferId input = ugrad_[u];
  if (reduce_ != lp_) {
    input = em_.NewBuffer(em_.Tag() + "fsdp.reduce_input." + unit.name, Tier::kGpu, StateKind::kCommBuffer,
                          Bytes(whole * reduce_));
    op.allocs.push_back(input);
    op.writes.push_back(input);
    op.frees.push_back(ugrad_[u]);
  }
  op.copy_bytes = Lp(whole) + Bytes(whole * reduce_) + (reduce_ != 4 ? Bytes(unit.shard * (reduce_ + 4)) : Bytes(0));
  BufferId dst;
  if (offload) {
    dst = em_.NewBuffer(op.name + ".out", Tier::kGpu, StateKind::kGrad, Bytes(unit.shard * 4));
    op.allocs.push_back(dst);
  } else {
    if (first) {
      grad_[u] = em_.NewBuffer("fsdp.grad32." + unit.name, Tier::kGpu, StateKind::kGrad, Bytes(unit.shard * 4));
      op.allocs.push_back(grad_[u]);
    }
    dst = grad_[u];
  }
  op.writes = {dst};
  for (size_t k = 0; k < unit.groups.size(); ++k) {
    const int64_t part = part_[static_cast<size_t>(unit.groups[k])];
    op.moves.push_back({R(ugrad_[u], Lp(unit.off[k]), Lp(part * shard_)), R(dst, unit.off[k] / shard_ * 4, part * 4),
                        !first && !offload, /*widen=*/true});
  }
  if (held_input_ >= 0) op.frees.push_back(held_input_);
  held_input_ = input;
  OpId last = held_rs_op_ = em_.Emit(std::move(op));
  if (replicate_ > 1) {
    Op ar = em_.NewOp(em_.Tag() + "allreduce." + unit.name, OpKind::kAllReduce, Stream::kComm);
    ar.group = replicate_group_;
    ar.bytes = Bytes(unit.shard * reduce_);
    ar.deps = {last};
    ar.reads = {dst};
    ar.writes = {dst};
    last = em_.Emit(std::move(ar));
  }
  if (offload) {
    // new_sharded_grad.to("cpu", non_blocking=pin_memory): pinned when
    // non-blocking; a later micro step's copy adds into it.
    Op cp = em_.NewOp(em_.Tag() + "d2h.grad." + unit.name, OpKind::kCopyD2H, Stream::kD2H);
    cp.bytes = Bytes(unit.shard * 4);
    cp.deps = {last};
    if (first) {
      grad_[u] = em_.NewBuffer("fsdp.grad32.cpu." + unit.name, Tier::kCpu, StateKind::kGrad, cp.bytes);
      cp.allocs = {grad_[u]};
    }
    cp.reads = {dst};
    cp.writes = {grad_[u]};
    cp.frees = {dst};
    cp.moves = {{R(dst, 0, cp.bytes.v), R(grad_[u], 0, cp.bytes.v), !first}};
    last = em_.Emit(std::move(cp));
  }
  grad_ops_[u] = last;
}

}  // namespace strata::detail
