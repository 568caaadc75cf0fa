// FsdpBuilder: the PyTorch FSDP2 front end (private to the planner). It
// writes FSDP2's schedule (docs/fsdp.md; the source: docs/fsdp2-source.md)
// into the same plan IR through the same Emitter as the ZeRO front end,
// and walks the same positions (PositionsOf):
//   LayOut (fsdp_layout.cc)   units, each parameter's padded row shard, the
//                             resident fp32 shards and Adam moments;
//   per micro step            each unit's all-gather (cast on copy-in) into
//   (fsdp_passes.cc)          its unsharded buffer ahead of use, compute,
//                             reshard after forward, the backward's
//                             re-gather with prefetch, the reduce-scatter
//                             of the unit's gradients (one input held);
//   Step (fsdp_step.cc)       torch's Adam over each unit's fp32 shard, on
//                             the GPU or, under CPUOffloadPolicy, the CPU.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "emitter.h"
#include "layout.h"
#include "strata/core/fsdp.h"
#include "strata/core/model.h"
#include "strata/core/scenario.h"
#include "strata/plan/plan.h"
#include "strata/planner/planner.h"

namespace strata::detail {

// One FSDP unit: what one fully_shard call manages (one FSDPParamGroup),
// gathered and reduced as a whole.
struct FsdpUnit {
  std::string name;          // "root", "layer3", "layer0-3"
  bool root = false;         // fully_shard(model)'s own group
  std::vector<int> groups;   // its parameter groups, in forward order
  std::vector<int64_t> off;  // per entry of groups: offset in the unsharded buffer (elements)
  int64_t shard = 0;         // S_u: this rank's padded shard (elements)
  int64_t offset = 0;        // of the shard in the rank's flat shard (elements)
  int first_fwd = -1;        // first forward position using it
  int first_bwd = -1;        // first backward-phase position (recompute or backward) using it
  int last_fwd = -1, last_bwd = -1;
};

class FsdpBuilder {
 public:
  FsdpBuilder(const Scenario& s, const ModelGraph& g);
  Result<Plan> Build();

  // Torch's Adam (AdamW, foreach on the GPU, single-tensor on the CPU:
  // torch/optim/adam.py _multi_tensor_adam, _single_tensor_adam) makes one
  // pass per elementwise op: params *= 1 - lr wd (8 bytes an element),
  // exp_avg.lerp_ (12), exp_avg_sq.mul_ (8) and addcmul_ (12), sqrt (8),
  // div_ (8), add_ eps (8), params.addcdiv_ (16): 80 bytes, where a fused
  // Adam moves 28.
  static constexpr int64_t kTorchAdamBytesPerElement = 80;
  static constexpr double kAdamFlopsPerElement = 12.0;

 private:
  Status LayOut();
  void LayOutUnits();
  void LayOutBuffers();
  void DescribeGroups();
  // Forward and backward of one micro step (fsdp_passes.cc).
  void MicroStep();
  // Units a gather runs ahead of its use: forward_prefetch (at least the
  // implicit one) or backward_prefetch.
  int Ahead(bool backward) const { return backward ? spec_.backward_prefetch : std::max(1, spec_.forward_prefetch); }
  void IssueGathers(const std::vector<int>& order, int through, bool backward);
  OpId Gather(int u, OpId dep, bool backward);
  void Compute(int pos);
  void ReduceScatter(int u);
  void Step();  // fsdp_step.cc

  const FsdpUnit& UnitAt(int pos) const { return units_[unit_of_module_[pos_.seq[pos].module]]; }
  bool Backward(int pos) const { return pos_.seq[pos].kind == Position::Kind::kBackward; }
  bool Recompute(int pos) const { return pos_.seq[pos].kind == Position::Kind::kRecompute; }
  bool Resharded(int u) const { return !units_[u].root && spec_.reshard_after_forward != 0; }
  Bytes Lp(int64_t elements) const { return Bytes(elements * lp_); }

  const Scenario& s_;
  const FsdpSpec& spec_;
  const ModelGraph& graph_;
  Emitter em_;
  Plan& plan_;
  Positions pos_;
  int shard_ = 1, replicate_ = 1, post_k_ = 0;  // post_k_: reshard_after_forward as a group size (0: none)
  int lp_ = 2, reduce_ = 2;                     // bytes per element: param_dtype, reduce_dtype
  Tier tier_ = Tier::kGpu;                      // of the fp32 shards, gradients and moments
  int shard_group_ = 0, replicate_group_ = -1, post_group_ = -1;
  std::vector<FsdpUnit> units_;
  std::vector<int> unit_of_module_;
  std::vector<int64_t> part_, flat_;  // per parameter group: padded shard, offset in the flat shard
  int64_t total_ = 0;                 // the rank's flat shard (elements)
  BufferId shard32_ = -1, moments_ = -1;

  // Per micro step, per unit.
  std::vector<BufferId> gathered_, post_shard_, ugrad_;
  std::vector<OpId> gather_op_;
  std::vector<char> issued_;
  std::vector<OpId> before_;  // last compute before a gather order entry's first position
  OpId last_compute_ = -1;
  BufferId held_input_ = -1;  // the reduce-scatter input held (one deep: reduce_scatter_states)
  OpId held_rs_op_ = -1;      // the last reduce-scatter
  // Per iteration, per unit: its sharded gradient (GPU, or CPU under
  // offload) and the ops that produced it.
  std::vector<BufferId> grad_;
  std::vector<OpId> grad_ops_;
  // Checkpoints and saved activations (GPU).
  std::vector<BufferId> act_, ckpt_;
};

Result<Plan> BuildFsdpPlan(const Scenario& s, const ModelGraph& g);

}  // namespace strata::detail
