// Planner: a parameter group's fetch (NVMe read, H2D, allgather, whichever
// apply), the coordinators' partition reads, and the checkpoint-boundary
// barriers, that the fetch policies issue through FetchSite
// (fetch_policy.h).
#include <algorithm>
#include <string>
#include <vector>

#include "plan_builder.h"
#include "quantizer.h"

namespace strata::detail {

// NVMe read into a pinned swap buffer, H2D, allgather; whichever apply.
OpId PlanBuilder::Fetch(int pos, int gi, OpId issue_dep) {
  GroupLayout& gl = lay_.groups[gi];
  em_.SetModule(ModuleAt(pos));
  const std::string& gname = graph_.param_groups[gi].name;
  const std::string tag = PassTag(pos);
  const Bytes part = gl.part.bytes(lay_.lp_bytes);
  const Bytes full = Elements(gl.part.v * lay_.dp_size).bytes(lay_.lp_bytes);
  CacheStats& stats = plan_.cache;
  if (gpu_cache_) {
    ++stats.gpu_accesses;
    if (gpu_cache_->Contains(gi)) {  // the gathered copy is still on the GPU
      ++stats.gpu_hits;
      gpu_cache_->Touch(gi, Now(pos), NextUseOfGroup(gi, pos));
      gpu_cache_->Pin(gi);
      held_[gi] = cached_gpu_[gi];
      return -1;
    }
  }
  OpId prev = issue_dep;
  BufferId src = gl.home_buffer;
  int slot = -1;
  BufferId new_cpu = -1;  // a partition read from NVMe into the CPU cache
  if (gl.home == Tier::kNvme) {
    bool cpu_hit = false;
    if (cpu_cache_) {
      ++stats.cpu_accesses;
      cpu_accesses_[gi].push_back(Now(pos));
      cpu_hit = cpu_cache_->Contains(gi);
      if (cpu_hit) {
        ++stats.cpu_hits;
        cpu_cache_->Touch(gi, Now(pos), CpuNextUse(gi, pos));
        src = cached_cpu_[gi];
      }
    }
    if (policy_->ReadsPartitions()) {
      // The coordinator has read it (planner_coordinator.cc).
      const Read read = policy_->ReadOf(gi);
      prev = read.op;
      src = read.buffer;
    } else if (!cpu_hit) {
      Op rd = em_.NewOp(tag + "fetch_nvme." + gname, OpKind::kNvmeRead, Stream::kNvmeRead);
      rd.bytes = part;
      rd.reads = {src};
      if (cpu_cache_) {
        new_cpu = em_.NewBuffer(tag + "cpu_cached." + gname, Tier::kCpu, StateKind::kSwapBuffer, part);
        rd.deps = {issue_dep};
        rd.allocs = {new_cpu};
        src = new_cpu;
      } else {
        slot = static_cast<int>(param_slot_next_++ % lay_.param_slots.size());
        rd.deps = {issue_dep, param_slot_user_[slot]};
        src = lay_.param_slots[slot];
      }
      rd.writes = {src};
      rd.moves = {{lay_.HomeRegion(gi), R(src, 0, part.v)}};
      stats.fetch_nvme_read += part;
      prev = em_.Emit(std::move(rd));
    }
  }
  BufferId full_buf = -1;
  if (gl.home != Tier::kGpu) {
    // Into the gathered buffer directly when there is nothing to gather.
    const bool direct = lay_.dp_size == 1;
    BufferId dst = direct ? em_.NewBuffer(tag + "gathered." + gname, Tier::kGpu, StateKind::kGatherBuffer, full)
                          : em_.NewBuffer(tag + "staging." + gname, Tier::kGpu, StateKind::kGatherBuffer, part);
    // DeepSpeed copies an offloaded partition up under its allgather stream
    // (partitioned_param_coordinator.py __all_gather_params), which holds
    // those copies and waits for allgathers already consumed, not the
    // collectives in flight; Strata's comm stream is one FIFO of every
    // collective, so the copies stay on the H2D stream.
    Op cp = em_.NewOp(tag + "fetch_h2d." + gname, OpKind::kCopyH2D, Stream::kH2D);
    cp.bytes = part;
    cp.deps = {prev};
    if (prev != issue_dep) cp.deps.push_back(issue_dep);
    cp.allocs = {dst};
    cp.reads = {src};
    cp.writes = {dst};
    cp.moves = {{src == gl.home_buffer ? lay_.HomeRegion(gi) : R(src, 0, part.v), R(dst, 0, part.v)}};
    stats.fetch_h2d += part;
    prev = em_.Emit(std::move(cp));
    // With more than one rank the copy is a blocking .to(device) (no
    // non_blocking: partition_parameters.py _all_gather_dtype and
    // _all_gather_sequential): the host waits for it, and whatever it issues
    // next (the module's compute after a prefetch) waits too; the prefetch's
    // allgathers do not. v0.5's fetch ends in a device barrier anyway
    // (planner_coordinator_v05.cc).
    if (policy_->CopiesBlockHost() && lay_.dp_size > 1) HostWaits({prev});
    if (slot >= 0) param_slot_user_[slot] = prev;
    if (new_cpu >= 0) {
      // Keep the partition in CPU memory if the cache takes it; victims were
      // last read by earlier H2D copies on this stream.
      std::vector<int> victims;
      BlockInfo info;
      info.bytes = part.v;
      info.refetch_cost = static_cast<double>(part.v) * scenario_.hardware.gpus_per_node /
                          scenario_.hardware.nvme.read_bandwidth.bytes_per_s;
      if (cpu_cache_->Insert(gi, info, Now(pos), CpuNextUse(gi, pos), &victims)) {
        cached_cpu_[gi] = new_cpu;
        for (int v : victims) {
          plan_.ops[prev].frees.push_back(cached_cpu_[v]);
          cached_cpu_[v] = -1;
        }
      } else {
        plan_.ops[prev].frees.push_back(new_cpu);
      }
    }
    src = dst;
    if (direct) full_buf = dst;
  }
  if (lay_.dp_size > 1) {
    full_buf = em_.NewBuffer(tag + "gathered." + gname, Tier::kGpu, StateKind::kGatherBuffer, full);
    Op ag = em_.NewOp(tag + "allgather." + gname, OpKind::kAllGather, Stream::kComm);
    ag.bytes = full;
    ag.group = 0;
    ag.deps = {prev};
    ag.allocs = {full_buf};
    ag.reads = {src};
    ag.writes = {full_buf};
    ag.moves = {{src == gl.home_buffer ? lay_.HomeRegion(gi) : R(src, 0, part.v), R(full_buf, 0, full.v)}};
    if (src != gl.home_buffer) ag.frees = {src};
    if (secondary_[gi] >= 0) {
      // hpZ: gathered from the secondary partition, within its group.
      ag.group = lay_.hpz_group;
      ag.reads = {secondary_[gi]};
      ag.moves = {{R(secondary_[gi], 0, full.v / lay_.hpz_size), R(full_buf, 0, full.v)}};
    }
    if (lay_.qwz) QuantizeWeights(ag, tag + "allgather." + gname);
    if (release_.list_collectives) {
      // v0.5's partition_parameters.py gathers into a list of per-rank views
      // (_allgather_param, which every fetch and prefetch reaches through
      // _all_gather(..., async_op=True): torch.distributed.all_gather),
      // and the PyTorch of the paper's stack (ProcessGroupNCCL::allgather)
      // gathers a list into a flattened copy of the whole, then copies it
      // out on the NCCL stream: a second gathered-size buffer while the
      // collective runs.
      em_.Transient(ag, tag + "allgather_flat." + gname, StateKind::kCommBuffer, full);
      // Its copy kernels: _allgather_param's torch.zeros of the whole and
      // copy_ of this rank's partition into its view (from a CPU or NVMe
      // home that copy_ is the H2D copy above), then the copy out (each
      // read and written).
      ag.copy_bytes = Bytes(full.v + (gl.home == Tier::kGpu ? 2 * part.v : 0) + 2 * full.v);
    }
    stats.fetch_allgather += full;
    prev = em_.Emit(std::move(ag));
  }
  held_[gi] = full_buf;
  return prev;
}

// qwZ (partition_parameters.py _all_gather_coalesced, CUDAQuantizer): each
// rank's shard quantized to int8 with one fp32 scale per group of its
// elements, both gathered, the whole dequantized to fp16 (then cast to
// bf16 where that is the format): ag.bytes become the int8 data and scales.
void PlanBuilder::QuantizeWeights(Op& ag, const std::string& name) {
  const int ranks = plan_.groups[static_cast<size_t>(ag.group)].size();
  const int64_t shard = ag.bytes.v / lay_.lp_bytes / ranks;  // elements
  const int64_t whole = shard * ranks;
  ag.bytes = Bytes(ranks * (shard + 4 * QuantizerGroups(shard)));
  ag.quant_bits = 8;
  em_.Transient(ag, name + ".int8", StateKind::kCommBuffer, ag.bytes);
  const int64_t cast = scenario_.training.precision == Precision::kBf16 ? 4 * whole : 0;
  ag.copy_bytes += Bytes(shard * (lay_.lp_bytes + 1) + 3 * whole + cast);
}

OpId PlanBuilder::Gather(int pos, int gi, OpId issue, const std::vector<OpId>& waits) {
  const OpId first = static_cast<OpId>(plan_.ops.size());
  const OpId last = Fetch(pos, gi, issue);
  fetch_ops_[pos].push_back(last);
  if (static_cast<OpId>(plan_.ops.size()) > first)
    for (OpId w : waits)
      if (w < first) AddOnce(plan_.ops[first].deps, w);
  return last;
}

FetchSite::Read PlanBuilder::ReadPartition(int gi, int pos, OpId issue, int slot) {
  const GroupLayout& gl = lay_.groups[gi];
  const std::string& gname = graph_.param_groups[gi].name;
  const Bytes part = gl.part.bytes(lay_.lp_bytes);
  Op rd = em_.NewOp(PassTag(pos) + "fetch_nvme." + gname, OpKind::kNvmeRead, Stream::kNvmeRead);
  rd.bytes = part;
  rd.reads = {gl.home_buffer};
  rd.deps = {issue};
  BufferId dst;
  if (slot < 0) {
    dst = em_.NewBuffer(em_.Tag() + "swap.param.extra." + gname, Tier::kCpu, StateKind::kSwapBuffer,
                        lay_.param_slot_bytes);
    rd.allocs = {dst};
  } else {
    dst = lay_.param_slots[slot];
    rd.deps.push_back(param_slot_user_[slot]);  // its last holder has been released
  }
  rd.writes = {dst};
  rd.moves = {{lay_.HomeRegion(gi), R(dst, 0, part.v)}};
  plan_.cache.fetch_nvme_read += part;
  return {em_.Emit(std::move(rd)), dst};
}

void PlanBuilder::ReleaseRead(const Read& r, int slot, int pos) {
  if (slot >= 0)
    param_slot_user_[slot] = compute_op_[pos];
  else if (r.buffer >= 0)
    plan_.ops[compute_op_[pos]].frees.push_back(r.buffer);
}

// ZeRO-3's hooks at one module use (docs/fidelity.md "ZeRO-3's hooks"): the
// module's pre- and post-hooks and, per parameter it gathers, the
// coordinator's fetch, wait and release, as one op of host time. What the
// host launches after it on the GPU (the fetches, the compute) waits for
// it; the host runs ahead of the GPU unless it waited for the device.
void PlanBuilder::Hook(int pos, bool gathers) {
  if (lay_.stage != 3 || !scenario_.policy.host_hooks) return;
  int params = 0;
  for (int gi : GroupsAt(pos)) params += lay_.groups[gi].fetched ? 1 : 0;
  if (gathers && release_.hook_waits_for_device) em_.DeviceSynchronize();
  em_.SetModule(ModuleAt(pos));
  Op h = em_.NewOp(PassTag(pos) + "hook." + graph_.modules[ModuleAt(pos)].name, OpKind::kHook, Stream::kHost);
  h.host_seconds = release_.hook_module_seconds + params * release_.hook_param_seconds;
  em_.HostIssuesAfter(em_.Emit(std::move(h)));
}

void PlanBuilder::SyncBoundary(int pos) {
  if (!scenario_.training.activation_checkpointing || !scenario_.training.synchronize_checkpoint_boundary) return;
  auto segment_first = [&](int p) {
    const int l = graph_.modules[ModuleAt(p)].layer;
    return l >= 0 && ModuleAt(p) == lay_.layer_first[l];
  };
  auto segment_last = [&](int p) {
    const int l = graph_.modules[ModuleAt(p)].layer;
    return l >= 0 && ModuleAt(p) == lay_.layer_last[l];
  };
  const bool starts = !Backward(pos) && segment_first(pos);  // a forward, or a recomputation (the backward's start)
  const bool after_fwd = pos > 0 && !Backward(pos - 1) && !Recompute(pos - 1) && segment_last(pos - 1);
  const bool after_bwd = pos > 0 && Backward(pos - 1) && segment_first(pos - 1);
  if (!starts && !after_fwd && !after_bwd) return;
  em_.DeviceSynchronize();
}

}  // namespace strata::detail
