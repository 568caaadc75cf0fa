// Layout: where one rank's model states live (private to the planner). The
// layout pass (LayOut, planner_layout.cc) makes it once, before any op is
// emitted, allocating the plan's resident buffers and swap pools as
// DeepSpeed does; the passes that emit ops read it and never change it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "emitter.h"
#include "strata/core/model.h"
#include "strata/core/release_profile.h"
#include "strata/core/scenario.h"
#include "strata/plan/plan.h"
#include "strata/planner/planner.h"

namespace strata::detail {

inline Region R(BufferId b, int64_t offset, int64_t bytes) { return Region{b, Bytes(offset), Bytes(bytes)}; }
inline Region R(BufferId b, Bytes offset, Bytes bytes) { return Region{b, offset, bytes}; }
// Appends an id to an op's list (buffers, deps) unless it is there already.
inline void AddOnce(std::vector<int32_t>& v, int32_t id) {
  if (std::find(v.begin(), v.end(), id) == v.end()) v.push_back(id);
}

// Where NVMe-backed state goes: DeepSpeed swaps parameters under
// offload_param.nvme_path (AsyncPartitionedParameterSwapper) and optimizer
// states under offload_optimizer.nvme_path (OptimizerSwapper); one
// directory serves both when the paths are equal.
struct SwapDirs {
  std::vector<std::string> dirs;  // RunSpec::nvme_dirs
  int param = -1, optim = -1;     // indexes in dirs, -1: that state is not on NVMe
};
SwapDirs SwapDirsOf(const ZeroConfig& z);

// A configuration DeepSpeed rejects: an error in strict mode, else recorded
// in PlannerOptions::checks and planned around.
Status Fire(const PlannerOptions& o, const char* id, std::string message);

// One parameter group (tensor).
struct GroupLayout {
  Elements elements;     // unpartitioned
  Elements part;         // optimizer partition per rank (padded); == elements at stage 0
  Elements flat_offset;  // in the per-rank flat optimizer partition
  bool fetched = false;  // stage 3: gathered before each use
  bool persistent = false;
  Tier home = Tier::kGpu;  // where the low-precision copy lives between uses
  BufferId home_buffer = -1;
  Bytes home_offset;     // of its low-precision copy in home_buffer
  Bytes out_offset{-1};  // of its shard in param_out (gathered homes), -1 if none
};

// An optimizer sub-group (DeepSpeed's _create_fp16_sub_groups): whole
// parameter groups [first, last) of this rank's partition, closed once
// their partition elements reach sub_group_size (stage 3; one sub-group
// of everything in stages 0-2, whose optimizer steps the whole partition).
struct SubGroup {
  int first = 0, last = 0;
  Elements begin, n;         // flat range of this rank's partition
  bool swappable = false;    // NVMe optimizer: fp32 states and gradient on NVMe
  Tier tier = Tier::kGpu;    // where its fp32 master, moments and fp32 gradient live
  int64_t state_offset = 0;  // elements before it in its tier's state buffers
};

// A position of a micro step: every module forward, then the backward in
// reverse order; a checkpointed layer's backward is preceded by the
// recompute of its forward (its modules in forward order, each a forward
// op fetching its parameters again).
struct Position {
  int module;
  enum class Kind { kForward, kRecompute, kBackward } kind;
};

// A micro step's positions, and each layer's first and last module (-1
// for a layer of none): both front ends walk the same sequence.
struct Positions {
  std::vector<int> layer_first, layer_last;
  std::vector<Position> seq;
};
Positions PositionsOf(const ModelGraph& graph, bool activation_checkpointing);

// The plan's header both front ends write alike: the world, tier
// capacities, the model's totals, samples per iteration (`dp_size`
// data-parallel ranks) and the run record an executor reads.
void DescribePlanHeader(const Scenario& s, const ModelGraph& graph, int dp_size, Plan& plan);

struct Layout {
  // The run's shape.
  int dp_size = 1;  // data-parallel world size
  int stage = 0;
  int lp_bytes = 2;  // bytes per low-precision element
  int num_modules = 0;
  Tier optim_tier = Tier::kGpu;
  int tp_group = -1;  // Plan::groups index of "tp" (tensor parallelism), -1 without
  // ZeRO++ (stage 3, several ranks): hpZ's secondary group ("hpz", of
  // hpz_size consecutive ranks) and qgZ's two all-to-all groups (a node's
  // ranks, "zpp_local", and the same local rank of every node,
  // "zpp_global"); -1 without.
  int hpz_group = -1, hpz_size = 1;
  int qg_local = -1, qg_global = -1;
  bool qwz = false;  // zero_quantized_weights: int8 allgathers
  // Stage 3 with offload_optimizer under direct_fp32_gradients and one
  // micro step: shards go straight from the GPU to the optimizer.
  bool direct_gradients = false;

  std::vector<GroupLayout> groups;
  Elements flat_total;      // per-rank optimizer partition
  int64_t flat_padded = 0;  // stages 1-2: elements of the padded flat buffer
  int64_t overlap_max = 0;  // stages 1-2: most full elements of groups overlapping one rank's partition
  std::vector<SubGroup> sub_groups;
  std::vector<int> sub_group_of;  // per parameter group

  // fp32 state per tier (-1 where none): master weights, moments (all first
  // moments, then all second moments) and, with offload_optimizer, the fp32
  // gradient the optimizer reads.
  BufferId master[kNumTiers] = {-1, -1, -1}, moments[kNumTiers] = {-1, -1, -1}, grad32[kNumTiers] = {-1, -1, -1};
  int64_t state_total[kNumTiers] = {0, 0, 0};
  BufferId param_replica = -1, param_persistent = -1;
  BufferId grad = -1;
  // Several ranks: stage 1's reduced gradient partition on the GPU, and the
  // flat partition of updated low-precision parameters that stages 1-2 (and
  // persistent groups in stage 3) allgather into their replicated homes.
  BufferId grad_part = -1, param_out = -1;
  BufferId step_grads = -1;    // where the optimizer reads gradients
  BufferId grad_accum = -1;    // stages 1-2 offload, several micro steps: the CPU accumulator
  BufferId param_lp_cpu = -1;  // stages 1-2 offload: the CPU low-precision copy of the partition
  // offload_param nvme: the parameter swap buffers, and the pinned buffer
  // DeepSpeed's param swapper writes updated fp16 partitions through
  // (reserve_partitioned_swap_space).
  std::vector<BufferId> param_slots;
  Bytes param_slot_bytes;
  BufferId writeback = -1;
  // NVMe optimizer: each swap buffer holds one fp32 tensor of the largest
  // sub-group; a sub-group's step takes a set of four (master, gradient,
  // exp_avg, exp_avg_sq); sets in flight: 1 + pipeline_read + pipeline_write
  // (at most the number of swappable sub-groups).
  std::vector<BufferId> optim_slots;
  int optim_sets = 0;
  int64_t optim_slot_elems = 0;

  std::vector<int> layer_first, layer_last;  // module range of each layer
  std::vector<Position> seq;                 // the positions of a micro step

  // Stages 1-2 as stage_1_and_2.py runs them (planner_flat.cc).
  bool FlatPath() const { return stage == 1 || stage == 2; }
  // Stage 3, offload_optimizer cpu/nvme: the fp32 gradient path of DeepSpeed
  // (a low-precision CPU accumulator, fp32 at the boundary).
  bool OffloadedGradPath() const { return stage == 3 && optim_tier != Tier::kGpu; }
  // Partial offload (offload_optimizer.ratio): some sub-groups keep their
  // states on the GPU while the optimizer is offloaded.
  bool PartialOffload() const { return optim_tier != Tier::kGpu && master[static_cast<int>(Tier::kGpu)] >= 0; }
  // A group's size in a replicated home: padded to whole partitions when
  // several ranks gather into it.
  Elements Padded(const GroupLayout& gl) const { return stage == 3 ? Elements(gl.part.v * dp_size) : gl.elements; }
  // The bucket size of group gi: its elements (stages 1-2), or whole
  // partitions (stage 3 reduce-scatters the padded gradient).
  int64_t GradSize(int gi) const { return FlatPath() ? groups[gi].elements.v : groups[gi].part.v * dp_size; }
  // Where group gi's low-precision copy lives between uses (whole group, or
  // this rank's partition when partitioned).
  Region HomeRegion(int gi) const;
  Region MasterRegion(int sg) const;
  Region ExpAvgRegion(int sg) const;
  Region ExpAvgSqRegion(int sg) const;
  // The fp32 gradient of elements [from, from + n) of the flat partition (within sub-group sg).
  Region Grad32Region(int sg, int64_t from, int64_t n) const;
  // Group gi's partition in grad (the flat low-precision gradient partition).
  Region FlatGradRegion(int gi) const {
    const GroupLayout& gl = groups[gi];
    return R(grad, gl.flat_offset.bytes(lp_bytes), gl.part.bytes(lp_bytes));
  }
  // Calls f(rank, lo, hi) for each rank owning part of flat elements [lo, hi).
  template <typename F>
  void ForOwners(int64_t lo, int64_t hi, F&& f) const {
    const int64_t S = flat_total.v;
    for (int64_t q = lo / S; q < dp_size && q * S < hi; ++q)
      f(static_cast<int>(q), std::max(lo, q * S), std::min(hi, (q + 1) * S));
  }
};

// The layout of `graph` under `s` (of pipeline stage `pp`): fills the
// plan's header, run record, resident buffers, swap pools and model
// description through `em`. A configuration DeepSpeed rejects fails in
// strict mode, else is recorded in o.checks and laid out anyway.
Result<Layout> LayOut(const Scenario& s, const ReleaseProfile& release, const ModelGraph& graph,
                      const PlannerOptions& o, Emitter& em);

}  // namespace strata::detail
