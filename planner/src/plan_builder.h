// PlanBuilder: the planner's driver and its forward/backward pass (private
// to the planner). Build() runs the passes in order, each writing its ops
// and buffers through one Emitter (emitter.h):
//   LayOut (layout.h)        the states' buffers, swap pools and positions;
//   per micro step, this     each position's fetch chains as the FetchPolicy
//   class's forward and      (fetch_policy.h) schedules them, its compute,
//   backward                 activations, checkpoints and parameter caches;
//                            gradients through the GradientPass (gradients.h);
//   GradientPass             stages 0-1's reduction of the replica;
//   StepPass (step.h)        the optimizer step;
//   ScopeGradientPartition   a scoped GPU gradient partition's lifetime.
// Pipeline stages are planned one by one and merged (planner_pipeline.cc).
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "emitter.h"
#include "fetch_policy.h"
#include "gradients.h"
#include "layout.h"
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
  Status Fire(const char* id, std::string message) override { return detail::Fire(opt_, id, std::move(message)); }

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
    GradientPass::MicroState grads;
  };
  void SwapMicroState(MicroState& st);
  Status PipelineSteps();
  OpId PointToPoint(OpKind kind, const std::string& what, Bytes bytes, int peer);
  void ExchangeTiedGradients();
  std::string LayerName(int l) const { return "layer" + std::to_string(l + pp_.first_layer); }
  // Gathers group gi for its use at `pos`; returns the chain's last op (-1:
  // nothing to do, a cache hit).
  OpId Fetch(int pos, int gi, OpId issue_dep);
  // qwZ: allgather `ag` in int8 with fp32 scales (planner_fetch.cc).
  void QuantizeWeights(Op& ag, const std::string& name);
  // hpZ: per group, its secondary partition on the GPU (-1 until its first
  // release in the iteration, which fills it; the step frees them).
  std::vector<BufferId> secondary_;
  // The fetch schedule (fetch_policy.h), chosen once the layout and caches
  // are known (MakeFetchPolicy).
  std::unique_ptr<FetchPolicy> policy_;
  std::unique_ptr<FetchPolicy> MakeFetchPolicy() const;

  // FetchSite (fetch_policy.h): what the policy may see and emit.
  int NumModules() const override { return lay_.num_modules; }
  int NumGroups() const override { return static_cast<int>(lay_.groups.size()); }
  GroupInfo Group(int gi) const override {
    const GroupLayout& gl = lay_.groups[gi];
    return {gl.fetched, gl.home, gl.elements, gl.part, gl.elements.bytes(lay_.lp_bytes)};
  }
  const std::string& GroupName(int gi) const override { return graph_.param_groups[gi].name; }
  int Ranks() const override { return lay_.dp_size; }
  int micro() const override { return em_.micro(); }
  int SwapBuffers() const override { return static_cast<int>(lay_.param_slots.size()); }
  Bytes NvmeReadBytes() const override { return plan_.cache.fetch_nvme_read; }
  void BeginPosition(int pos) override {
    em_.SetPhase(pos < lay_.num_modules ? Phase::kForward : Phase::kBackward);
    SyncBoundary(pos);
  }
  void SetPhase(Phase p) override { em_.SetPhase(p); }
  void Hook(int pos, bool gathers) override;
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

  int Positions() const override { return static_cast<int>(lay_.seq.size()); }
  int ModuleAt(int pos) const override { return lay_.seq[pos].module; }
  bool Backward(int pos) const override { return lay_.seq[pos].kind == Position::Kind::kBackward; }
  bool Recompute(int pos) const { return lay_.seq[pos].kind == Position::Kind::kRecompute; }
  // The prefix of position pos's op names: "m0.fwd.", "m0.rec.", "m0.bwd.".
  std::string PassTag(int pos) const { return em_.Tag() + (Backward(pos) ? "bwd." : Recompute(pos) ? "rec." : "fwd."); }
  // The module's parameter groups (tensors), in order; empty if it has none.
  const std::vector<int>& GroupsAt(int pos) const override { return graph_.modules[ModuleAt(pos)].param_groups; }
  // Full (unpartitioned) elements of group gi.
  int64_t FullElements(int gi) const { return lay_.groups[gi].elements.v; }
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
  Layout lay_;                         // read only once laid out
  std::optional<GradientPass> grads_;  // made once laid out
  // Emits the module's tensor-parallel collectives of its pass (ModuleSpec
  // tp_fwd / tp_bwd) that go `before` it or after it, on the compute
  // stream: Megatron runs them in the compute stream, which waits for them.
  void TpCollectives(const ModuleSpec& m, bool bwd, bool before, bool recompute = false);
  std::vector<OpId> param_slot_user_, optim_slot_user_;  // per swap buffer: its last user
  size_t param_slot_next_ = 0;

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
  OpId last_compute_ = -1;
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
