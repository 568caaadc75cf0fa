// Planner: the optimizer step, one op per sub_group_size tile of the rank's
// flat partition, and the return of updated low-precision parameters to
// wherever they live.
#include <algorithm>
#include <map>

#include "plan_builder.h"

namespace strata::detail {
namespace {
// Adam per element: ~12 FLOPs; memory traffic: read fp32 master, gradient,
// m, v (16 B), write master, m, v (12 B), write the low-precision copy.
constexpr double kAdamFlopsPerElement = 12.0;
constexpr int64_t kAdamBytesPerElement = 28;
}  // namespace

void PlanBuilder::Step() {
  const ZeroConfig& z = s_.zero;
  phase_ = Phase::kStep;
  module_ = -1;
  // The step waits for every gradient-producing stream.
  const std::vector<OpId> ready = {last_[static_cast<int>(Stream::kCompute)], last_[static_cast<int>(Stream::kComm)],
                                   last_[static_cast<int>(Stream::kD2H)], last_[static_cast<int>(Stream::kNvmeWrite)]};
  const BufferId grads = step_grads_;
  const int64_t S = sub_group_.v;
  OpId prev_step = -1, prev_write = -1;
  // policy.prefetch_optimizer_states: the first tile's states are read
  // first, depending on nothing of this iteration, so the NVMe read stream
  // takes them as soon as the backward pass's reads are done; its gradients
  // follow in the loop. Only the first: the stream is FIFO, and a second
  // prefetch would hold the first tile's gradient read behind it.
  const bool prefetch = optim_tier_ == Tier::kNvme && z.offload_optimizer.pipeline_read && s_.policy.prefetch_optimizer_states;
  std::vector<OpId> prefetched;
  if (prefetch) prefetched.push_back(StatesRead(Elements(0), std::min(Elements(S), flat_total_), 0, {}));
  for (int64_t a = 0, t = 0; a < flat_total_.v; a += S, ++t) {
    const Elements b(std::min(a + S, flat_total_.v));
    const Elements n = b - Elements(a);
    const std::string name = "step.sub_group" + std::to_string(t);
    Op st = NewOp(name, OpKind::kOptimizerStep, optim_tier_ == Tier::kGpu ? Stream::kCompute : Stream::kCpuOptim);
    st.flops = kAdamFlopsPerElement * static_cast<double>(n.v);
    st.bytes = n.bytes(kAdamBytesPerElement + dt_);
    st.elements = n;
    st.deps = ready;
    st.flat_begin = a;
    const int64_t n4 = n.v * 4, nd = n.bytes(dt_).v;
    if (optim_tier_ != Tier::kNvme) {
      st.reads = {master_, moments_, grads};
      st.writes = {master_, moments_};
      // Moments: all first moments, then all second moments.
      st.master = R(master_, a * 4, n4);
      st.exp_avg = R(moments_, a * 4, n4);
      st.exp_avg_sq = R(moments_, (flat_total_.v + a) * 4, n4);
      st.grad_in = R(grads, a * dt_, nd);
      const OpId id = Emit(std::move(st));
      RouteParamOut(Elements(a), b, id, optim_tier_ == Tier::kGpu, static_cast<int>(t));
      continue;
    }
    // NVMe: read states and gradients into a pinned slot, step, write back.
    const size_t slot = static_cast<size_t>(t) % optim_slots_.size();
    const BufferId sb = optim_slots_[slot];
    const Region s_master = R(sb, 0, n4), s_m = R(sb, n4, n4), s_v = R(sb, 2 * n4, n4), s_g = R(sb, 3 * n4, nd);
    const Region d_master = R(master_, a * 4, n4), d_m = R(moments_, a * 4, n4),
                 d_v = R(moments_, (flat_total_.v + a) * 4, n4);
    std::vector<OpId> read_ids;
    if (static_cast<size_t>(t) < prefetched.size()) {
      // States already on their way: only the gradients wait for the backward.
      Op rd = NewOp(name + ".read_grad", OpKind::kNvmeRead, Stream::kNvmeRead);
      rd.bytes = n.bytes(dt_);
      rd.deps = ready;
      rd.deps.push_back(prefetched[t]);
      rd.reads = {grad_};
      rd.writes = {sb};
      rd.moves = {{R(grad_, a * dt_, nd), s_g}};
      read_ids = {prefetched[t], Emit(std::move(rd))};
    } else {
      Op rd = NewOp(name + ".read", OpKind::kNvmeRead, Stream::kNvmeRead);
      rd.bytes = n.bytes(12 + dt_);
      rd.deps = ready;
      rd.deps.push_back(optim_slot_user_[slot]);
      if (!z.offload_optimizer.pipeline_read) rd.deps.push_back(prev_step);
      rd.reads = {master_, moments_, grad_};
      rd.writes = {sb};
      // The slot holds master | m | v | gradient of the tile.
      rd.moves = {{d_master, s_master}, {d_m, s_m}, {d_v, s_v}, {R(grad_, a * dt_, nd), s_g}};
      read_ids = {Emit(std::move(rd))};
    }
    st.deps = read_ids;
    if (!z.offload_optimizer.pipeline_write) st.deps.push_back(prev_write);
    st.reads = {optim_slots_[slot]};
    st.writes = {optim_slots_[slot]};
    st.master = s_master;
    st.exp_avg = s_m;
    st.exp_avg_sq = s_v;
    st.grad_in = s_g;
    prev_step = Emit(std::move(st));
    Op wr = NewOp(name + ".write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
    wr.bytes = n.bytes(12);
    wr.deps = {prev_step};
    wr.reads = {optim_slots_[slot]};
    wr.writes = {master_, moments_};
    wr.moves = {{s_master, d_master}, {s_m, d_m}, {s_v, d_v}};
    prev_write = optim_slot_user_[slot] = Emit(std::move(wr));
    RouteParamOut(Elements(a), b, prev_step, false, static_cast<int>(t));
  }
}

// Reads the optimizer states (master, m, v) of tile [a, b) from NVMe into
// swap buffer `slot`; the gradient part of the slot is left to a later read.
OpId PlanBuilder::StatesRead(Elements a, Elements b, size_t slot, std::vector<OpId> deps) {
  const Elements n = b - a;
  const int64_t n4 = n.v * 4;
  const BufferId sb = optim_slots_[slot];
  Op rd = NewOp("step.sub_group" + std::to_string(a.v / sub_group_.v) + ".read_states", OpKind::kNvmeRead,
                Stream::kNvmeRead);
  rd.bytes = n.bytes(12);
  rd.deps = std::move(deps);
  rd.deps.push_back(optim_slot_user_[slot]);
  rd.reads = {master_, moments_};
  rd.writes = {sb};
  rd.moves = {{R(master_, a.v * 4, n4), R(sb, 0, n4)},
              {R(moments_, a.v * 4, n4), R(sb, n4, n4)},
              {R(moments_, (flat_total_.v + a.v) * 4, n4), R(sb, 2 * n4, n4)}};
  return Emit(std::move(rd));
}

// The step of tile [a, b) produced new low-precision parameters on the tier
// it ran on. Those that live there are written in place; the rest go through
// a staging buffer to the GPU (H2D), the CPU (D2H) or NVMe (write). Stages
// 1-2 then allgather the tile to rebuild every rank's replica.
void PlanBuilder::RouteParamOut(Elements a, Elements b, OpId step_op, bool step_on_gpu, int tile) {
  // The tile's output, piece by piece: where each run of elements goes.
  struct Piece {
    int64_t out_off, dst_off, bytes;  // in the tile's output; in the destination
  };
  std::map<BufferId, std::vector<Piece>> targets;  // destination buffer -> pieces
  if (stage_ < 3 && param_out_ < 0) {
    // One rank (or stage 0): the flat partition is the replica in group order.
    targets[param_replica_].push_back({0, a.v * dt_, (b - a).v * dt_});
  } else {
    // Tiles come in flat order: walk the groups with a cursor (linear overall).
    while (route_cursor_ < groups_.size() && (groups_[route_cursor_].flat_offset + groups_[route_cursor_].part).v <= a.v)
      ++route_cursor_;
    for (size_t i = route_cursor_; i < groups_.size() && groups_[i].flat_offset < b; ++i) {
      const GroupLayout& gl = groups_[i];
      const int64_t lo = std::max(a.v, gl.flat_offset.v), hi = std::min(b.v, gl.flat_offset.v + gl.part.v);
      if (hi <= lo) continue;
      // Replicated homes (stages 1-2, persistent groups) with several ranks:
      // the shard goes to the flat output partition, gathered below.
      if (gl.out_offset.v >= 0)
        targets[param_out_].push_back({(lo - a.v) * dt_, gl.out_offset.v + (lo - gl.flat_offset.v) * dt_, (hi - lo) * dt_});
      else
        targets[gl.home_buffer].push_back({(lo - a.v) * dt_, gl.home_offset.v + (lo - gl.flat_offset.v) * dt_, (hi - lo) * dt_});
    }
  }
  const Tier here = step_on_gpu ? Tier::kGpu : Tier::kCpu;
  Op& step = plan_.ops[step_op];
  int64_t moved = 0;
  for (const auto& [buf, pieces] : targets) {
    if (plan_.buffers[buf].tier == here) {
      step.writes.push_back(buf);
      for (const Piece& p : pieces) step.moves.push_back({R(kOpOutput, p.out_off, p.bytes), R(buf, p.dst_off, p.bytes)});
    } else {
      for (const Piece& p : pieces) moved += p.bytes;
    }
  }
  OpId prev = step_op;
  const std::string name = "step.sub_group" + std::to_string(tile) + ".param_out";
  if (moved > 0) {
    const BufferId staging = NewBuffer(name, here, StateKind::kSwapBuffer, Bytes(moved));
    plan_.ops[step_op].allocs.push_back(staging);
    plan_.ops[step_op].writes.push_back(staging);
    // Staging holds the moved pieces back to back, in target order.
    std::vector<Op> copies;
    int64_t at = 0;
    for (const auto& [buf, pieces] : targets) {
      const Tier to = plan_.buffers[buf].tier;
      if (to == here) continue;
      int64_t n = 0;
      std::vector<Move> out;  // staging-relative src offsets
      for (const Piece& p : pieces) {
        plan_.ops[step_op].moves.push_back({R(kOpOutput, p.out_off, p.bytes), R(staging, at + n, p.bytes)});
        out.push_back({R(staging, at + n, p.bytes), R(buf, p.dst_off, p.bytes)});
        n += p.bytes;
      }
      if (to == Tier::kNvme && here == Tier::kGpu) {
        // GPU -> CPU staging -> NVMe.
        const BufferId hop = NewBuffer(name + ".hop", Tier::kCpu, StateKind::kSwapBuffer, Bytes(n));
        Op d = NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
        d.bytes = Bytes(n);
        d.allocs = {hop};
        d.reads = {staging};
        d.writes = {hop};
        d.moves = {{R(staging, at, n), R(hop, 0, n)}};
        copies.push_back(std::move(d));
        Op w = NewOp(name + ".nvme_write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
        w.bytes = Bytes(n);
        w.reads = {hop};
        w.frees = {hop};
        w.writes = {buf};
        for (Move& m : out) {
          m.src.buffer = hop;
          m.src.offset -= at;
        }
        w.moves = std::move(out);
        copies.push_back(std::move(w));
      } else {
        const OpKind kind = to == Tier::kNvme ? OpKind::kNvmeWrite : to == Tier::kGpu ? OpKind::kCopyH2D : OpKind::kCopyD2H;
        const Stream stream = to == Tier::kNvme ? Stream::kNvmeWrite : to == Tier::kGpu ? Stream::kH2D : Stream::kD2H;
        Op c = NewOp(name + "." + std::string(TierName(to)), kind, stream);
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
      copies[i].deps = {prev};
      if (i + 1 == copies.size()) copies[i].frees.push_back(staging);
      prev = Emit(std::move(copies[i]));
    }
  }
  if (param_out_ < 0) return;
  // Groups whose shard this tile completes: gather them into their homes.
  Op ag = NewOp(name + ".allgather", OpKind::kAllGather, Stream::kComm);
  ag.group = 0;
  ag.deps = {prev};
  ag.reads = {param_out_};
  for (; gather_cursor_ < groups_.size() && (groups_[gather_cursor_].flat_offset + groups_[gather_cursor_].part).v <= b.v;
       ++gather_cursor_) {
    const GroupLayout& gl = groups_[gather_cursor_];
    if (gl.out_offset.v < 0) continue;
    ag.moves.push_back({R(param_out_, gl.out_offset, gl.part.bytes(dt_)),
                        R(gl.home_buffer, gl.home_offset, Padded(gl).bytes(dt_))});
    ag.bytes += Padded(gl).bytes(dt_);
    if (std::find(ag.writes.begin(), ag.writes.end(), gl.home_buffer) == ag.writes.end()) ag.writes.push_back(gl.home_buffer);
  }
  if (!ag.moves.empty()) Emit(std::move(ag));
}

}  // namespace strata::detail
