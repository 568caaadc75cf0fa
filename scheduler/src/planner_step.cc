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
  const BufferId grads = grad_cpu_ >= 0 ? grad_cpu_ : grad_;
  const int64_t S = z.sub_group_size.v;
  OpId prev_step = -1, prev_write = -1;
  for (int64_t a = 0, t = 0; a < flat_total_.v; a += S, ++t) {
    const Elements b(std::min(a + S, flat_total_.v));
    const Elements n = b - Elements(a);
    const std::string name = "step.sub_group" + std::to_string(t);
    Op st = NewOp(name, OpKind::kOptimizerStep, optim_tier_ == Tier::kGpu ? Stream::kCompute : Stream::kCpuOptim);
    st.flops = kAdamFlopsPerElement * static_cast<double>(n.v);
    st.bytes = n.bytes(kAdamBytesPerElement + dt_);
    st.elements = n;
    st.deps = ready;
    if (optim_tier_ != Tier::kNvme) {
      st.reads = {master_, moments_, grads};
      st.writes = {master_, moments_};
      const OpId id = Emit(std::move(st));
      RouteParamOut(Elements(a), b, id, optim_tier_ == Tier::kGpu, static_cast<int>(t));
      continue;
    }
    // NVMe: read states and gradients into a pinned slot, step, write back.
    const size_t slot = static_cast<size_t>(t) % optim_slots_.size();
    Op rd = NewOp(name + ".read", OpKind::kNvmeRead, Stream::kNvmeRead);
    rd.bytes = n.bytes(12 + dt_);
    rd.deps = ready;
    rd.deps.push_back(optim_slot_user_[slot]);
    if (!z.offload_optimizer.pipeline_read) rd.deps.push_back(prev_step);
    rd.reads = {master_, moments_, grad_};
    rd.writes = {optim_slots_[slot]};
    const OpId rid = Emit(std::move(rd));
    st.deps = {rid};
    if (!z.offload_optimizer.pipeline_write) st.deps.push_back(prev_write);
    st.reads = {optim_slots_[slot]};
    st.writes = {optim_slots_[slot]};
    prev_step = Emit(std::move(st));
    Op wr = NewOp(name + ".write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
    wr.bytes = n.bytes(12);
    wr.deps = {prev_step};
    wr.reads = {optim_slots_[slot]};
    wr.writes = {master_, moments_};
    prev_write = optim_slot_user_[slot] = Emit(std::move(wr));
    RouteParamOut(Elements(a), b, prev_step, false, static_cast<int>(t));
  }
  // Persistent parameters: every rank needs the whole updated copy.
  if (stage_ == 3 && n_ > 1 && param_persistent_ >= 0) {
    Op ag = NewOp("step.allgather.persistent", OpKind::kAllGather, Stream::kComm);
    ag.bytes = plan_.buffers[param_persistent_].bytes;
    ag.group = 0;
    ag.deps = {last_[static_cast<int>(Stream::kCompute)], last_[static_cast<int>(Stream::kH2D)],
               last_[static_cast<int>(Stream::kCpuOptim)]};
    ag.reads = {param_persistent_};
    ag.writes = {param_persistent_};
    Emit(std::move(ag));
  }
}

// The step of tile [a, b) produced new low-precision parameters on the tier
// it ran on. Those that live there are written in place; the rest go through
// a staging buffer to the GPU (H2D), the CPU (D2H) or NVMe (write). Stages
// 1-2 then allgather the tile to rebuild every rank's replica.
void PlanBuilder::RouteParamOut(Elements a, Elements b, OpId step_op, bool step_on_gpu, int tile) {
  std::map<BufferId, Elements> targets;  // destination buffer -> elements of this tile
  if (stage_ < 3) {
    targets[param_replica_] = b - a;
  } else {
    // Tiles come in flat order: walk the groups with a cursor (linear overall).
    while (route_cursor_ < groups_.size() && (groups_[route_cursor_].flat_offset + groups_[route_cursor_].part).v <= a.v)
      ++route_cursor_;
    for (size_t i = route_cursor_; i < groups_.size() && groups_[i].flat_offset < b; ++i) {
      const GroupLayout& gl = groups_[i];
      const int64_t lo = std::max(a.v, gl.flat_offset.v), hi = std::min(b.v, gl.flat_offset.v + gl.part.v);
      if (hi > lo) targets[gl.home_buffer] += Elements(hi - lo);
    }
  }
  const Tier here = step_on_gpu ? Tier::kGpu : Tier::kCpu;
  Elements moved;
  for (auto [buf, n] : targets) {
    if (plan_.buffers[buf].tier == here)
      plan_.ops[step_op].writes.push_back(buf);
    else
      moved += n;
  }
  OpId prev = step_op;
  const std::string name = "step.sub_group" + std::to_string(tile) + ".param_out";
  if (moved.v > 0) {
    const BufferId staging = NewBuffer(name, here, StateKind::kSwapBuffer, moved.bytes(dt_));
    plan_.ops[step_op].allocs.push_back(staging);
    plan_.ops[step_op].writes.push_back(staging);
    // Copies run one after another so that the last one may free the staging.
    std::vector<Op> copies;
    for (auto [buf, n] : targets) {
      const Tier to = plan_.buffers[buf].tier;
      if (to == here) continue;
      if (to == Tier::kNvme && here == Tier::kGpu) {
        // GPU -> CPU staging -> NVMe.
        const BufferId hop = NewBuffer(name + ".hop", Tier::kCpu, StateKind::kSwapBuffer, n.bytes(dt_));
        Op d = NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
        d.bytes = n.bytes(dt_);
        d.allocs = {hop};
        d.reads = {staging};
        d.writes = {hop};
        copies.push_back(std::move(d));
        Op w = NewOp(name + ".nvme_write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
        w.bytes = n.bytes(dt_);
        w.reads = {hop};
        w.frees = {hop};
        w.writes = {buf};
        copies.push_back(std::move(w));
        continue;
      }
      const OpKind kind = to == Tier::kNvme ? OpKind::kNvmeWrite : to == Tier::kGpu ? OpKind::kCopyH2D : OpKind::kCopyD2H;
      const Stream stream = to == Tier::kNvme ? Stream::kNvmeWrite : to == Tier::kGpu ? Stream::kH2D : Stream::kD2H;
      Op c = NewOp(name + "." + std::string(TierName(to)), kind, stream);
      c.bytes = n.bytes(dt_);
      c.reads = {staging};
      c.writes = {buf};
      copies.push_back(std::move(c));
    }
    for (size_t i = 0; i < copies.size(); ++i) {
      copies[i].deps = {prev};
      if (i + 1 == copies.size()) copies[i].frees.push_back(staging);
      prev = Emit(std::move(copies[i]));
    }
  }
  if ((stage_ == 1 || stage_ == 2) && n_ > 1) {
    Op ag = NewOp(name + ".allgather", OpKind::kAllGather, Stream::kComm);
    ag.bytes = Elements((b - a).v * n_).bytes(dt_);
    ag.group = 0;
    ag.deps = {prev};
    ag.reads = {param_replica_};
    ag.writes = {param_replica_};
    Emit(std::move(ag));
  }
}

}  // namespace strata::detail
