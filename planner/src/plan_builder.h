// PlanBuilder: the planner's state while it emits one iteration (private to
// the scheduler). planner.cc lays out the states and emits forward and
// backward; planner_step.cc emits gradient reduction and the optimizer step.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "emitter.h"
#include "fetch_policy.h"
#include "strata/core/model.h"
#include "strata/core/parallel.h"
#include "strata/core/release_profile.h"
#include "strata/core/scenario.h"
#include "strata/plan/plan.h"
#include "strata/planner/eviction.h"
#include "strata/planner/planner.h"

namespace strata::detail {

// Which pipeline stage a builder plans (its graph is that stage's,
// PipelineStageGraph); the default is the whole model.
struct PipelineStage {
  int stage = 0;
  int stages = 1;
  int first_layer = 0;  // the stage's first layer in the whole model
};

// The plan being built is the site its fetch policy emits through
// (fetch_policy.h): the policy sees it only as a FetchSite.
class PlanBuilder final : private FetchSite {
 public:
  PlanBuilder(const Scenario& s, const ModelGraph& g, const PlannerOptions& o, PipelineStage pp = {});
  Result<Plan> Build();
  // CPU-tier accesses (per group, the Now() of each) recorded while
  // building; a second builder given them knows the CPU tier's future exactly
  // (GPU cache decisions do not depend on the CPU cache).
  const std::vector<std::vector<int64_t>>& cpu_accesses() const { return cpu_accesses_; }
  void SetCpuFuture(std::vector<std::vector<int64_t>> future) { cpu_future_ = std::move(future); }

 private:
  struct GroupLayout {
    Elements elements;     // unpartitioned
    Elements part;         // optimizer partition per rank (padded); == elements at stage 0
    Elements flat_offset;  // in the per-rank flat optimizer partition
    bool fetched = false;  // stage 3: gathered before each use
    bool persistent = false;
    Tier home = Tier::kGpu;  // where the low-precision copy lives between uses
    BufferId home_buffer = -1;
    Bytes home_offset;     // of its low-precision copy in home_buffer
    Bytes out_offset{-1};  // of its shard in param_out_ (gathered homes), -1 if none
  };
  static Region R(BufferId b, int64_t offset, int64_t bytes) { return Region{b, Bytes(offset), Bytes(bytes)}; }
  // Appends an id to an op's list (buffers, deps) unless it is there already.
  static void AddOnce(std::vector<int32_t>& v, int32_t id) {
    if (std::find(v.begin(), v.end(), id) == v.end()) v.push_back(id);
  }
  // Adam per element: ~12 FLOPs; memory traffic: read fp32 master, gradient,
  // m, v (16 B), write master, m, v (12 B), plus the low-precision copy.
  static constexpr double kAdamFlopsPerElement = 12.0;
  static constexpr int64_t kAdamBytesPerElement = 28;
  static Region R(BufferId b, Bytes offset, Bytes bytes) { return Region{b, offset, bytes}; }
  // Where group gi's low-precision copy lives between uses (whole group, or
  // this rank's partition when partitioned).
  Region HomeRegion(int gi) const;

  // Layout (planner_layout.cc).
  Status Layout();
  void DescribeRun(const ParallelLayout& layout);
  void DescribeExecution();
  Elements LayoutPartitions(Tier param_home);
  void LayoutSubGroups();
  void LayoutResidentParams(Tier param_home, Elements persistent_total);
  void LayoutGradients();
  void LayoutParamOut();
  void DescribeModel();
  void LayoutPositions();
  void LayoutParamHomes(Tier param_home);
  void LayoutOptimizerStates();
  Status LayoutSwapBuffers();
  std::string OptimizerBufferMessage(int needed) const;
  // A configuration DeepSpeed rejects: an error in strict mode, else recorded
  // in PlannerOptions::checks and planned around.
  Status Fire(const char* id, std::string message) override;

  // Forward and backward (planner.cc).
  void BeginMicro();
  Status MicroStep();
  // The state of one micro step between its forward and its backward
  // (1F1B runs other micro steps' passes in between).
  struct MicroState {
    std::vector<std::vector<OpId>> fetch_ops;
    std::vector<OpId> compute_op;
    std::vector<BufferId> held, act, ckpt_gpu, ckpt_cpu;
    std::vector<OpId> ckpt_h2d, ckpt_d2h;
    std::vector<BufferId> grad_pending;
    std::vector<int> last_bwd_use;
  };
  void SwapMicroState(MicroState& st);
  Status PipelineSteps();
  OpId PointToPoint(OpKind kind, const std::string& what, Bytes bytes, int peer);
  void ExchangeTiedGradients();
  std::string LayerName(int l) const { return "layer" + std::to_string(l + pp_.first_layer); }
  // Gathers group gi for its use at `pos`; returns the chain's last op (-1:
  // nothing to do, a cache hit).
  OpId Fetch(int pos, int gi, OpId issue_dep);
  // The fetch schedule (fetch_policy.h), chosen once the layout and caches
  // are known (MakeFetchPolicy).
  std::unique_ptr<FetchPolicy> policy_;
  std::unique_ptr<FetchPolicy> MakeFetchPolicy() const;

  // FetchSite (fetch_policy.h): what the policy may see and emit.
  int NumModules() const override { return num_modules_; }
  int NumGroups() const override { return static_cast<int>(groups_.size()); }
  GroupInfo Group(int gi) const override {
    const GroupLayout& gl = groups_[gi];
    return {gl.fetched, gl.home, gl.elements, gl.part, gl.elements.bytes(lp_bytes_)};
  }
  const std::string& GroupName(int gi) const override { return graph_.param_groups[gi].name; }
  int micro() const override { return em_.micro(); }
  int SwapBuffers() const override { return static_cast<int>(param_slots_.size()); }
  Bytes NvmeReadBytes() const override { return plan_.cache.fetch_nvme_read; }
  void BeginPosition(int pos) override {
    em_.SetPhase(pos < num_modules_ ? Phase::kForward : Phase::kBackward);
    SyncBoundary(pos);
  }
  void SetPhase(Phase p) override { em_.SetPhase(p); }
  OpId LastCompute() const override { return last_compute_; }
  OpId ComputeOp(int pos) const override { return compute_op_[pos]; }
  OpId LastOn(Stream s) const override { return em_.LastOn(s); }
  OpId Gather(int pos, int gi, OpId issue, const std::vector<OpId>& waits) override;
  void AddCopyBytes(OpId op, Bytes b) override { plan_.ops[op].copy_bytes += b; }
  Read ReadPartition(int gi, int pos, OpId issue, int slot) override;
  void ReleaseRead(const Read& r, int slot, int pos) override;
  OpId Compute(int pos, const std::vector<char>& release) override;
  void CheckpointToGpu(int layer, OpId dep);
  void CheckpointToCpu(int layer, OpId dep);

  // Gradients and step (planner_step.cc).
  void GradientOut(int group, int pos);
  OpId StatesRead(int sg, int set, std::vector<OpId> deps, bool with_grad, bool with_states);
  OpId StatesWrite(int sg, int set, std::vector<OpId> deps);
  void FlushBucket();
  // Stage 3 with offload_optimizer: the reduced shards of a bucket go to the
  // CPU accumulator, and at the accumulation boundary as fp32 to the
  // optimizer (planner_grads.cc).
  OpId OffloadGradients(const std::vector<int>& groups, const std::vector<Region>& shards,
                        const std::vector<BufferId>& reduced, OpId prev);
  void ReduceReplica();
  void Step();

  // Stages 1-2 as stage_1_and_2.py runs them (planner_flat.cc): one flat
  // buffer cut across ranks, IPG buckets all-reduced with each rank keeping
  // the slices it owns, the owner's fp32 copy to the CPU with
  // offload_optimizer, the whole flat buffer gathered after the step.
  bool FlatPath() const { return stage_ == 1 || stage_ == 2; }
  void LayoutFlatGradients();
  // Stages 2-3 backward of group gi: where it writes its gradient (a slot
  // of the IPG bucket, flushing the bucket first if it does not fit, or its
  // own buffer for a group used twice or larger than the bucket).
  Region GradSlot(int gi, int pos, Op& op);
  int64_t GradSize(int gi) const;
  void OwnGradientOut(int gi);
  void FlushFlat();
  // The bucket being filled, handed to its reduction (the filling state is
  // reset): its groups, their gradients, and every buffer holding them.
  struct TakenBucket {
    std::vector<int> groups;
    std::vector<Region> src;
    std::vector<BufferId> bufs;
  };
  TakenBucket TakeBucket();
  // After the reduction of `groups` ending with `last`: the IPG buffer's
  // next filler waits for it, and without overlap_comm the next compute.
  void FinishFlush(const std::vector<int>& groups, OpId last);
  // Reduces groups[k] (gradient at src[k]) to their owners and moves the
  // owned slices where the optimizer reads them; `bucket` and `pending`
  // are freed once the reduction no longer needs them.
  OpId ReduceOwned(const std::vector<int>& groups, const std::vector<Region>& src, BufferId bucket,
                   std::vector<BufferId> pending, OpId prev, const std::string& name);
  void StepFlat();
  // Calls f(rank, lo, hi) for each rank owning part of flat elements [lo, hi).
  template <typename F>
  void ForOwners(int64_t lo, int64_t hi, F&& f) const {
    const int64_t S = flat_total_.v;
    for (int64_t q = lo / S; q < dp_size_ && q * S < hi; ++q)
      f(static_cast<int>(q), std::max(lo, q * S), std::min(hi, (q + 1) * S));
  }
  int64_t flat_padded_ = 0;               // stages 1-2: elements of the padded flat buffer
  int64_t overlap_max_ = 0;               // stages 1-2: most full elements of groups overlapping one rank's partition
  BufferId grad_accum_ = -1;              // stages 1-2 offload, several micro steps: the CPU accumulator
  BufferId param_lp_cpu_ = -1;            // stages 1-2 offload: the CPU low-precision copy of the partition
  BufferId bucket_buf_ = -1;              // stages 2-3: the IPG bucket being filled
  int64_t bucket_fill_ = 0;               // its elements in use
  std::vector<Region> bucket_src_;        // per bucket_ entry: its gradient
  std::vector<BufferId> bucket_pending_;  // own buffers of the bucket's groups
  std::vector<OpId> acc_writer_;          // per group: the last copy into the CPU accumulator
  OpId bucket_user_[2] = {-1, -1};        // the last op of each IPG buffer's reduction
  int bucket_index_ = 0;                  // flushes so far (overlap_comm alternates two buffers)
  // Returns the last op of the routing (the step itself when nothing moves).
  OpId RouteParamOut(Elements a, Elements b, OpId step_op, bool step_on_gpu, int tile);
  void GatherPersistent(const std::vector<OpId>& host);

  // Parameter caches (planner_cache.cc).
  void SetUpCaches();
  int64_t Now(int pos) const { return static_cast<int64_t>(em_.micro()) * Positions() + pos; }
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
  int Positions() const override { return static_cast<int>(seq_.size()); }
  int ModuleAt(int pos) const override { return seq_[pos].module; }
  bool Backward(int pos) const override { return seq_[pos].kind == Position::Kind::kBackward; }
  bool Recompute(int pos) const { return seq_[pos].kind == Position::Kind::kRecompute; }
  // The module's parameter groups (tensors), in order; empty if it has none.
  const std::vector<int>& GroupsAt(int pos) const override { return graph_.modules[ModuleAt(pos)].param_groups; }
  // Full (unpartitioned) elements of group gi.
  int64_t FullElements(int gi) const { return groups_[gi].elements.v; }
  // Per p in [0, Positions()]: the full elements of every parameter of the
  // positions before p (persistent ones included).
  std::vector<int64_t> PositionElements() const override;

  const Scenario& scenario_;
  // The DeepSpeed release planned, as named mechanism flags (policy.deepspeed_stage3).
  const ReleaseProfile release_;
  const ModelGraph& graph_;
  PlannerOptions opt_;
  PipelineStage pp_;
  Emitter em_;  // the plan being written
  Plan& plan_;  // em_'s
  int dp_size_ = 1;  // data-parallel world size
  int stage_ = 0;
  int lp_bytes_ = 2;  // bytes per low-precision element
  int num_modules_ = 0;
  Tier optim_tier_ = Tier::kGpu;
  Elements flat_total_;  // per-rank optimizer partition
  // With anything on NVMe (stage 3), every partition is padded to a whole
  // number of kNvmeAlign-byte blocks, and sub-group tiles start on one, so
  // that each NVMe transfer is block-aligned at both ends and O_DIRECT needs
  // no bounce buffer or read-modify-write (DeepSpeed's swappers pad the same
  // way). 1 otherwise.
  static constexpr int64_t kNvmeAlign = 4096;
  int64_t align_ = 1;  // elements
  // DeepSpeed's swap threshold: tensors of fewer bytes stay in CPU memory
  // (swap_tensor/utils.py MIN_AIO_BYTES, at least aio.block_size).
  int64_t min_aio_bytes_ = 1 << 20;
  // Whether zero.Init puts group gi's partition (unpadded, ceil(numel / N))
  // on NVMe with offload_param nvme: at least min_aio_bytes_.
  bool ZeroInitSwaps(int gi) const { return CeilDiv(groups_[gi].elements.v, dp_size_) * lp_bytes_ >= min_aio_bytes_; }
  // DeepSpeed's I/O alignment in elements of `bytes_per_element`
  // (AIO_ALIGNED_BYTES x intra_op_parallelism, _io_aligned_numel).
  int64_t IoAligned(int64_t elements, int bytes_per_element) const;

  std::vector<GroupLayout> groups_;
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
  std::vector<SubGroup> sub_groups_;
  std::vector<int> sub_group_of_;  // per parameter group
  // fp32 state per tier (-1 where none): master weights, moments (all first
  // moments, then all second moments) and, with offload_optimizer, the fp32
  // gradient the optimizer reads.
  BufferId master_[kNumTiers] = {-1, -1, -1}, moments_[kNumTiers] = {-1, -1, -1}, grad32_[kNumTiers] = {-1, -1, -1};
  int64_t state_total_[kNumTiers] = {0, 0, 0};
  Region MasterRegion(int sg) const;
  Region ExpAvgRegion(int sg) const;
  Region ExpAvgSqRegion(int sg) const;
  // The fp32 gradient of elements [from, from + n) of the flat partition (within sub-group sg).
  Region Grad32Region(int sg, int64_t from, int64_t n) const;
  // Group gi's partition in grad_ (the flat low-precision gradient partition).
  Region FlatGradRegion(int gi) const {
    const GroupLayout& gl = groups_[gi];
    return R(grad_, gl.flat_offset.bytes(lp_bytes_).v, gl.part.bytes(lp_bytes_).v);
  }
  // Stage 3, offload_optimizer cpu/nvme: the fp32 gradient path of DeepSpeed
  // (a low-precision CPU accumulator, fp32 at the boundary).
  bool OffloadedGradPath() const { return stage_ == 3 && optim_tier_ != Tier::kGpu; }
  // A non-resident GPU gradient partition (release scoped_gpu_gradient_partition): allocated
  // by the first op that writes it, freed by the last that touches it.
  void ScopeGradientPartition();
  // How cpu_checkpointing copies a layer's checkpoint (checkpointing.py).
  //   kNone:     checkpoints stay on the GPU (cpu_checkpointing off).
  //   kBlocking: partition_activations (or, before DeepSpeed's offload
  //              engine, any: v0.5.10's copy_to_device and move_to_device):
  //              into pageable CPU memory and back, synchronous, on the
  //              compute stream (before the recomputation, nothing ahead).
  //   kEngine:   current DeepSpeed without partition_activations
  //              (_ActivationOffloadEngine, offload_activations.py, since
  //              PR #8282 of August 2026): pinned,
  //              on a side stream; the newest checkpoint stays on the GPU
  //              (keep_last_count 1), so layer l leaves when layer l + 1's
  //              forward has run, and comes back when its recomputation
  //              asks (restore_input), the compute stream waiting for it.
  //   kPrefetch: Strata's (policy.prefetch_checkpoints): pinned, on the
  //              copy streams, back one layer ahead of the recomputation.
  enum class CkptCopy { kNone, kBlocking, kEngine, kPrefetch };
  CkptCopy CheckpointCopy() const {
    const TrainingSpec& t = scenario_.training;
    if (!t.activation_checkpointing || !t.cpu_checkpointing) return CkptCopy::kNone;
    if (scenario_.policy.prefetch_checkpoints) return CkptCopy::kPrefetch;
    return t.partition_activations || release_.blocking_checkpoint_copies ? CkptCopy::kBlocking : CkptCopy::kEngine;
  }
  bool DirectGradients() const {
    return OffloadedGradPath() && release_.direct_fp32_gradients && scenario_.training.gradient_accumulation_steps == 1;
  }
  // NVMe optimizer: each swap buffer holds one fp32 tensor of the largest
  // sub-group; a sub-group's step takes a set of four (master, gradient,
  // exp_avg, exp_avg_sq); sets in flight: 1 + pipeline_read + pipeline_write
  // (at most the number of swappable sub-groups).
  int optim_sets_ = 0;
  int64_t optim_slot_elems_ = 0;
  size_t grad_slot_next_ = 0;  // the next swap buffer that stages fp32 gradients
  // offload_param nvme: the pinned buffer DeepSpeed's param swapper writes
  // updated fp16 partitions through (reserve_partitioned_swap_space).
  BufferId writeback_ = -1;
  OpId writeback_user_ = -1;  // the last write from it
  BufferId param_replica_ = -1, param_persistent_ = -1;
  BufferId grad_ = -1;
  // Several ranks: stage 1's reduced gradient partition on the GPU, and the
  // flat partition of updated low-precision parameters that stages 1-2 (and
  // persistent groups in stage 3) allgather into their replicated homes.
  BufferId grad_part_ = -1, param_out_ = -1;
  BufferId step_grads_ = -1;  // where the optimizer reads gradients
  int tp_group_ = -1;         // Plan::groups index of "tp" (tensor parallelism), -1 without
  // Emits the module's tensor-parallel collectives of its pass (ModuleSpec
  // tp_fwd / tp_bwd) that go `before` it or after it, on the compute
  // stream: Megatron runs them in the compute stream, which waits for them.
  void TpCollectives(const ModuleSpec& m, bool bwd, bool before, bool recompute = false);
  // A group's size in a replicated home: padded to whole partitions when
  // several ranks gather into it.
  Elements Padded(const GroupLayout& gl) const { return stage_ == 3 ? Elements(gl.part.v * dp_size_) : gl.elements; }
  std::vector<BufferId> param_slots_, optim_slots_;
  std::vector<OpId> param_slot_user_, optim_slot_user_;
  size_t param_slot_next_ = 0;
  Bytes param_slot_bytes_;
  std::vector<int> layer_first_, layer_last_;  // module range of each layer
  std::vector<Position> seq_;
  size_t route_cursor_ = 0;  // RouteParamOut: first group not yet behind the tile

  std::unique_ptr<BlockCache> gpu_cache_, cpu_cache_;
  std::vector<BufferId> cached_gpu_, cached_cpu_;   // per group
  std::vector<int> first_use_;                      // per group: first position, -1 if unused
  std::vector<std::vector<int>> uses_;              // per group: positions in a micro step
  std::vector<std::vector<int64_t>> cpu_accesses_;  // per group: Now() of CPU-tier accesses
  std::vector<std::vector<int64_t>> cpu_future_;    // the same, from a first pass

  // Per micro step.
  std::vector<std::vector<OpId>> fetch_ops_;   // per position: the last op of each of its groups' fetch chains
  std::vector<OpId> compute_op_;               // per position
  std::vector<BufferId> held_;                 // per group: gathered full copy
  std::vector<BufferId> act_;                  // per module: saved activations
  std::vector<BufferId> ckpt_gpu_, ckpt_cpu_;  // per layer
  std::vector<OpId> ckpt_h2d_;                 // per layer
  std::vector<OpId> ckpt_d2h_;                 // per layer
  std::vector<BufferId> grad_pending_;         // per group, stage 2-3
  // Per group: the last op that read its accumulated gradient back to the
  // GPU (the next micro step's add into the CPU accumulator follows it).
  std::vector<OpId> acc_reader_;
  std::vector<int> last_bwd_use_;  // per group: last backward position
  std::vector<int> bucket_;        // groups awaiting reduction
  OpId last_compute_ = -1;
  OpId block_ = -1;         // reduction the next compute must wait for (!overlap_comm)
  // Called before position `pos` issues anything: a boundary when pos
  // starts a checkpointed segment's forward or recomputation, or follows
  // the end of one's forward or backward.
  void SyncBoundary(int pos);
  void HostWaits(const std::vector<OpId>& ops) override { em_.HostWaits(ops); }
  void DeviceSynchronize() override { em_.DeviceSynchronize(); }
};

// Joins the stages' plans (stage s planned on PipelineStageGraph(g, s, P),
// layers [parts[s], parts[s + 1])) into one plan (plan.h, "Pipeline
// stages"), pairing each receive with its send (planner_pipeline.cc).
Result<Plan> MergeStages(std::vector<Plan> stages, const std::vector<int>& parts);

}  // namespace strata::detail
