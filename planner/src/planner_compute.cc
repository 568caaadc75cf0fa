// Planner: compute ops of forward and backward, with their activation and
// gradient buffers, and the CPU checkpoints' copies out and back.
#include "plan_builder.h"

namespace strata::detail {

OpId PlanBuilder::Compute(int pos, const std::vector<char>& release) {
  const int mi = ModuleAt(pos);
  const ModuleSpec& m = graph_.modules[mi];
  const bool bwd = Backward(pos), rec = Recompute(pos);
  const int l = m.layer;
  const bool ckpt = scenario_.training.activation_checkpointing && l >= 0;
  const CkptCopy copy = ckpt ? CheckpointCopy() : CkptCopy::kNone;
  const bool cpu_ckpt = copy != CkptCopy::kNone;
  em_.SetPhase(bwd || rec ? Phase::kBackward : Phase::kForward);
  em_.SetModule(mi);

  // The recompute starts from the layer's checkpoint: back on the GPU first.
  if (rec && cpu_ckpt && mi == lay_.layer_first[l]) CheckpointToGpu(l, last_compute_);

  TpCollectives(m, bwd, /*before=*/true, rec);
  Op op = em_.NewComputeOp(mi, bwd, rec);
  op.deps = fetch_ops_[pos];
  op.deps.push_back(grads_->TakeBlock());
  for (size_t k = 0; k < m.param_groups.size(); ++k) {
    const int gi = m.param_groups[k];
    const GroupLayout& gl = lay_.groups[gi];
    const BufferId params = gl.fetched ? held_[gi] : gl.home_buffer;
    AddOnce(op.reads, params);
    Region r = gl.fetched ? R(params, 0, gl.elements.bytes(lay_.lp_bytes).v) : lay_.HomeRegion(gi);
    r.bytes = gl.elements.bytes(lay_.lp_bytes);
    op.params.push_back(r);
    if (gl.fetched && release[k]) {
      ReleaseGathered(pos, gi, params, op);
      held_[gi] = -1;
    }
  }

  if (rec) {
    // The layer's forward again, from its checkpoint (the first module reads
    // it), rebuilding the working activations its backward needs.
    op.flops = m.fwd_flops;
    act_[mi] = em_.NewBuffer(em_.Tag() + "act.recompute." + m.name, Tier::kGpu, StateKind::kActivation, m.act_bytes);
    op.allocs.push_back(act_[mi]);
    op.writes.push_back(act_[mi]);
    if (mi == lay_.layer_first[l]) {
      if (cpu_ckpt) op.deps.push_back(ckpt_h2d_[l]);
      op.reads.push_back(ckpt_gpu_[l]);
    }
  } else if (!bwd) {
    op.flops = m.fwd_flops;
    act_[mi] = em_.NewBuffer(em_.Tag() + "act." + m.name, Tier::kGpu, StateKind::kActivation, m.act_bytes);
    op.allocs.push_back(act_[mi]);
    op.writes.push_back(act_[mi]);
    if (ckpt && mi == lay_.layer_first[l]) {
      ckpt_gpu_[l] = em_.NewBuffer(em_.Tag() + "ckpt." + LayerName(l), Tier::kGpu, StateKind::kActivation,
                                   graph_.checkpoint_bytes[l]);
      op.allocs.push_back(ckpt_gpu_[l]);
      op.writes.push_back(ckpt_gpu_[l]);
    }
    if (ckpt && mi == lay_.layer_last[l]) {
      // Checkpointing keeps only the layer input: the layer's working
      // activations go when its forward ends.
      for (int k = lay_.layer_first[l]; k <= lay_.layer_last[l]; ++k) {
        op.frees.push_back(act_[k]);
        act_[k] = -1;
      }
    }
  } else {
    op.flops = 2 * m.fwd_flops;  // a checkpointed layer's recompute is its own ops
    if (act_[mi] >= 0) {
      op.reads.push_back(act_[mi]);
      op.frees.push_back(act_[mi]);
      act_[mi] = -1;
    }
    if (ckpt && mi == lay_.layer_first[l]) {
      op.frees.push_back(ckpt_gpu_[l]);
      ckpt_gpu_[l] = -1;
    }
    for (int gi : m.param_groups) {
      const bool direct = lay_.stage <= 1 || (lay_.optim_tier == Tier::kGpu && lay_.dp_size == 1);
      const int64_t gbytes = lay_.groups[gi].elements.bytes(lay_.lp_bytes).v;
      if (direct) {
        AddOnce(op.writes, lay_.grad);
        // Stages 0-1: the replica, laid out like the parameters; stages 2-3
        // on one rank: the flat partition (a group's partition is all of it).
        op.grads.push_back(lay_.stage <= 1 ? R(lay_.grad, lay_.groups[gi].home_offset.v, gbytes)
                                           : R(lay_.grad, lay_.groups[gi].flat_offset.bytes(lay_.lp_bytes).v, gbytes));
      } else {
        op.grads.push_back(grads_->GradSlot(gi, pos, op));
      }
    }
  }
  const OpId id = em_.Emit(std::move(op));
  compute_op_[pos] = last_compute_ = id;
  TpCollectives(m, bwd, /*before=*/false);

  if (!bwd && !rec && cpu_ckpt && mi == lay_.layer_last[l]) {
    // DeepSpeed's engine keeps the newest checkpoint on the GPU: layer l - 1's
    // leaves once layer l's forward has run; the last layer's never does.
    if (copy != CkptCopy::kEngine)
      CheckpointToCpu(l, id);
    else if (l > 0)
      CheckpointToCpu(l - 1, id);
  }
  if (rec && copy == CkptCopy::kPrefetch && mi == lay_.layer_first[l] && l > 0)
    CheckpointToGpu(l - 1, id);  // one layer ahead
  if (bwd)
    for (int gi : m.param_groups) grads_->GradientOut(gi, pos);
  return id;
}

void PlanBuilder::TpCollectives(const ModuleSpec& m, bool bwd, bool before, bool recompute) {
  if (lay_.tp_group < 0) return;
  std::vector<TpComm> comms = bwd ? m.tp_bwd : m.tp_fwd;
  if (recompute) comms.insert(comms.begin(), m.tp_recompute.begin(), m.tp_recompute.end());
  for (const TpComm& c : comms) {
    if (c.before != before) continue;
    const OpKind kind = c.kind == TpCommKind::kAllReduce   ? OpKind::kAllReduce
                        : c.kind == TpCommKind::kAllGather ? OpKind::kAllGather
                                                           : OpKind::kReduceScatter;
    Op op = em_.NewOp(em_.Tag() + "tp." + std::string(OpKindName(kind)) + "." + m.name, kind, Stream::kCompute);
    op.bytes = c.bytes;
    op.group = lay_.tp_group;
    op.operand =
        bwd ? (before ? Operand::kOutputGrad : Operand::kInputGrad) : (before ? Operand::kInput : Operand::kOutput);
    em_.Emit(std::move(op));
  }
}

// Copies a CPU-held checkpoint back to the GPU ahead of the layer's backward.
void PlanBuilder::CheckpointToGpu(int layer, OpId dep) {
  if (layer < 0 || ckpt_cpu_[layer] < 0 || ckpt_h2d_[layer] >= 0) return;
  const Bytes b = graph_.checkpoint_bytes[layer];
  ckpt_gpu_[layer] = em_.NewBuffer(em_.Tag() + "ckpt." + LayerName(layer), Tier::kGpu, StateKind::kActivation, b);
  // DeepSpeed's blocking path copies on the compute stream
  // (gather_partitioned_activations' copy_); its engine and Strata's
  // prefetch on a side stream.
  Op cp = em_.NewOp(em_.Tag() + "ckpt_h2d." + LayerName(layer), OpKind::kCopyH2D,
                    CheckpointCopy() == CkptCopy::kBlocking ? Stream::kCompute : Stream::kH2D);
  cp.layer = layer;
  cp.bytes = b;
  cp.deps = {dep, ckpt_d2h_[layer]};  // the checkpoint must have reached the CPU
  cp.allocs = {ckpt_gpu_[layer]};
  cp.reads = {ckpt_cpu_[layer]};
  cp.writes = {ckpt_gpu_[layer]};
  cp.moves = {{R(ckpt_cpu_[layer], 0, b.v), R(ckpt_gpu_[layer], 0, b.v)}};
  cp.frees = {ckpt_cpu_[layer]};
  ckpt_h2d_[layer] = em_.Emit(std::move(cp));
}

// Layer `layer`'s checkpoint to its CPU buffer after op `dep`; the GPU copy
// goes when it lands.
void PlanBuilder::CheckpointToCpu(int layer, OpId dep) {
  ckpt_cpu_[layer] = em_.NewBuffer(em_.Tag() + "ckpt_cpu." + LayerName(layer), Tier::kCpu, StateKind::kActivation,
                                   graph_.checkpoint_bytes[layer]);
  // The blocking path's copy_ into pageable memory holds the compute stream.
  Op cp = em_.NewOp(em_.Tag() + "ckpt_d2h." + LayerName(layer), OpKind::kCopyD2H,
                    CheckpointCopy() == CkptCopy::kBlocking ? Stream::kCompute : Stream::kD2H);
  cp.layer = layer;
  cp.bytes = graph_.checkpoint_bytes[layer];
  cp.deps = {dep};
  cp.allocs = {ckpt_cpu_[layer]};
  cp.reads = {ckpt_gpu_[layer]};
  cp.writes = {ckpt_cpu_[layer]};
  cp.moves = {{R(ckpt_gpu_[layer], 0, cp.bytes.v), R(ckpt_cpu_[layer], 0, cp.bytes.v)}};
  cp.frees = {ckpt_gpu_[layer]};
  ckpt_gpu_[layer] = -1;
  ckpt_d2h_[layer] = em_.Emit(std::move(cp));
}

}  // namespace strata::detail
