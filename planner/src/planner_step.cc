// The step pass (step.h): the optimizer step, one op per sub-group of the
// rank's flat partition (layout.h), its NVMe swaps, and the return of
// updated low-precision parameters to wherever they live.
#include <algorithm>
#include <map>

#include "step.h"

namespace strata::detail {

StepPass::StepPass(const Scenario& s, const ReleaseProfile& release, const Layout& lay, Emitter& em,
                   std::vector<OpId>& optim_slot_user)
    : scenario_(s), release_(release), lay_(lay), em_(em), plan_(em.plan()), optim_slot_user_(optim_slot_user) {}

// DeepSpeed's step (stage3.py step -> _prepare_sub_group, _optimizer_step,
// _reassign_or_swap_out_partitioned_parameters, _release_sub_group) runs the
// sub-groups in order on the host thread, each call synchronous except the
// swaps the pipelined swapper leaves in flight: with pipeline_read the next
// swappable sub-group's read is issued once this one's is in (exactly one
// ahead); with pipeline_write this one's write is waited for at the next
// sub-group's swap-out (exactly one behind; the last is synchronous).
// `host` holds what the host thread has waited for so far: every op it
// issues depends on it.
void StepPass::Run() {
  if (lay_.FlatPath()) return StepFlat();
  const ZeroConfig& z = scenario_.zero;
  const auto& oo = z.offload_optimizer;
  em_.Outside(Phase::kStep);
  // The step waits for every gradient-producing stream.
  std::vector<OpId> host = {em_.LastOn(Stream::kCompute), em_.LastOn(Stream::kComm), em_.LastOn(Stream::kD2H),
                            em_.LastOn(Stream::kNvmeWrite)};
  // Partial offload: GPU sub-groups' fp32 gradients come up on the H2D
  // stream (GradientPass::OffloadGradients).
  if (lay_.PartialOffload()) host.push_back(em_.LastOn(Stream::kH2D));
  std::vector<int> swappable;
  for (size_t i = 0; i < lay_.sub_groups.size(); ++i)
    if (lay_.sub_groups[i].swappable) swappable.push_back(static_cast<int>(i));
  // policy.prefetch_optimizer_states (Strata's, not DeepSpeed's): the first
  // swappable sub-group's states (master, m, v) are read depending on
  // nothing of this iteration but their swap buffers; only its gradient
  // waits for the backward.
  std::vector<OpId> reads(lay_.sub_groups.size(), -1);
  OpId early = -1;
  if (!swappable.empty() && oo.pipeline_read && scenario_.policy.prefetch_optimizer_states)
    early = StatesRead(swappable[0], 0, {}, /*with_grad=*/false, /*with_states=*/true, /*early=*/true);
  OpId pending_write = -1;
  std::vector<OpId> launched;  // GPU sub-groups' steps the host did not wait for
  size_t k = 0;                // swappable sub-groups stepped so far
  for (size_t i = 0; i < lay_.sub_groups.size(); ++i) {
    const SubGroup& sg = lay_.sub_groups[i];
    const std::string name = "step.sub_group" + std::to_string(i);
    // On its sub-group's tier: the GPU's compute stream, or the CPU
    // optimizer (offload_optimizer.ratio splits them: stage3.py
    // _optimizer_step, subgroup_to_device).
    Op st = em_.NewOp(name, OpKind::kOptimizerStep, sg.tier == Tier::kGpu ? Stream::kCompute : Stream::kCpuOptim);
    st.flops = kAdamFlopsPerElement * static_cast<double>(sg.n.v);
    st.bytes = sg.n.bytes(kAdamBytesPerElement + lay_.lp_bytes);
    st.elements = sg.n;
    st.flat_begin = sg.begin.v;
    const Elements end = sg.begin + sg.n;
    if (!sg.swappable) {
      const int t = static_cast<int>(sg.tier);
      const Region grad = lay_.OffloadedGradPath()
                              ? lay_.Grad32Region(static_cast<int>(i), sg.begin.v, sg.n.v)
                              : R(lay_.step_grads, sg.begin.v * lay_.lp_bytes, sg.n.bytes(lay_.lp_bytes).v);
      st.deps = host;
      st.reads = {lay_.master[t], lay_.moments[t], grad.buffer};
      st.writes = {lay_.master[t], lay_.moments[t]};
      st.master = lay_.MasterRegion(static_cast<int>(i));
      st.exp_avg = lay_.ExpAvgRegion(static_cast<int>(i));
      st.exp_avg_sq = lay_.ExpAvgSqRegion(static_cast<int>(i));
      st.grad_in = grad;
      if (lay_.stage == 3 && !lay_.OffloadedGradPath()) {
        // Stage 3 on the GPU (stage3.py _prepare_fp32_grad_for_sub_group):
        // the sub-group's gradient partitions are flattened into a new
        // tensor (_flatten_dense_tensors: a view of a lone tensor) and cast
        // to fp32 (.to(), a copy unless already fp32), the fp32 one kept as
        // the master's .grad until _release_sub_group. Both are alive
        // during the cast: the step's peak.
        if (sg.last - sg.first > 1)
          em_.StepTransient(st, "step.grad.flat", sg.n.bytes(lay_.lp_bytes));  // last: one past
        if (lay_.lp_bytes != 4) em_.StepTransient(st, "step.grad32", sg.n.bytes(4));
      } else if (lay_.stage == 0 && lay_.lp_bytes != 4) {
        // FP16_Optimizer.step (runtime/fp16/fused_optimizer.py, also bf16
        // without ZeRO): every gradient is cast to fp32 (a list of per-tensor
        // copies), flattened into one fp32 gradient of the param group, the
        // casts dropped, and the flat one dropped after optimizer.step().
        for (const char* what : {"step.grad32", "step.grad32.cast"}) em_.StepTransient(st, what, sg.n.bytes(4));
      }
      const OpId id = em_.Emit(std::move(st));
      const OpId out = RouteParamOut(sg.begin, end, id, sg.tier == Tier::kGpu, static_cast<int>(i));
      // A GPU sub-group's step beside CPU ones (partial offload) is
      // launched, not waited for: the host goes on to the next sub-group.
      if (sg.tier == Tier::kGpu && lay_.PartialOffload())
        launched.push_back(out);
      else
        host = {out};
      continue;
    }
    const int set = static_cast<int>(k % static_cast<size_t>(lay_.optim_sets));
    if (reads[i] < 0) {
      if (early >= 0 && k == 0) {
        std::vector<OpId> deps = host;
        deps.push_back(early);
        reads[i] = early;
        host.push_back(StatesRead(static_cast<int>(i), set, deps, /*with_grad=*/true, /*with_states=*/false));
      } else {
        reads[i] = StatesRead(static_cast<int>(i), set, host, true, true);
      }
    }
    host.push_back(reads[i]);  // swap_in waits for its reads
    if (oo.pipeline_read && k + 1 < swappable.size()) {
      const int next = swappable[k + 1];
      reads[next] =
          StatesRead(next, static_cast<int>((k + 1) % static_cast<size_t>(lay_.optim_sets)), host, true, true);
    }
    const BufferId* slots = &lay_.optim_slots[4 * static_cast<size_t>(set)];
    const int64_t n4 = sg.n.v * 4;
    st.deps = host;
    st.reads = {slots[0], slots[1], slots[2], slots[3]};
    st.writes = {slots[0], slots[2], slots[3]};
    st.master = R(slots[0], 0, n4);
    st.grad_in = R(slots[1], 0, n4);
    st.exp_avg = R(slots[2], 0, n4);
    st.exp_avg_sq = R(slots[3], 0, n4);
    const OpId id = em_.Emit(std::move(st));
    // Since DeepSpeed v0.4.0: _reassign_or_swap_out_partitioned_parameters
    // (the fp16 write-back waited for), then _release_sub_group. v0.3.16
    // and the paper's a1e9753 (async_fp16_writeback): _release_sub_group first, then
    // the fp16 write issued and left in flight (RouteParamOut), through the
    // parameter swapper's own aio handle. The plan has one NVMe write
    // stream: when the states' write is left in flight too
    // (pipeline_write), the fp16 write goes first, so that the next step,
    // which waits for it, does not wait for the states as well.
    const bool states_pending = oo.pipeline_write && k + 1 < swappable.size();
    const bool fp16_after = release_.async_fp16_writeback && !states_pending;
    // RouteParamOut returns the op the host waits for: under v0.3 not the
    // write-back itself.
    host = {fp16_after ? id : RouteParamOut(sg.begin, end, id, false, static_cast<int>(i))};
    if (pending_write >= 0) host.push_back(pending_write);  // _complete_swap_out
    pending_write = -1;
    const OpId wr = StatesWrite(static_cast<int>(i), set, host);
    if (states_pending)
      pending_write = wr;
    else
      host.push_back(wr);
    if (fp16_after) host.push_back(RouteParamOut(sg.begin, end, id, false, static_cast<int>(i)));
    ++k;
  }
  host.insert(host.end(), launched.begin(), launched.end());
  GatherPersistent(host);
}

// Reads sub-group sg's swapped tensors from NVMe into swap-buffer set `set`
// (one fp32 tensor per buffer: master, gradient, exp_avg, exp_avg_sq), as
// swap_in_optimizer_state does; the states, the gradient or both.
OpId StepPass::StatesRead(int sg, int set, std::vector<OpId> deps, bool with_grad, bool with_states, bool early) {
  const SubGroup& g = lay_.sub_groups[sg];
  const int64_t n4 = g.n.v * 4;
  const int nv = static_cast<int>(Tier::kNvme);
  const std::string name = "step.sub_group" + std::to_string(sg) +
                           (with_grad && with_states ? ".read"
                            : with_grad              ? ".read_grad"
                                                     : ".read_states");
  Op rd = em_.NewOp(name, OpKind::kNvmeRead, Stream::kNvmeRead);
  rd.deps = std::move(deps);
  auto take = [&](int j, Region from) {
    const size_t s = 4 * static_cast<size_t>(set) + j;
    rd.deps.push_back(optim_slot_user_[s]);
    rd.writes.push_back(lay_.optim_slots[s]);
    rd.moves.push_back({from, R(lay_.optim_slots[s], 0, n4)});
    rd.bytes += Bytes(n4);
  };
  if (with_states) {
    rd.reads = {lay_.master[nv], lay_.moments[nv]};
    take(0, lay_.MasterRegion(sg));
    take(2, lay_.ExpAvgRegion(sg));
    take(3, lay_.ExpAvgSqRegion(sg));
  }
  if (with_grad) {
    rd.reads.push_back(lay_.grad32[nv]);
    take(1, lay_.Grad32Region(sg, g.begin.v, g.n.v));
  }
  return early ? em_.EmitBeforeWaits(std::move(rd)) : em_.Emit(std::move(rd));
}

// Writes sub-group sg's master and moments back from set `set` (not the
// gradient: swap_out_optimizer_state writes the pinned state tensors only);
// the whole set is free for reuse once it ends.
OpId StepPass::StatesWrite(int sg, int set, std::vector<OpId> deps) {
  const int64_t n4 = lay_.sub_groups[sg].n.v * 4;
  const int nv = static_cast<int>(Tier::kNvme);
  const BufferId* slots = &lay_.optim_slots[4 * static_cast<size_t>(set)];
  Op wr = em_.NewOp("step.sub_group" + std::to_string(sg) + ".write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
  wr.deps = std::move(deps);
  wr.bytes = Bytes(3 * n4);
  wr.reads = {slots[0], slots[2], slots[3]};
  wr.writes = {lay_.master[nv], lay_.moments[nv]};
  wr.moves = {{R(slots[0], 0, n4), lay_.MasterRegion(sg)},
              {R(slots[2], 0, n4), lay_.ExpAvgRegion(sg)},
              {R(slots[3], 0, n4), lay_.ExpAvgSqRegion(sg)}};
  const OpId id = em_.Emit(std::move(wr));
  for (int j = 0; j < 4; ++j) optim_slot_user_[4 * static_cast<size_t>(set) + j] = id;
  return id;
}

// The step of tile [a, b) produced new low-precision parameters on the tier
// it ran on. Those that live there are written in place; the rest go through
// a staging buffer to the GPU (H2D), the CPU (D2H) or NVMe (write); NVMe
// partitions through the pinned write-back buffer, written before the step
// goes on (partitioned_param_swapper.py swap_out_partitioned_params: a
// blocking write), or with async_fp16_writeback left in flight (stage3.py
// _partitioned_params_swap_out: swap_out_and_release(async_op=True)), the
// next step op that writes the buffer waiting for it either way
// (_optimizer_step's synchronize_writes). Persistent stage-3 groups' shards
// go to param_out, gathered home after the loop (GatherPersistent; stages
// 1-2 route their output in StepFlat, planner_flat.cc). Returns the
// routing's last op the host waits for.
OpId StepPass::RouteParamOut(Elements a, Elements b, OpId step_op, bool step_on_gpu, int tile) {
  // The tile's output, piece by piece: where each run of elements goes.
  struct Piece {
    int64_t out_off, dst_off, bytes;  // in the tile's output; in the destination
  };
  std::map<BufferId, std::vector<Piece>> targets;  // destination buffer -> pieces
  if (lay_.stage == 0) {
    // Stage 0: the flat partition is the replica in group order.
    targets[lay_.param_replica].push_back({0, a.v * lay_.lp_bytes, (b - a).v * lay_.lp_bytes});
  } else {
    // Tiles come in flat order: walk the groups with a cursor (linear overall).
    while (route_cursor_ < lay_.groups.size() &&
           (lay_.groups[route_cursor_].flat_offset + lay_.groups[route_cursor_].part).v <= a.v)
      ++route_cursor_;
    for (size_t i = route_cursor_; i < lay_.groups.size() && lay_.groups[i].flat_offset < b; ++i) {
      const GroupLayout& gl = lay_.groups[i];
      const int64_t lo = std::max(a.v, gl.flat_offset.v), hi = std::min(b.v, gl.flat_offset.v + gl.part.v);
      if (hi <= lo) continue;
      // Persistent groups with several ranks: the shard goes to the flat
      // output partition, gathered below.
      if (gl.out_offset.v >= 0)
        targets[lay_.param_out].push_back({(lo - a.v) * lay_.lp_bytes,
                                           gl.out_offset.v + (lo - gl.flat_offset.v) * lay_.lp_bytes,
                                           (hi - lo) * lay_.lp_bytes});
      else
        targets[gl.home_buffer].push_back({(lo - a.v) * lay_.lp_bytes,
                                           gl.home_offset.v + (lo - gl.flat_offset.v) * lay_.lp_bytes,
                                           (hi - lo) * lay_.lp_bytes});
    }
  }
  const Tier here = step_on_gpu ? Tier::kGpu : Tier::kCpu;
  Op& step = plan_.ops[step_op];
  int64_t moved = 0;
  const std::string name = "step.sub_group" + std::to_string(tile) + ".param_out";
  // A CPU step writes NVMe-homed pieces straight into the write-back buffer.
  auto via_writeback = [&](Tier to) { return to == Tier::kNvme && here == Tier::kCpu && lay_.writeback >= 0; };
  Op wb = em_.NewOp(name + ".nvme_write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
  int64_t wb_at = 0;
  for (const auto& [buf, pieces] : targets) {
    const Tier to = plan_.buffers[buf].tier;
    if (to == here) {
      step.writes.push_back(buf);
      for (const Piece& p : pieces)
        step.moves.push_back({R(kOpOutput, p.out_off, p.bytes), R(buf, p.dst_off, p.bytes)});
    } else if (via_writeback(to)) {
      for (const Piece& p : pieces) {
        step.moves.push_back({R(kOpOutput, p.out_off, p.bytes), R(lay_.writeback, wb_at, p.bytes)});
        wb.moves.push_back({R(lay_.writeback, wb_at, p.bytes), R(buf, p.dst_off, p.bytes)});
        wb_at += p.bytes;
      }
      wb.writes.push_back(buf);
    } else {
      for (const Piece& p : pieces) moved += p.bytes;
    }
  }
  OpId prev = step_op;
  if (wb_at > 0) {
    step.writes.push_back(lay_.writeback);
    if (writeback_user_ >= 0) step.deps.push_back(writeback_user_);  // the buffer's last write has ended
    wb.bytes = Bytes(wb_at);
    wb.deps = {step_op};
    wb.reads = {lay_.writeback};
    writeback_user_ = em_.Emit(std::move(wb));
    if (!release_.async_fp16_writeback) prev = writeback_user_;
  }
  if (moved > 0) {
    const BufferId staging = em_.NewBuffer(name, here, StateKind::kSwapBuffer, Bytes(moved));
    plan_.ops[step_op].allocs.push_back(staging);
    plan_.ops[step_op].writes.push_back(staging);
    // Staging holds the moved pieces back to back, in target order.
    std::vector<Op> copies;
    int64_t at = 0;
    for (const auto& [buf, pieces] : targets) {
      const Tier to = plan_.buffers[buf].tier;
      if (to == here || via_writeback(to)) continue;
      int64_t n = 0;
      std::vector<Move> out;  // staging-relative src offsets
      for (const Piece& p : pieces) {
        plan_.ops[step_op].moves.push_back({R(kOpOutput, p.out_off, p.bytes), R(staging, at + n, p.bytes)});
        out.push_back({R(staging, at + n, p.bytes), R(buf, p.dst_off, p.bytes)});
        n += p.bytes;
      }
      if (to == Tier::kNvme && here == Tier::kGpu) {
        // GPU -> the pinned write-back buffer -> NVMe.
        const bool resident = lay_.writeback >= 0;
        const BufferId hop =
            resident ? lay_.writeback : em_.NewBuffer(name + ".hop", Tier::kCpu, StateKind::kSwapBuffer, Bytes(n));
        Op d = em_.NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
        d.bytes = Bytes(n);
        if (resident) d.deps.push_back(writeback_user_);
        if (!resident) d.allocs = {hop};
        d.reads = {staging};
        d.writes = {hop};
        d.moves = {{R(staging, at, n), R(hop, 0, n)}};
        copies.push_back(std::move(d));
        Op w = em_.NewOp(name + ".nvme_write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
        w.bytes = Bytes(n);
        w.reads = {hop};
        if (!resident) w.frees = {hop};
        w.writes = {buf};
        for (Move& m : out) {
          m.src.buffer = hop;
          m.src.offset -= Bytes(at);
        }
        w.moves = std::move(out);
        copies.push_back(std::move(w));
      } else {
        const OpKind kind = to == Tier::kNvme  ? OpKind::kNvmeWrite
                            : to == Tier::kGpu ? OpKind::kCopyH2D
                                               : OpKind::kCopyD2H;
        const Stream stream = to == Tier::kNvme ? Stream::kNvmeWrite : to == Tier::kGpu ? Stream::kH2D : Stream::kD2H;
        Op c = em_.NewOp(name + "." + std::string(TierName(to)), kind, stream);
        c.bytes = Bytes(n);
        c.reads = {staging};
        c.writes = {buf};
        c.moves = std::move(out);
        copies.push_back(std::move(c));
      }
      at += n;
    }
    // Copies run one after another so that the last one may free the staging.
    for (size_t i = 0; i < copies.size(); ++i) {
      copies[i].deps.push_back(prev);
      if (i + 1 == copies.size()) copies[i].frees.push_back(staging);
      const bool to_writeback = copies[i].kind == OpKind::kNvmeWrite && !copies[i].reads.empty() &&
                                copies[i].reads.front() == lay_.writeback && lay_.writeback >= 0;
      prev = em_.Emit(std::move(copies[i]));
      if (to_writeback) writeback_user_ = prev;
    }
  }
  return prev;
}

// DeepSpeed gathers the persistent parameters once, after the sub-group
// loop (stage3.py _post_step: persistent_parameters[0].all_gather(...),
// blocking; the same in a1e9753, v0.5.4, v0.6.0 and master): one
// allgather of every persistent group's updated shard from param_out
// into its home, issued when the host has finished the loop. Not per
// sub-group: that would put a collective, so a barrier between the ranks,
// inside a loop where DeepSpeed has none.
void StepPass::GatherPersistent(const std::vector<OpId>& host) {
  if (lay_.param_out < 0) return;
  Op ag = em_.NewOp("step.persistent.allgather", OpKind::kAllGather, Stream::kComm);
  ag.group = 0;
  ag.deps = host;
  ag.reads = {lay_.param_out};
  for (const GroupLayout& gl : lay_.groups) {
    if (gl.out_offset.v < 0) continue;
    ag.moves.push_back({R(lay_.param_out, gl.out_offset, gl.part.bytes(lay_.lp_bytes)),
                        R(gl.home_buffer, gl.home_offset, lay_.Padded(gl).bytes(lay_.lp_bytes))});
    ag.bytes += lay_.Padded(gl).bytes(lay_.lp_bytes);
    AddOnce(ag.writes, gl.home_buffer);
  }
  if (ag.moves.empty()) return;
  // v0.5's _post_step all_gathers the persistent parameters through
  // _allgather_params' list of per-rank views: the flattened copy of
  // planner.cc Fetch's allgathers. Its copy kernels, each read and written:
  // this rank's partitions into their view, the copy out of the flattened
  // buffer, and each parameter's replicated_tensor copy.
  if (lay_.stage == 3 && release_.list_collectives) {
    em_.Transient(ag, "step.persistent.allgather_flat", StateKind::kCommBuffer, ag.bytes);
    ag.copy_bytes = Bytes(2 * ag.bytes.v / lay_.dp_size + 2 * ag.bytes.v + 2 * ag.bytes.v);
  }
  em_.Emit(std::move(ag));
}

}  // namespace strata::detail
