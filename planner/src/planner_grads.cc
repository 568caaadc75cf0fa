// The gradient pass (gradients.h): stage 3 reduce-scatters every micro step
// in reduce_bucket_size buckets and moves the reduced partition to the
// optimizer's tier; stages 0-1 reduce the replica once per iteration.
#include <algorithm>
#include <cmath>

#include "gradients.h"

namespace strata::detail {

GradientPass::GradientPass(const Scenario& s, const ReleaseProfile& release, const ModelGraph& graph, const Layout& lay,
                           Emitter& em, const OpId& last_compute, std::vector<OpId>& optim_slot_user)
    : scenario_(s),
      release_(release),
      graph_(graph),
      lay_(lay),
      em_(em),
      plan_(em.plan()),
      last_compute_(last_compute),
      optim_slot_user_(optim_slot_user),
      acc_writer_(lay.groups.size(), -1),
      acc_reader_(lay.groups.size(), -1) {}

void GradientPass::BeginMicro() {
  micro_.pending.assign(lay_.groups.size(), -1);
  micro_.last_use.assign(lay_.groups.size(), -1);
  for (int p = lay_.num_modules; p < static_cast<int>(lay_.seq.size()); ++p)
    if (lay_.seq[p].kind == Position::Kind::kBackward)
      for (int gi : graph_.modules[lay_.seq[p].module].param_groups) micro_.last_use[gi] = p;
}

void GradientPass::SwapMicroState(MicroState& st) {
  std::swap(st.pending, micro_.pending);
  std::swap(st.last_use, micro_.last_use);
}

// Called after the backward op at `pos` wrote group `gi`'s gradient. A
// group with its own gradient buffer (used twice, like the tied embedding,
// or larger than the bucket) joins the bucket at its last backward use; the
// others were placed in the IPG bucket by GradSlot (planner_flat.cc).
void GradientPass::GradientOut(int gi, int pos) {
  if (pos != micro_.last_use[gi]) return;
  if (micro_.pending[gi] >= 0) return OwnGradientOut(gi);
  // Stage 3 flushes a full bucket at once (Strata's; DeepSpeed at the next
  // gradient that would overflow it).
  if (lay_.stage == 3 && !bucket_.empty() && bucket_fill_ >= scenario_.zero.reduce_bucket_size.v) FlushBucket();
}

void GradientPass::FlushBucket() {
  if (lay_.FlatPath()) return FlushFlat();
  if (bucket_.empty()) return;
  em_.Outside(Phase::kBackward);
  const std::string name = em_.Tag() + "reduce." + graph_.param_groups[bucket_.front()].name;
  const TakenBucket taken = TakeBucket();
  const std::vector<int>& groups = taken.groups;
  const std::vector<Region>& src = taken.src;
  const std::vector<BufferId>& bufs = taken.bufs;
  Elements part;
  for (int gi : groups) part += lay_.groups[gi].part;
  // Per group: its whole gradient (padded to whole partitions, in the IPG
  // bucket or its own buffer), its shard in the bucket's reduced buffer or
  // staging, and its place in the flat partition.
  auto whole = [&](size_t k) { return src[k]; };
  auto flat = [&](size_t k) { return lay_.FlatGradRegion(groups[k]); };
  auto packed = [&](BufferId b) {  // shard k at its offset in a bucket-sized buffer
    std::vector<Region> out;
    int64_t off = 0;
    for (int gi : groups) {
      out.push_back(R(b, off, lay_.groups[gi].part.bytes(lay_.lp_bytes).v));
      off += lay_.groups[gi].part.bytes(lay_.lp_bytes).v;
    }
    return out;
  };

  OpId prev = last_compute_;
  std::vector<BufferId> reduced = bufs;
  std::vector<Region> shards;                                             // where each group's reduced shard is now
  for (size_t k = 0; k < groups.size(); ++k) shards.push_back(whole(k));  // one rank: the whole is the shard
  if (lay_.dp_size > 1) {
    int64_t plain = Elements(part.v * lay_.dp_size).bytes(lay_.lp_bytes).v;
    if (lay_.qg_local >= 0) prev = QuantizedReduction(name, groups, bufs, prev, &plain);
    Op rs = em_.NewOp(name, OpKind::kReduceScatter, Stream::kComm);
    rs.bytes = Bytes(plain);  // the whole bucket, less what qgZ reduced
    rs.group = 0;
    rs.deps = {prev};
    rs.reads = bufs;
    rs.frees = bufs;
    // The reduction's input, flattened into a transient copy of the whole:
    // current DeepSpeed's reduce_scatter_coalesced (runtime/comm/
    // coalesced_collectives.py) torch.cat's the bucket's gradients, padded
    // per rank, unless it is one tensor that divides evenly; v0.5 reduce-
    // scatters each parameter from a list of per-rank views of its gradient
    // (partition_parameters.py _reduce_scatter_gradient), which the PyTorch
    // of the paper's stack (ProcessGroupNCCL::reduce_scatter) copies into a
    // flattened buffer first, the bucket's all allocated as they launch.
    const bool flattened =
        release_.list_collectives || groups.size() > 1 || lay_.groups[groups[0]].elements.v % lay_.dp_size != 0;
    if (flattened && rs.bytes.v > 0) em_.Transient(rs, name + ".flat", StateKind::kCommBuffer, rs.bytes);
    // Its copy kernels, each read and written: the flattening copy, and
    // the pre-division, in place (current DeepSpeed: of the flattened
    // buffer; v0.5's average_tensor: of every tensor of its reduction list,
    // the whole IPG buffer and any gradient too large for it).
    int64_t divided = rs.bytes.v;
    if (release_.list_collectives) {
      const int64_t B = scenario_.zero.reduce_bucket_size.v;
      divided = Elements(B).bytes(lay_.lp_bytes).v;
      for (size_t k = 0; k < groups.size(); ++k)
        if (lay_.groups[groups[k]].elements.v > B) divided += src[k].bytes.v;
    }
    // With qgZ this op keeps the plain reduction of the rest (and the data
    // layout of every group).
    rs.copy_bytes = Bytes(2 * divided + (flattened ? 2 * rs.bytes.v : 0));
    if (lay_.optim_tier == Tier::kGpu) {
      rs.writes = {lay_.grad};
      for (size_t k = 0; k < groups.size(); ++k) rs.moves.push_back({whole(k), flat(k), /*accumulate=*/true});
      reduced.clear();
    } else {
      BufferId r = em_.NewBuffer(name + ".out", Tier::kGpu, StateKind::kCommBuffer, part.bytes(lay_.lp_bytes));
      rs.allocs.push_back(r);
      rs.writes = {r};
      shards = packed(r);
      for (size_t k = 0; k < groups.size(); ++k) rs.moves.push_back({whole(k), shards[k]});
      reduced = {r};
    }
    prev = em_.Emit(std::move(rs));
  }
  if (lay_.OffloadedGradPath()) prev = OffloadGradients(groups, shards, reduced, prev);
  FinishFlush(groups, prev);
}

// qgZ, per gradient tensor (stage3.py __avg_scatter_grads, across nodes):
// a matrix whose N elements divide by 2 x world is quantized to int4 with
// fp32 scales (swizzle_quant), exchanged by an all-to-all within the node,
// dequantized, summed and quantized again (quantized_reduction: N / L
// elements left per rank, L ranks a node), exchanged across nodes, and
// dequantized and summed over the n nodes. An all-to-all sends (k-1)/k of
// its buffer, as a ring reduce-scatter does, so each hop is a
// reduce-scatter of its int4 bytes over its group. Vectors and the rest go
// through the plain reduce-scatter. The scales: one per group of
// min(rows, columns) elements, taken as hidden_size (every matrix of a
// transformer has it as a side), sqrt(N) otherwise.
OpId GradientPass::QuantizedReduction(const std::string& name, const std::vector<int>& groups,
                                      const std::vector<BufferId>& bufs, OpId prev, int64_t* plain) {
  const int world = lay_.dp_size;
  const int L = em_.plan().groups[static_cast<size_t>(lay_.qg_local)].size();
  int64_t n = 0, scales = 0;
  for (int gi : groups) {
    const int64_t N = lay_.groups[gi].elements.v;
    if (graph_.param_groups[gi].vector || N % (2 * world) != 0) continue;
    const int64_t side = scenario_.model.kind == ModelKind::kTransformer && scenario_.model.hidden_size > 0
                             ? scenario_.model.hidden_size
                             : std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(N))));
    n += N;
    scales += 4 * std::max<int64_t>(world, N / side);
    *plain -= lay_.Padded(lay_.groups[gi]).bytes(lay_.lp_bytes).v;
  }
  if (n == 0) return prev;
  Op local = em_.NewOp(name + ".qgz_local", OpKind::kReduceScatter, Stream::kComm);
  local.group = lay_.qg_local;
  local.quant_bits = 4;
  local.bytes = Bytes(n / 2 + scales);
  local.deps = {prev};
  local.reads = bufs;
  em_.Transient(local, name + ".qgz_int4", StateKind::kCommBuffer, local.bytes);
  // swizzle_quant (reads the gradients, writes int4), then
  // quantized_reduction (reads the L chunks, writes its int4 share).
  local.copy_bytes = Bytes(n * lay_.lp_bytes + n / 2 + local.bytes.v + local.bytes.v / L);
  const OpId first = em_.Emit(std::move(local));
  Op across = em_.NewOp(name + ".qgz_global", OpKind::kReduceScatter, Stream::kComm);
  across.group = lay_.qg_global;
  across.quant_bits = 4;
  across.bytes = Bytes((n / 2 + scales) / L);
  across.deps = {first};
  em_.Transient(across, name + ".qgz_int4_node", StateKind::kCommBuffer, across.bytes);
  // dequantize to fp16 (N / L elements), then the sum over nodes (to N / world).
  across.copy_bytes = Bytes(across.bytes.v + 2 * (n / L) * 2 + 2 * (n / world));
  return em_.Emit(std::move(across));
}

// Stage 3 with offload_optimizer (stage3.py partition_grads): each micro step
// the reduced shards are copied into the CPU accumulator (added to it after
// the first micro step) and the accumulator's value goes back to the GPU,
// where DeepSpeed adds the next micro step's shards; here the add is done on
// the CPU side of the D2H instead: the same bytes over PCIe, the same bits.
// At the accumulation boundary (_offload_grad_partition_at_boundary) the GPU
// copy is widened to fp32 and sent to the optimizer: into the CPU fp32
// gradient of a non-swappable sub-group, or through the optimizer's swap
// buffers to the NVMe gradient of a swappable one (_swap_out_gradients).
// direct_fp32_gradients (DeepSpeed before v0.6.0) skips the CPU
// accumulator: the boundary's copies read the reduced shards.
OpId GradientPass::OffloadGradients(const std::vector<int>& groups, const std::vector<Region>& shards,
                                    const std::vector<BufferId>& reduced, OpId prev) {
  const std::string name = em_.Tag() + "reduce." + graph_.param_groups[groups.front()].name;
  int64_t total = 0;
  std::vector<int64_t> at;  // offset of each group in the bucket-sized GPU copy
  for (int gi : groups) {
    at.push_back(total);
    total += lay_.groups[gi].part.bytes(lay_.lp_bytes).v;
  }
  auto acc = [&](size_t k) { return lay_.FlatGradRegion(groups[k]); };
  // Where the boundary's fp32 copies read each shard, the buffers holding
  // them and the op after which they are there.
  std::vector<Region> src;
  std::vector<BufferId> src_bufs;
  OpId ready = prev;
  OpId accumulated = -1;  // the copy that leaves the final sum in the CPU accumulator
  if (lay_.direct_gradients) {
    // DeepSpeed before v0.6.0 (stage3.py partition_previous_reduced_grads):
    // the reduced shards themselves are widened and sent on.
    for (size_t k = 0; k < groups.size(); ++k)
      src.push_back(R(shards[k].buffer, shards[k].offset, lay_.groups[groups[k]].part.bytes(lay_.lp_bytes)));
    src_bufs = reduced;
  } else {
    Op cp = em_.NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
    cp.bytes = Bytes(total);
    cp.deps = {prev};
    for (int gi : groups) cp.deps.push_back(acc_reader_[gi]);
    cp.reads = reduced;
    cp.frees = reduced;
    cp.writes = {lay_.grad};
    for (size_t k = 0; k < groups.size(); ++k) cp.moves.push_back({shards[k], acc(k), /*accumulate=*/em_.micro() > 0});
    const OpId d2h = accumulated = em_.Emit(std::move(cp));
    const BufferId tmp = em_.NewBuffer(name + ".accum", Tier::kGpu, StateKind::kCommBuffer, Bytes(total));
    Op up = em_.NewOp(name + ".h2d", OpKind::kCopyH2D, Stream::kH2D);
    up.bytes = Bytes(total);
    up.deps = {d2h};
    up.allocs = {tmp};
    up.reads = {lay_.grad};
    up.writes = {tmp};
    for (size_t k = 0; k < groups.size(); ++k) up.moves.push_back({acc(k), R(tmp, at[k], acc(k).bytes.v)});
    const bool boundary = em_.micro() + 1 == plan_.micro_steps;
    if (!boundary) up.frees = {tmp};
    const OpId h2d = em_.Emit(std::move(up));
    for (int gi : groups) acc_reader_[gi] = h2d;
    if (!boundary) return h2d;
    for (size_t k = 0; k < groups.size(); ++k)
      src.push_back(R(tmp, at[k], lay_.groups[groups[k]].part.bytes(lay_.lp_bytes).v));
    src_bufs = {tmp};
    ready = h2d;
  }
  // The boundary: fp32 to the optimizer, widened on the GPU (4 bytes per
  // element over PCIe). Non-swappable sub-groups first, in one copy.
  OpId last_d2h = -1, last = -1;
  Op local = em_.NewOp(name + ".grad32", OpKind::kCopyD2H, Stream::kD2H);
  local.deps = {ready};
  local.reads = src_bufs;
  for (size_t k = 0; k < groups.size(); ++k) {
    const GroupLayout& gl = lay_.groups[groups[k]];
    const int sg = lay_.sub_group_of[groups[k]];
    if (lay_.sub_groups[sg].swappable || lay_.sub_groups[sg].tier == Tier::kGpu) continue;
    const Region dst = lay_.Grad32Region(sg, gl.flat_offset.v, gl.part.v);
    local.moves.push_back({src[k], dst, false, /*widen=*/true});
    local.bytes += Bytes(dst.bytes);
    AddOnce(local.writes, dst.buffer);
  }
  if (!local.moves.empty()) last = last_d2h = em_.Emit(std::move(local));
  // offload_optimizer.ratio: a GPU sub-group's fp32 gradient is the CPU
  // accumulator widened on the host and copied up, 4 bytes per element
  // (stage3.py _offload_grad_partition_at_boundary: fp32_grad_tensor.copy_(
  // grad_buffer.to(fp32)), its .grad on the sub-group's device). Only the
  // current release has ratio, so the accumulator is there.
  if (lay_.PartialOffload() && accumulated >= 0) {
    Op up32 = em_.NewOp(name + ".grad32.gpu", OpKind::kCopyH2D, Stream::kH2D);
    up32.deps = {accumulated};
    up32.reads = {lay_.grad};
    for (size_t k = 0; k < groups.size(); ++k) {
      const GroupLayout& gl = lay_.groups[groups[k]];
      const int sg = lay_.sub_group_of[groups[k]];
      if (lay_.sub_groups[sg].tier != Tier::kGpu) continue;
      const Region dst = lay_.Grad32Region(sg, gl.flat_offset.v, gl.part.v);
      up32.moves.push_back({acc(k), dst, false, /*widen=*/true});
      up32.bytes += Bytes(dst.bytes);
      AddOnce(up32.writes, dst.buffer);
    }
    if (!up32.moves.empty()) last = std::max(last, em_.Emit(std::move(up32)));
  }
  // Swappable ones through the swap buffers in turn, packed: each slot holds
  // a sub-group, so any group's fp32 gradient fits one.
  // policy.prefetch_optimizer_states (Strata's): the first set's state
  // buffers (0, 2, 3) are left to the early read, so gradients stage through
  // the others. DeepSpeed's gradient swapper takes every buffer
  // (optimizer_utils.py _swap_out_gradients: allocate_all).
  const bool keep_first_set = scenario_.zero.offload_optimizer.pipeline_read &&
                              scenario_.policy.prefetch_optimizer_states && lay_.optim_slots.size() > 1;
  Op stage, write;
  size_t slot = 0;
  int64_t used = 0;  // fp32 elements staged in `slot`
  auto flush = [&] {
    if (used == 0) return;
    stage.deps = {ready, optim_slot_user_[slot]};
    last_d2h = em_.Emit(std::move(stage));
    write.deps = {last_d2h};
    last = optim_slot_user_[slot] = em_.Emit(std::move(write));
    used = 0;
  };
  for (size_t k = 0; k < groups.size(); ++k) {
    const GroupLayout& gl = lay_.groups[groups[k]];
    const int sg = lay_.sub_group_of[groups[k]];
    if (!lay_.sub_groups[sg].swappable) continue;
    if (used + gl.part.v > lay_.optim_slot_elems) flush();
    if (used == 0) {
      do slot = grad_slot_next_++ % lay_.optim_slots.size();
      while (keep_first_set && (slot == 0 || slot == 2 || slot == 3));
      const std::string tag = name + ".grad32." + std::to_string(slot);
      stage = em_.NewOp(tag + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
      stage.reads = src_bufs;
      stage.writes = {lay_.optim_slots[slot]};
      write = em_.NewOp(tag + ".nvme_write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
      write.reads = {lay_.optim_slots[slot]};
    }
    const Region dst = lay_.Grad32Region(sg, gl.flat_offset.v, gl.part.v);
    const Region staged = R(lay_.optim_slots[slot], used * 4, dst.bytes.v);
    stage.moves.push_back({src[k], staged, false, /*widen=*/true});
    stage.bytes += dst.bytes;
    write.writes = {dst.buffer};
    write.moves.push_back({staged, dst});
    write.bytes += Bytes(dst.bytes);
    used += gl.part.v;
  }
  flush();
  // The last user on the FIFO D2H stream frees the GPU copy; with every
  // group's sub-group on the GPU, none reads it: its own copy frees it.
  for (BufferId b : src_bufs) AddOnce(plan_.ops[last_d2h >= 0 ? last_d2h : ready].frees, b);
  return last;
}

// Stages 0-1 reduce the replica once per iteration: stage 0 as the engine's
// fallback all-reduce; stage 1 goes through the IPG bucket as
// stage_1_and_2.py reduce_gradients does (planner_flat.cc).
void GradientPass::ReduceReplica() {
  if (lay_.stage > 1) return;
  em_.Outside(Phase::kBackward);
  if (lay_.stage == 1) {
    // stage_1_and_2.py reduce_gradients: at the boundary, groups in order
    // through the IPG bucket (planner_flat.cc); one rank without offload
    // reduces nothing.
    if (lay_.dp_size == 1 && lay_.optim_tier == Tier::kGpu) return;
    const int64_t B = scenario_.zero.reduce_bucket_size.v;
    std::vector<int> bucket;
    std::vector<Region> src;
    int64_t fill = 0, index = 0;
    // A bucket's buffer is reused once its reduction is done: the previous
    // flush's (one buffer), or the one before (two with overlap_comm).
    OpId user[2] = {last_compute_, last_compute_};
    auto flush = [&] {
      if (bucket.empty()) return;
      const BufferId buf =
          em_.NewBuffer(em_.Tag() + "grad.ipg_bucket." + std::to_string(index), Tier::kGpu, StateKind::kCommBuffer,
                        scenario_.zero.reduce_bucket_size.bytes(lay_.lp_bytes));
      const int slot = scenario_.zero.overlap_comm ? static_cast<int>(index % 2) : 0;
      user[slot] = ReduceOwned(bucket, src, buf, {}, user[slot], em_.Tag() + "reduce.replica." + std::to_string(index));
      ++index;
      bucket.clear();
      src.clear();
      fill = 0;
    };
    for (size_t gi = 0; gi < lay_.groups.size(); ++gi) {
      const GroupLayout& gl = lay_.groups[gi];
      if (!bucket.empty() && fill + gl.elements.v > B) flush();
      bucket.push_back(static_cast<int>(gi));
      src.push_back(R(lay_.grad, gl.home_offset, gl.elements.bytes(lay_.lp_bytes)));
      fill += gl.elements.v;
    }
    flush();
    return;
  }
  // Stage 0: engine.py allreduce_gradients -> buffered_allreduce_fallback ->
  // allreduce_no_retain with numel_per_bucket = MEMORY_OPT_ALLREDUCE_SIZE
  // (5e8, not reduce_bucket_size): parameters in order, a bucket closed once
  // its elements exceed that (so it may go past it); allreduce_and_copy
  // flattens the bucket into a transient copy, all-reduces it and copies the
  // result back. One rank: the replica is the gradient.
  if (lay_.dp_size == 1) return;
  constexpr int64_t kMemoryOptAllreduceSize = 500000000;
  std::vector<int> bucket;
  int64_t bucket_elems = 0, index = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    const std::string name = em_.Tag() + "reduce.replica." + std::to_string(index++);
    Op op = em_.NewOp(name, OpKind::kAllReduce, Stream::kComm);
    op.group = 0;
    op.deps = {last_compute_};
    op.reads = {lay_.grad};
    op.writes = {lay_.grad};
    for (int gi : bucket) {
      const GroupLayout& gl = lay_.groups[gi];
      const Region whole = R(lay_.grad, gl.home_offset, lay_.Padded(gl).bytes(lay_.lp_bytes));
      op.bytes += Bytes(whole.bytes);
      op.moves.push_back({whole, whole});
    }
    op.writes.push_back(em_.Transient(op, name + ".flat", StateKind::kCommBuffer, op.bytes));
    // Its copy kernels, each read and written: allreduce_bucket's flatten
    // and mul_ by 1 / world size, allreduce_and_copy's copy back; of one
    // tensor the flatten is a view and the copy back copies nothing.
    op.copy_bytes = Bytes((bucket.size() == 1 ? 2 : 6) * op.bytes.v);
    em_.Emit(std::move(op));
    bucket.clear();
    bucket_elems = 0;
  };
  for (size_t gi = 0; gi < lay_.groups.size(); ++gi) {
    bucket.push_back(static_cast<int>(gi));
    bucket_elems += lay_.Padded(lay_.groups[gi]).v;
    if (bucket_elems > kMemoryOptAllreduceSize) flush();
  }
  flush();
}

// A gradient partition that is not resident (stage 3 on the GPU under
// the release's scoped_gpu_gradient_partition) lives from the first op that writes it (the
// first reduce-scatter of the first micro step, or the first backward on one
// rank; DeepSpeed's partition_previous_reduced_grads allocates
// grads_in_partition one bucket later) to the last that touches it (the last
// sub-group's step). DeepSpeed drops each sub-group's part at that
// sub-group's step (_prepare_fp32_grad_for_sub_group): keeping the whole
// until the last one gives a step peak of at least DeepSpeed's, the same
// when the largest sub-group steps first.
void ScopeGradientPartition(const Layout& lay, Plan& plan) {
  if (lay.grad < 0 || plan.buffers[lay.grad].resident) return;
  auto touches = [&](const std::vector<BufferId>& v) { return std::find(v.begin(), v.end(), lay.grad) != v.end(); };
  int first = -1, last = -1;
  for (const Op& op : plan.ops) {
    const bool w = touches(op.writes);
    if (first < 0 && w) first = op.id;
    if (w || touches(op.reads)) last = op.id;
  }
  if (first < 0) return;
  plan.ops[first].allocs.push_back(lay.grad);
  plan.ops[last].frees.push_back(lay.grad);
}

}  // namespace strata::detail
