// Planner: ZeRO stages 1-2 as DeepSpeed's stage_1_and_2.py runs them.
//
// Layout (DeepSpeedZeroOptimizer.__init__): every group whole, in order, in
// one flat low-precision buffer padded to a multiple of 2 x world size
// (nccl_start_alignment_factor); rank r owns flat elements [r S, (r+1) S).
// Partitions cut groups: a group's gradient is reduced for each rank owning
// part of it.
//
// Gradients (reduce_independent_p_g_buckets_and_remove_grads,
// reduce_ipg_grads, average_tensor): stage 2 after each backward, stage 1 at
// the accumulation boundary (reduce_gradients, in group order), groups are
// bucketed by reduce_bucket_size; a bucket is flushed when the next group
// would overflow it. The bucket is all-reduced (use_multi_rank_bucket_
// allreduce: one all_reduce of a flattened copy, no reduce-scatter) and
// each rank keeps the slices it owns: without offload copied into its
// gradient partition (copy_grads_in_partition, a GPU buffer of the full
// numel of every group overlapping the partition); with offload_optimizer
// cpu, at the boundary each owner widens its slices to fp32 on the GPU and
// copies them to the CPU fp32 gradient partition (async_inplace_copy_grad_
// to_fp32_buffer_from_gpu: 4 bytes per owned element, on that rank's PCIe
// link only), and stage 2 with several micro steps keeps a low-precision
// CPU accumulator (async_accumulate_grad_in_cpu_via_gpu: a D2H every micro
// step, an H2D and a GPU add before it after the first).
//
// Step (step): Adam on the rank's partition (on the GPU from an fp32 copy
// of the gradient partition, or on the CPU); the new low-precision
// partition goes into its slice of the flat buffer (with offload through
// the pinned CPU copy bit16_partition_buffer and an H2D), then
// all_gather_dp_groups gathers the whole flat buffer (one
// all_gather_into_tensor; allgather_bucket_size does not apply).
#include <algorithm>
#include <cstdint>

#include "gradients.h"
#include "step.h"

namespace strata::detail {

// DeepSpeed copies each gradient into its IPG bucket, a reduce_bucket_size
// buffer (contiguous_gradients; stage_1_and_2.py setup_buckets, stage3.py
// __init__), and reduces the bucket once the next gradient would overflow
// it. Each bucket here is a fresh buffer of that size, allocated by the
// first backward that writes it and freed by its reduction; with
// overlap_comm two may coexist. A gradient's slot is its group padded to a
// multiple of the ranks, which the backward stores whole, the padding as
// zeros (DeepSpeed pads each gradient partition with zeros:
// stage3.py __avg_scatter_contiguous_grads, reduce_scatter_coalesced), so
// the bucket itself needs no clearing (plan.h Buffer::cleared).
Region GradientPass::GradSlot(int gi, int pos, Op& op) {
  const ZeroConfig& z = scenario_.zero;
  const int64_t e = lay_.GradSize(gi), B = z.reduce_bucket_size.v;
  const Bytes gbytes = Elements(e).bytes(lay_.lp_bytes);  // the padded slot
  // A group used twice (the tied embedding) or larger than the bucket keeps
  // its own gradient (param.grad; DeepSpeed's extra_large_param_to_reduce).
  // So does one that would overflow a bucket this op already writes into:
  // that bucket can only be reduced after the op, so the group joins the
  // next one then (OwnGradientOut), as DeepSpeed's hook copies param.grad
  // in once the bucket before it is reduced.
  const bool op_fills_bucket =
      bucket_buf_ >= 0 && std::find(op.writes.begin(), op.writes.end(), bucket_buf_) != op.writes.end();
  const bool overflows = !bucket_.empty() && bucket_fill_ + e > B;
  if (e > B || pos != micro_.last_use[gi] || micro_.pending[gi] >= 0 || (overflows && op_fills_bucket)) {
    if (micro_.pending[gi] < 0) {
      micro_.pending[gi] = em_.NewBuffer(em_.Tag() + "grad." + graph_.param_groups[gi].name, Tier::kGpu,
                                         StateKind::kCommBuffer, Elements(e).bytes(lay_.lp_bytes));
      op.allocs.push_back(micro_.pending[gi]);
    }
    op.writes.push_back(micro_.pending[gi]);
    return R(micro_.pending[gi], Bytes(0), gbytes);
  }
  if (overflows) {
    FlushBucket();
    op.deps.push_back(block_);  // without overlap_comm the reduction is in line
    block_ = -1;
  }
  if (bucket_buf_ < 0) {
    bucket_buf_ = em_.NewBuffer(em_.Tag() + "grad.ipg_bucket." + std::to_string(bucket_index_), Tier::kGpu,
                                StateKind::kCommBuffer, z.reduce_bucket_size.bytes(lay_.lp_bytes));
    op.allocs.push_back(bucket_buf_);
    op.deps.push_back(bucket_user_[bucket_index_ % 2]);  // overlap_comm: the other buffer's last reduction
  }
  op.writes.push_back(bucket_buf_);
  bucket_.push_back(gi);
  bucket_src_.push_back(R(bucket_buf_, Elements(bucket_fill_).bytes(lay_.lp_bytes), Elements(e).bytes(lay_.lp_bytes)));
  bucket_fill_ += e;
  return R(bucket_buf_, Elements(bucket_fill_ - e).bytes(lay_.lp_bytes), gbytes);
}

// After the last backward use of a group with its own gradient: it joins
// the bucket now (flushed first if it would overflow; a group larger than
// the bucket is reduced alone).
void GradientPass::OwnGradientOut(int gi) {
  const int64_t e = lay_.GradSize(gi), B = scenario_.zero.reduce_bucket_size.v;
  if (!bucket_.empty() && bucket_fill_ + e > B) FlushBucket();
  bucket_.push_back(gi);
  bucket_src_.push_back(R(micro_.pending[gi], Bytes(0), Elements(e).bytes(lay_.lp_bytes)));
  bucket_pending_.push_back(micro_.pending[gi]);
  bucket_fill_ += e;
  if (e > B) FlushBucket();
}

void GradientPass::FlushFlat() {
  if (bucket_.empty()) return;
  em_.Outside(Phase::kBackward);
  const std::string name = em_.Tag() + "reduce." + graph_.param_groups[bucket_.front()].name;
  TakenBucket b = TakeBucket();
  FinishFlush(b.groups, ReduceOwned(b.groups, b.src, -1, std::move(b.bufs), last_compute_, name));
}

GradientPass::TakenBucket GradientPass::TakeBucket() {
  TakenBucket b{std::move(bucket_), std::move(bucket_src_), std::move(bucket_pending_)};
  if (bucket_buf_ >= 0) b.bufs.push_back(bucket_buf_);
  bucket_.clear();
  bucket_src_.clear();
  bucket_pending_.clear();
  bucket_buf_ = -1;
  bucket_fill_ = 0;
  return b;
}

void GradientPass::FinishFlush(const std::vector<int>& groups, OpId last) {
  for (int gi : groups) micro_.pending[gi] = -1;
  bucket_user_[bucket_index_ % 2] = last;
  ++bucket_index_;
  if (!scenario_.zero.overlap_comm && last != last_compute_) block_ = last;
}

OpId GradientPass::ReduceOwned(const std::vector<int>& groups, const std::vector<Region>& src, BufferId bucket,
                               std::vector<BufferId> frees, OpId prev, const std::string& name) {
  const bool offload = lay_.optim_tier != Tier::kGpu;
  const int64_t S = lay_.flat_total.v;
  // Flat elements [lo, hi) of group k's gradient, where the bucket holds it.
  auto piece = [&](size_t k, int64_t lo, int64_t hi) {
    return R(src[k].buffer, src[k].offset.v + (lo - lay_.groups[groups[k]].flat_offset.v) * lay_.lp_bytes,
             (hi - lo) * lay_.lp_bytes);
  };
  // The same elements in rank q's partition buffer `b` (bpe bytes each).
  auto owned = [&](BufferId b, int q, int64_t lo, int64_t hi, int64_t bpe) {
    return R(b, (lo - q * S) * bpe, (hi - lo) * bpe);
  };
  // Calls f(k, q, r, lo, hi) for every slice of the bucket rank q owns; r
  // is q, or -1 on one rank (moves name their rank only among several).
  auto slices = [&](auto&& f) {
    for (size_t k = 0; k < groups.size(); ++k) {
      const GroupLayout& gl = lay_.groups[groups[k]];
      lay_.ForOwners(gl.flat_offset.v, (gl.flat_offset + gl.elements).v,
                     [&](int q, int64_t lo, int64_t hi) { f(k, q, lay_.dp_size > 1 ? q : -1, lo, hi); });
    }
  };
  // Op bytes with moves per rank: the mean over the ranks (plan.h).
  auto mean_bytes = [&](const Op& op) {
    int64_t b = 0;
    for (const Move& m : op.moves) b += m.dst.bytes.v;
    return Bytes(CeilDiv(b, lay_.dp_size > 1 ? int64_t{lay_.dp_size} : int64_t{1}));
  };
  std::vector<Op> ops;
  size_t accum_down = SIZE_MAX;  // index in ops of the copy into the CPU accumulator
  if (lay_.dp_size > 1) {
    Op ar = em_.NewOp(name, OpKind::kAllReduce, Stream::kComm);
    ar.group = 0;
    ar.deps = {prev};
    int64_t elems = 0;
    for (int gi : groups) elems += lay_.groups[gi].elements.v;
    ar.bytes = Elements(elems).bytes(lay_.lp_bytes);
    // allreduce_bucket all-reduces a flattened copy of the bucket.
    em_.Transient(ar, name + ".flat", StateKind::kCommBuffer, ar.bytes);
    for (const Region& r : src) AddOnce(ar.reads, r.buffer);
    slices([&](size_t k, int q, int r, int64_t lo, int64_t hi) {
      const Region from = piece(k, lo, hi);
      const Region to = offload ? from : owned(lay_.grad_part, q, lo, hi, lay_.lp_bytes);
      ar.moves.push_back({from, to, /*accumulate=*/!offload, false, r});
      AddOnce(ar.writes, to.buffer);
    });
    // Its copy kernels, each read and written: average_tensor's div_ of the
    // bucket, the flattening copy, and the copy back of the slices this
    // rank owns (allreduce_and_copy_with_multiple_ranks). average_tensor
    // merges consecutive slices of one owner (the moves, in its order): a
    // bucket that is one slice is flattened as a view and copied back onto
    // itself, nothing moved.
    int runs = 0;
    for (size_t i = 0; i < ar.moves.size(); ++i) runs += i == 0 || ar.moves[i].rank != ar.moves[i - 1].rank;
    ar.copy_bytes = Bytes(2 * ar.bytes.v + (runs > 1 ? 2 * ar.bytes.v + 2 * mean_bytes(ar).v : 0));
    ops.push_back(std::move(ar));
  }
  if (offload) {
    const bool boundary = em_.micro() + 1 == plan_.micro_steps;
    if (lay_.grad_accum >= 0 && lay_.stage == 2) {
      // The CPU accumulator: restored and added on the GPU after the first
      // micro step, then the sum copied back down.
      if (em_.micro() > 0) {
        Op up = em_.NewOp(name + ".accum_h2d", OpKind::kCopyH2D, Stream::kH2D);
        up.reads = {lay_.grad_accum};
        for (int gi : groups) up.deps.push_back(acc_writer_[gi]);
        slices([&](size_t k, int q, int r, int64_t lo, int64_t hi) {
          const Region to = piece(k, lo, hi);
          up.moves.push_back({owned(lay_.grad_accum, q, lo, hi, lay_.lp_bytes), to, /*accumulate=*/true, false, r});
          AddOnce(up.writes, to.buffer);
        });
        up.bytes = mean_bytes(up);
        // async_accumulate_grad_in_cpu_via_gpu copies the sum into a GPU
        // buffer and add_s it to the gradient on the same stream: a kernel
        // that reads both and writes the gradient.
        up.copy_bytes = Bytes(3 * up.bytes.v);
        ops.push_back(std::move(up));
      }
      Op down = em_.NewOp(name + ".accum_d2h", OpKind::kCopyD2H, Stream::kD2H);
      down.writes = {lay_.grad_accum};
      slices([&](size_t k, int q, int r, int64_t lo, int64_t hi) {
        const Region from = piece(k, lo, hi);
        down.moves.push_back({from, owned(lay_.grad_accum, q, lo, hi, lay_.lp_bytes), false, false, r});
        AddOnce(down.reads, from.buffer);
      });
      down.bytes = mean_bytes(down);
      accum_down = ops.size();
      ops.push_back(std::move(down));
    }
    if (boundary) {
      const BufferId g32 = lay_.grad32[static_cast<int>(Tier::kCpu)];
      Op cp = em_.NewOp(name + ".grad32", OpKind::kCopyD2H, Stream::kD2H);
      cp.writes = {g32};
      slices([&](size_t k, int q, int r, int64_t lo, int64_t hi) {
        const Region from = piece(k, lo, hi);
        cp.moves.push_back({from, owned(g32, q, lo, hi, 4), false, /*widen=*/true, r});
        AddOnce(cp.reads, from.buffer);
      });
      cp.bytes = mean_bytes(cp);
      ops.push_back(std::move(cp));
    }
  }
  if (ops.empty()) return prev;
  if (bucket >= 0) {
    ops.front().allocs.push_back(bucket);
    frees.push_back(bucket);
  }
  for (BufferId b : frees) ops.back().frees.push_back(b);
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].deps.push_back(prev);
    prev = em_.Emit(std::move(ops[i]));
    if (i == accum_down)
      for (int gi : groups) acc_writer_[gi] = prev;
  }
  return prev;
}

void StepPass::StepFlat() {
  em_.Outside(Phase::kStep);
  Op st = FlatStepOp();
  st.deps = {em_.LastOn(Stream::kCompute), em_.LastOn(Stream::kComm), em_.LastOn(Stream::kD2H)};
  const OpId id = em_.Emit(std::move(st));
  FlatParamsOut(id, {id});
}

// Delayed parameter update (policy.delayed_update; docs/dpu.md): the step
// is the plan's first op and waits for nothing of the iteration: it
// applies the previous iteration's gradients, from a second fp32 gradient
// partition (grad32.pending), while this one's forward and backward run on
// the parameters from before it and copy their gradients into the first;
// an executor swaps the two after each step (RunSpec::delayed_grads). The
// paper's DPU overlaps the step with the whole forward and backward, which
// needs the second buffer; the delay_param_update prototype (jren73/
// DeepSpeed e4bd86a, stage2.py step_with_param_delay, called by engine.py
// forward) keeps one and steps before the backward's hooks overwrite it.
OpId StepPass::DelayedStep() {
  em_.Outside(Phase::kStep);
  const int cpu = static_cast<int>(Tier::kCpu);
  const Buffer& incoming = plan_.buffers[lay_.grad32[cpu]];
  const BufferId pending = em_.NewBuffer("grad32.pending", Tier::kCpu, StateKind::kGrad, incoming.bytes, true);
  plan_.run.delayed_grads = lay_.grad32[cpu];
  Op st = FlatStepOp();
  std::replace(st.reads.begin(), st.reads.end(), st.grad_in.buffer, pending);
  st.grad_in.buffer = pending;
  const OpId id = em_.Emit(std::move(st));
  em_.Outside(Phase::kForward);
  return id;
}

// The delayed step's parameters reach the GPU once the backward no longer
// reads the old ones: the same copy and allgather as an ordinary step's,
// after the last compute, reduction and gradient copy (so that the
// iteration ends with every stream done, where the swap happens).
void StepPass::DelayedParamsOut(OpId step) {
  em_.Outside(Phase::kStep);
  FlatParamsOut(step, {step, em_.LastOn(Stream::kCompute), em_.LastOn(Stream::kComm), em_.LastOn(Stream::kD2H)});
}

// The flat partition's one optimizer op, without dependencies.
Op StepPass::FlatStepOp() {
  const bool offload = lay_.optim_tier != Tier::kGpu;
  const int64_t S = lay_.flat_total.v;
  const Bytes part = Elements(S).bytes(lay_.lp_bytes);
  Op st = em_.NewOp("step.sub_group0", OpKind::kOptimizerStep, offload ? Stream::kCpuOptim : Stream::kCompute);
  st.flops = kAdamFlopsPerElement * static_cast<double>(S);
  st.bytes = Elements(S).bytes(kAdamBytesPerElement + lay_.lp_bytes);
  st.elements = Elements(S);
  const int t = static_cast<int>(lay_.optim_tier);
  st.reads = {lay_.master[t], lay_.moments[t]};
  st.writes = {lay_.master[t], lay_.moments[t]};
  st.master = lay_.MasterRegion(0);
  st.exp_avg = lay_.ExpAvgRegion(0);
  st.exp_avg_sq = lay_.ExpAvgSqRegion(0);
  if (offload) {
    st.grad_in = lay_.Grad32Region(0, 0, S);
  } else {
    st.grad_in = R(lay_.step_grads, Bytes(0), part);
    // step(): the gradient partition is flattened and cast to fp32 on the
    // GPU for the optimizer, and dropped after it.
    em_.StepTransient(st, "step.grad32", Elements(S).bytes(4));
  }
  st.reads.push_back(st.grad_in.buffer);
  if (offload) {
    st.moves = {{R(kOpOutput, Bytes(0), part), R(lay_.param_lp_cpu, Bytes(0), part)}};
    st.writes.push_back(lay_.param_lp_cpu);
  } else {
    ToReplica(st, R(kOpOutput, Bytes(0), part));
  }
  return st;
}

// Every rank's copy of `from` (its partition) into its slice of the replica.
void StepPass::ToReplica(Op& op, Region from) const {
  const int ranks = lay_.dp_size > 1 ? lay_.dp_size : 1;
  const Bytes part = from.bytes;
  for (int q = 0; q < ranks; ++q)
    op.moves.push_back({from, R(lay_.param_replica, Bytes(part.v * q), part), false, false, lay_.dp_size > 1 ? q : -1});
  op.writes.push_back(lay_.param_replica);
}

// The new partition to the GPU replica (with offload, an H2D from the
// pinned bit16 partition after `deps`), then all_gather_dp_groups.
void StepPass::FlatParamsOut(OpId step, std::vector<OpId> deps) {
  const bool offload = lay_.optim_tier != Tier::kGpu;
  const Bytes part = Elements(lay_.flat_total.v).bytes(lay_.lp_bytes);
  OpId prev = step;
  if (offload) {
    Op up = em_.NewOp("step.sub_group0.param_out.gpu", OpKind::kCopyH2D, Stream::kH2D);
    up.bytes = part;
    up.deps = std::move(deps);
    up.reads = {lay_.param_lp_cpu};
    ToReplica(up, R(lay_.param_lp_cpu, Bytes(0), part));
    prev = em_.Emit(std::move(up));
  }
  if (lay_.dp_size == 1) return;
  Op ag = em_.NewOp("step.allgather", OpKind::kAllGather, Stream::kComm);
  ag.group = 0;
  ag.deps = {prev};
  ag.bytes = Elements(lay_.flat_padded).bytes(lay_.lp_bytes);
  ag.reads = {lay_.param_replica};
  ag.writes = {lay_.param_replica};
  for (int q = 0; q < lay_.dp_size; ++q)
    ag.moves.push_back(
        {R(lay_.param_replica, Bytes(part.v * q), part), R(lay_.param_replica, Bytes(0), ag.bytes), false, false, q});
  em_.Emit(std::move(ag));
}

}  // namespace strata::detail
