// The delayed parameter update (policy.delayed_update, docs/dpu.md): the
// flat partition's CPU step is the iteration's first op, on the gradients
// the previous iteration left in a second fp32 gradient partition, while
// this iteration's copies fill the first (an executor swaps them after
// each step); its parameters reach the GPU after the backward. Everything
// else is the ordinary plan's.
#include <gtest/gtest.h>

#include <algorithm>

#include "strata/plan/plan.h"
#include "strata/plan/plan_json.h"
#include "strata/plan/validator.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata {
namespace {

Scenario Offload(int stage, int gpus, int micro_steps) {
  Scenario s;
  s.name = "dpu-mlp";
  s.model.kind = ModelKind::kMlp;
  s.model.sizes = {8, 8, 8, 8, 4};
  testing::RoomyHardware(s, gpus);
  s.zero.stage = stage;
  s.zero.reduce_bucket_size = Elements(100);
  s.zero.offload_optimizer.device = OffloadDevice::kCpu;
  s.training.gradient_accumulation_steps = micro_steps;
  return s;
}

bool Writes(const Op& op, BufferId b) { return std::find(op.writes.begin(), op.writes.end(), b) != op.writes.end(); }
bool Reads(const Op& op, BufferId b) { return std::find(op.reads.begin(), op.reads.end(), b) != op.reads.end(); }
bool DependsOn(const Op& op, OpId d) { return std::find(op.deps.begin(), op.deps.end(), d) != op.deps.end(); }

TEST(DelayedUpdate, TheStepComesFirstAndReadsTheOtherGradientPartition) {
  for (int stage : {1, 2})
    for (int gpus : {1, 2})
      for (int gas : {1, 2}) {
        SCOPED_TRACE("stage " + std::to_string(stage) + ", " + std::to_string(gpus) + " GPUs, " + std::to_string(gas) +
                     " micro steps");
        Scenario s = Offload(stage, gpus, gas);
        const Plan ordinary = testing::MustPlanValid(s);
        s.policy.delayed_update_warmup = 3;
        const Plan p = testing::MustPlanValid(s);  // the validator's hazards and memory replay
        EXPECT_EQ(p.run.delayed_warmup, 3);
        EXPECT_EQ(ordinary.run.delayed_warmup, -1);
        EXPECT_EQ(ordinary.run.delayed_grads, -1);
        // The same ops, in another order.
        ASSERT_EQ(p.ops.size(), ordinary.ops.size());
        const Op& step = p.ops.front();
        EXPECT_EQ(step.kind, OpKind::kOptimizerStep);
        EXPECT_EQ(step.stream, Stream::kCpuOptim);
        EXPECT_EQ(step.phase, Phase::kStep);
        EXPECT_TRUE(step.deps.empty());
        // The step reads the pending partition, which nothing else touches;
        // the backward's copies write the other one.
        const BufferId pending = step.grad_in.buffer, incoming = p.run.delayed_grads;
        ASSERT_GE(incoming, 0);
        EXPECT_NE(pending, incoming);
        EXPECT_EQ(p.buffers[pending].bytes, p.buffers[incoming].bytes);
        EXPECT_EQ(p.buffers[pending].tier, Tier::kCpu);
        EXPECT_TRUE(p.buffers[pending].resident);
        // One more buffer than the ordinary plan: the pending partition.
        EXPECT_EQ(p.buffers.size(), ordinary.buffers.size() + 1);
        int copies = 0;
        for (const Op& op : p.ops) {
          if (op.id == step.id) continue;
          if (op.kind == OpKind::kOptimizerStep) ADD_FAILURE() << "a second step: " << op.name;
          EXPECT_FALSE(Writes(op, pending) || Reads(op, pending)) << op.name;
          if (Writes(op, incoming)) {
            ++copies;
            EXPECT_FALSE(DependsOn(op, step.id)) << op.name << ": the backward does not wait for the step";
          }
          // Only the parameters' way out is of the step's phase, after
          // every compute op and the step.
          if (op.phase == Phase::kStep) {
            EXPECT_TRUE(op.kind == OpKind::kCopyH2D || op.kind == OpKind::kAllGather) << op.name;
            for (const Op& c : p.ops)
              if (c.stream == Stream::kCompute) EXPECT_LT(c.id, op.id) << op.name;
          }
        }
        EXPECT_GT(copies, 0);
        // Plans an executor could not run so are refused: buffers that
        // cannot swap, an op of the iteration waiting for the step (a
        // warm-up step runs the step last), a delayed_grads out of range.
        auto refused = [](const Plan& bad) {
          const ValidationReport r = ValidatePlan(bad);
          return std::any_of(r.violations.begin(), r.violations.end(),
                             [](const Violation& v) { return v.kind == "delayed_update"; });
        };
        Plan bad = p;
        bad.run.delayed_grads = pending;
        EXPECT_TRUE(refused(bad));
        bad = p;
        for (Op& op : bad.ops)
          if (op.kind == OpKind::kBackward) {
            op.deps.push_back(step.id);
            break;
          }
        EXPECT_TRUE(refused(bad));
        bad = p;
        bad.run.delayed_grads = static_cast<int>(p.buffers.size());
        EXPECT_TRUE(refused(bad));
        EXPECT_FALSE(refused(p));
        // The plan's JSON carries the warm-up.
        auto back = DecodePlan(EncodePlan(p));
        ASSERT_TRUE(back.ok()) << back.status().message();
        EXPECT_EQ(back->run.delayed_warmup, 3);
        EXPECT_EQ(back->run.delayed_grads, p.run.delayed_grads);
      }
}

// A caller of the API that skips CheckScenario gets the refusal too.
TEST(DelayedUpdate, PlansOnlyTheCpuOptimizerOfStagesOneAndTwo) {
  for (auto [stage, optim] : {std::pair{2, OffloadDevice::kNone}, std::pair{3, OffloadDevice::kCpu}}) {
    Scenario s = Offload(stage, 1, 1);
    s.zero.offload_optimizer.device = optim;
    s.policy.delayed_update_warmup = 1;
    auto plan = BuildPlan(s);
    ASSERT_FALSE(plan.ok()) << stage;
    EXPECT_NE(plan.status().message().find("policy.delayed_update"), std::string::npos) << plan.status().message();
  }
}

}  // namespace
}  // namespace strata
