// The optimizer step pass (private to the planner): one op per sub-group of
// the rank's flat partition (layout.h), its NVMe swaps, and the return of
// updated low-precision parameters to wherever they live, as DeepSpeed
// steps (planner_step.cc: stage 3 and stage 0; stages 1-2 in
// planner_flat.cc). It runs once per iteration, after the last backward
// and its reductions.
#pragma once

#include <vector>

#include "emitter.h"
#include "layout.h"

namespace strata::detail {

class StepPass {
 public:
  // `optim_slot_user` is the last user of each optimizer swap buffer,
  // shared with the gradient pass (which stages fp32 gradients through
  // them).
  StepPass(const Scenario& s, const ReleaseProfile& release, const Layout& lay, Emitter& em,
           std::vector<OpId>& optim_slot_user);
  // Emits the step; the host waits for every gradient-producing stream
  // first.
  void Run();
  // Delayed parameter update (stages 1-2 with the optimizer on the CPU):
  // the step as the iteration's first op, then, after the backward, its
  // parameters' way to the GPU (planner_flat.cc).
  OpId DelayedStep();
  void DelayedParamsOut(OpId step);

 private:
  // Adam per element: ~12 FLOPs; memory traffic: read fp32 master, gradient,
  // m, v (16 B), write master, m, v (12 B), plus the low-precision copy.
  static constexpr double kAdamFlopsPerElement = 12.0;
  static constexpr int64_t kAdamBytesPerElement = 28;

  void StepFlat();
  Op FlatStepOp();
  void ToReplica(Op& op, Region from) const;
  void FlatParamsOut(OpId step, std::vector<OpId> deps);
  // `early`: issued before the host's waits (policy.prefetch_optimizer_states).
  OpId StatesRead(int sg, int set, std::vector<OpId> deps, bool with_grad, bool with_states, bool early = false);
  OpId StatesWrite(int sg, int set, std::vector<OpId> deps);
  // Returns the last op of the routing (the step itself when nothing moves).
  OpId RouteParamOut(Elements a, Elements b, OpId step_op, bool step_on_gpu, int tile);
  void GatherPersistent(const std::vector<OpId>& host);

  const Scenario& scenario_;
  const ReleaseProfile& release_;
  const Layout& lay_;
  Emitter& em_;
  Plan& plan_;
  std::vector<OpId>& optim_slot_user_;
  OpId writeback_user_ = -1;  // the last write from the parameter write-back buffer
  size_t route_cursor_ = 0;   // RouteParamOut: first group not yet behind the tile
};

}  // namespace strata::detail
