// Planner: the parameter caches of the scenario's "policy" section. A cached
// gathered copy on the GPU saves the whole fetch chain of its next use; a
// cached NVMe-homed partition in CPU memory saves the NVMe read. Decisions
// are made in plan order, with each block's next use known (see eviction.h).
#include <algorithm>

#include "plan_builder.h"

namespace strata::detail {

void PlanBuilder::SetUpCaches() {
  const PolicyConfig& pc = scenario_.policy;
  plan_.cache.eviction = std::string(EvictionName(pc.eviction));
  plan_.cache.gpu_capacity = pc.gpu_cache;
  plan_.cache.cpu_capacity = pc.cpu_cache;
  if (pc.gpu_cache.v > 0) gpu_cache_ = std::make_unique<BlockCache>(pc.gpu_cache.v, pc.eviction, /*bypass=*/true);
  if (pc.cpu_cache.v > 0) cpu_cache_ = std::make_unique<BlockCache>(pc.cpu_cache.v, pc.eviction, /*bypass=*/true);
  cached_gpu_.assign(lay_.groups.size(), -1);
  cached_cpu_.assign(lay_.groups.size(), -1);
  cpu_accesses_.assign(lay_.groups.size(), {});
  // Access order within a micro step: forward then backward positions.
  const int P = Positions();
  first_use_.assign(lay_.groups.size(), -1);
  uses_.assign(lay_.groups.size(), {});
  for (int p = 0; p < P; ++p)
    for (int gi : GroupsAt(p)) {
      uses_[gi].push_back(p);
      if (first_use_[gi] < 0) first_use_[gi] = p;
    }
  // Compulsory traffic: every fetched group once per iteration (the step
  // changes parameters, so nothing cached survives it).
  for (size_t gi = 0; gi < lay_.groups.size(); ++gi) {
    const GroupLayout& gl = lay_.groups[gi];
    if (!gl.fetched || first_use_[gi] < 0) continue;
    const Bytes part = gl.part.bytes(lay_.lp_bytes);
    if (gl.home == Tier::kNvme) plan_.cache.compulsory_nvme_read += part;
    if (gl.home != Tier::kGpu) plan_.cache.compulsory_h2d += part;
    if (lay_.dp_size > 1) plan_.cache.compulsory_allgather += Elements(gl.part.v * lay_.dp_size).bytes(lay_.lp_bytes);
  }
}

int64_t PlanBuilder::NextUseOfGroup(int gi, int pos) const {
  const auto& u = uses_[gi];
  auto it = std::upper_bound(u.begin(), u.end(), pos);
  if (it != u.end()) return Now(*it);
  if (em_.micro() + 1 < plan_.micro_steps && !u.empty())
    return static_cast<int64_t>(em_.micro() + 1) * Positions() + u.front();
  return kNever;
}

int64_t PlanBuilder::CpuNextUse(int gi, int pos) const {
  if (cpu_future_.empty()) return NextUseOfGroup(gi, pos);
  const auto& f = cpu_future_[gi];
  auto it = std::upper_bound(f.begin(), f.end(), Now(pos));
  return it == f.end() ? kNever : *it;
}

// Without a recorded future, tiers are taken as exclusive in use: while a
// group is on the GPU its CPU copy is not needed; once evicted from the GPU,
// its next use will ask the CPU tier. With the future, nothing to update.
void PlanBuilder::CpuReschedule(int gi, int64_t next) {
  if (cpu_cache_ && cpu_future_.empty()) cpu_cache_->Reschedule(gi, next);
}

// Time to bring a gathered group back: NVMe read (the node's bandwidth is
// shared by its GPUs), H2D, and the allgather's (n-1)/n over the slowest hop.
BlockInfo PlanBuilder::GpuBlock(int gi) const {
  const GroupLayout& gl = lay_.groups[gi];
  const HardwareSpec& hw = scenario_.hardware;
  const double part = static_cast<double>(gl.part.bytes(lay_.lp_bytes).v);
  const double full = part * lay_.dp_size;
  double cost = 0;
  if (gl.home == Tier::kNvme) cost += part * hw.gpus_per_node / hw.nvme.read_bandwidth.bytes_per_s;
  if (gl.home != Tier::kGpu) cost += part / hw.pcie.bandwidth.bytes_per_s;
  if (lay_.dp_size > 1) {
    double hop = hw.nvlink.bandwidth.bytes_per_s > 0 ? hw.nvlink.bandwidth.bytes_per_s : hw.pcie.bandwidth.bytes_per_s;
    if (hw.nodes > 1) hop = std::min(hop, hw.network.bandwidth.bytes_per_s);
    cost += full * (lay_.dp_size - 1) / lay_.dp_size / hop;
  }
  BlockInfo b;
  b.bytes = static_cast<int64_t>(full);
  b.refetch_cost = cost;
  return b;  // clean: parameters do not change until the step
}

void PlanBuilder::ReleaseGathered(int pos, int gi, BufferId params, Op& op) {
  if (!gpu_cache_) {
    op.frees.push_back(params);
    if (lay_.hpz_group >= 0 && secondary_[gi] < 0) {
      // hpZ (partition_parameters.py _partition_param_sec): released, the
      // whole parameter leaves this rank's slice of it, 1/hpz of the
      // padded whole, in a secondary partition on the GPU until the step.
      const GroupLayout& gl = lay_.groups[gi];
      secondary_[gi] =
          em_.NewBuffer(em_.Tag() + "secondary." + graph_.param_groups[gi].name, Tier::kGpu, StateKind::kParam16,
                        Elements(lay_.Padded(gl).v / lay_.hpz_size).bytes(lay_.lp_bytes));
      op.allocs.push_back(secondary_[gi]);
      op.writes.push_back(secondary_[gi]);
      // Its rank's slice: the hpZ group's index, of consecutive ranks.
      const Bytes sec = plan_.buffers[secondary_[gi]].bytes;
      for (int r = 0; r < lay_.dp_size; ++r)
        op.moves.push_back(
            {R(params, (r % lay_.hpz_size) * sec.v, sec.v), R(secondary_[gi], 0, sec.v), false, false, r});
      op.copy_bytes += sec * 2;  // a device copy: read and written
    }
    return;
  }
  if (gpu_cache_->Contains(gi)) {  // a hit: it stays
    gpu_cache_->Unpin(gi);
    return;
  }
  std::vector<int> victims;
  if (!gpu_cache_->Insert(gi, GpuBlock(gi), Now(pos), NextUseOfGroup(gi, pos), &victims)) {
    op.frees.push_back(params);
    return;
  }
  cached_gpu_[gi] = params;
  CpuReschedule(gi, kNever);
  // Victims were last read by earlier computes on this stream: free them here.
  for (int v : victims) {
    op.frees.push_back(cached_gpu_[v]);
    cached_gpu_[v] = -1;
    CpuReschedule(v, NextUseOfGroup(v, pos));
  }
}

// Nothing cached survives the iteration: the step updates every parameter.
void PlanBuilder::FreeCaches() {
  for (size_t gi = 0; gi < lay_.groups.size(); ++gi) {
    if (cached_gpu_[gi] >= 0) plan_.ops[last_compute_].frees.push_back(cached_gpu_[gi]);
    if (cached_cpu_[gi] >= 0) plan_.ops[em_.LastOn(Stream::kH2D)].frees.push_back(cached_cpu_[gi]);
    cached_gpu_[gi] = cached_cpu_[gi] = -1;
  }
}

}  // namespace strata::detail
