// PlanBuilder: the planner's state while it emits one iteration (private to
// the scheduler). planner.cc lays out the states and emits forward and
// backward; planner_step.cc emits gradient reduction and the optimizer step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/core/model.h"
#include "strata/core/scenario.h"
#include "strata/scheduler/eviction.h"
#include "strata/scheduler/plan.h"
#include "strata/scheduler/planner.h"

namespace strata::detail {

class PlanBuilder {
 public:
  PlanBuilder(const Scenario& s, const ModelGraph& g, const PlannerOptions& o);
  Result<Plan> Build();
  // CPU-tier accesses (per group, the Now() of each) recorded while
  // building; a second builder given them knows the CPU tier's future exactly
  // (GPU cache decisions do not depend on the CPU cache).
  const std::vector<std::vector<int64_t>>& cpu_accesses() const { return cpu_accesses_; }
  void SetCpuFuture(std::vector<std::vector<int64_t>> future) { cpu_future_ = std::move(future); }

 private:
  struct GroupLayout {
    Elements elements;      // unpartitioned
    Elements part;          // optimizer partition per rank (padded); == elements at stage 0
    Elements flat_offset;   // in the per-rank flat optimizer partition
    bool fetched = false;   // stage 3: gathered before each use
    bool persistent = false;
    Tier home = Tier::kGpu; // where the low-precision copy lives between uses
    BufferId home_buffer = -1;
    Bytes home_offset;      // of its low-precision copy in home_buffer
    Bytes out_offset{-1};   // of its shard in param_out_ (gathered homes), -1 if none
  };
  static Region R(BufferId b, int64_t offset, int64_t bytes) { return Region{b, offset, bytes}; }
  static Region R(BufferId b, Bytes offset, Bytes bytes) { return Region{b, offset.v, bytes.v}; }
  // Where group gi's low-precision copy lives between uses (whole group, or
  // this rank's partition when partitioned).
  Region HomeRegion(int gi) const;

  // Layout (planner.cc).
  Status Layout();
  BufferId NewBuffer(std::string name, Tier tier, StateKind kind, Bytes bytes, bool resident = false);
  Op NewOp(std::string name, OpKind kind, Stream stream) const;
  OpId Emit(Op op);
  std::string Tag() const { return "m" + std::to_string(micro_) + "."; }

  // Forward and backward (planner.cc).
  void MicroStep();
  void PrepareReuse();
  void Pass(int lo, int hi);
  OpId Fetch(int pos, OpId issue_dep);
  void Compute(int pos);
  void CheckpointToGpu(int layer, OpId dep);

  // Gradients and step (planner_step.cc).
  void GradientOut(int group, OpId producer);
  OpId StatesRead(Elements a, Elements b, size_t slot, std::vector<OpId> deps);
  void FlushBucket();
  void ReduceReplica();
  void Step();
  void RouteParamOut(Elements a, Elements b, OpId step_op, bool step_on_gpu, int tile);

  // Parameter caches (planner_cache.cc).
  void SetUpCaches();
  int64_t Now(int pos) const { return static_cast<int64_t>(micro_) * Positions() + pos; }
  int64_t NextUse(int pos) const;
  // The first use of group `gi` after position `pos` (this or a later micro step).
  int64_t NextUseOfGroup(int gi, int pos) const;
  // When group `gi` next asks the CPU tier after position `pos`: exact with a
  // recorded future, else estimated (exclusive tiers, see planner_cache.cc).
  int64_t CpuNextUse(int gi, int pos) const;
  void CpuReschedule(int gi, int64_t next);
  BlockInfo GpuBlock(int group) const;
  // After the compute at `pos` used group `gi`'s gathered copy `params`:
  // keep it cached (freeing victims with `op`) or free it with `op`.
  void ReleaseGathered(int pos, int gi, BufferId params, Op& op);
  void FreeCaches();

  // The positions of a micro step: every module forward, then the backward
  // in reverse order; a checkpointed layer's backward is preceded by the
  // recompute of its forward (its modules in forward order, each a forward
  // op fetching its parameters again).
  struct Position {
    int module;
    enum class Kind { kForward, kRecompute, kBackward } kind;
  };
  int Positions() const { return static_cast<int>(seq_.size()); }
  int ModuleAt(int pos) const { return seq_[pos].module; }
  bool Backward(int pos) const { return seq_[pos].kind == Position::Kind::kBackward; }
  bool Recompute(int pos) const { return seq_[pos].kind == Position::Kind::kRecompute; }

  const Scenario& s_;
  const ModelGraph& g_;
  PlannerOptions opt_;
  Plan plan_;
  int n_ = 1;          // data-parallel world size
  int stage_ = 0;
  int dt_ = 2;         // bytes per low-precision element
  int num_modules_ = 0;
  Tier optim_tier_ = Tier::kGpu;
  Elements flat_total_;  // per-rank optimizer partition
  // With anything on NVMe (stage 3), every partition is padded to a whole
  // number of kNvmeAlign-byte blocks, and sub-group tiles start on one, so
  // that each NVMe transfer is block-aligned at both ends and O_DIRECT needs
  // no bounce buffer or read-modify-write (DeepSpeed's swappers pad the same
  // way). 1 otherwise.
  static constexpr int64_t kNvmeAlign = 4096;
  int64_t align_ = 1;           // elements
  Elements sub_group_;          // sub_group_size, a multiple of align_

  std::vector<GroupLayout> groups_;
  BufferId param_replica_ = -1, param_persistent_ = -1;
  BufferId grad_ = -1, grad_cpu_ = -1, master_ = -1, moments_ = -1;
  // Several ranks: stage 1's reduced gradient partition on the GPU, and the
  // flat partition of updated low-precision parameters that stages 1-2 (and
  // persistent groups in stage 3) allgather into their replicated homes.
  BufferId grad_part_ = -1, param_out_ = -1;
  BufferId step_grads_ = -1;  // where the optimizer reads gradients
  // A group's size in a replicated home: padded to whole partitions when
  // several ranks gather into it.
  Elements Padded(const GroupLayout& gl) const {
    return stage_ >= 1 ? Elements(gl.part.v * n_) : gl.elements;
  }
  std::vector<BufferId> param_slots_, optim_slots_;
  std::vector<OpId> param_slot_user_, optim_slot_user_;
  size_t param_slot_next_ = 0;
  Bytes param_slot_bytes_;
  std::vector<int> layer_first_, layer_last_;  // module range of each layer
  std::vector<Position> seq_;
  size_t route_cursor_ = 0;                    // RouteParamOut: first group not yet behind the tile
  size_t gather_cursor_ = 0;                   // RouteParamOut: first group not yet gathered

  std::unique_ptr<BlockCache> gpu_cache_, cpu_cache_;
  std::vector<BufferId> cached_gpu_, cached_cpu_;  // per group
  std::vector<int> next_in_step_;                  // per position: next use of its group, -1 if none
  std::vector<int> first_use_;                     // per group: first position, -1 if unused
  std::vector<std::vector<int>> uses_;             // per group: positions in a micro step
  std::vector<std::vector<int64_t>> cpu_accesses_; // per group: Now() of CPU-tier accesses
  std::vector<std::vector<int64_t>> cpu_future_;   // the same, from a first pass

  // Per micro step.
  int micro_ = 0;
  Phase phase_ = Phase::kForward;  // stamped on new ops
  int module_ = -1;                // stamped on new ops
  std::vector<bool> needs_fetch_, release_after_;
  std::vector<OpId> fetch_op_;        // per position: last op of its fetch chain
  std::vector<OpId> compute_op_;      // per position
  std::vector<BufferId> held_;        // per group: gathered full copy
  std::vector<BufferId> act_;         // per module: saved activations
  std::vector<BufferId> ckpt_gpu_, ckpt_cpu_;  // per layer
  std::vector<OpId> ckpt_h2d_;        // per layer
  std::vector<OpId> ckpt_d2h_;        // per layer
  std::vector<BufferId> grad_pending_;  // per group, stage 2-3
  // Per group: the op that last wrote its gradient partition to NVMe (a later
  // micro step's read-back for accumulation must follow it), -1 if none.
  std::vector<OpId> grad_nvme_write_;
  std::vector<int> last_bwd_use_;     // per group: last backward position
  std::vector<int> bucket_;           // groups awaiting reduction
  Elements bucket_elems_;
  OpId last_compute_ = -1;
  OpId block_ = -1;                   // reduction the next compute must wait for (!overlap_comm)
  OpId last_[kNumStreams];            // last op emitted per stream
};

}  // namespace strata::detail
