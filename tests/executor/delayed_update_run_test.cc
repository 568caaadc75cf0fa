// strata run with a delayed parameter update (policy.delayed_update,
// docs/dpu.md) against the delayed-update loop written plainly here: the
// MLP workload's forward and backward, Adam element by element
// (adam_math.h), the warm-up's ordinary steps, one step that only keeps its
// gradients, then every step applying the previous step's gradients. The
// weights' digest and every step's loss must be the same bits.
#include <gtest/gtest.h>

#include <vector>

#include "strata/executor/adam_math.h"
#include "strata/executor/runner.h"
#include "strata/executor/sha256.h"
#include "strata/planner/planner.h"
#include "test_paths.h"
#include "test_util.h"
#include "workloads/workload.h"

namespace strata::exec {
namespace {

// The MLP on one rank, ZeRO-2 with the optimizer on the CPU, in fp32: the
// plain loop's arithmetic is then the workload's and Adam's alone.
Scenario Offloaded(Precision precision, int warmup) {
  Scenario s = testing::Builtin("seed");
  s.model.sizes = {64, 48, 10};
  s.training.precision = precision;
  s.zero.stage = 2;
  s.zero.offload_param.device = OffloadDevice::kNone;
  s.zero.offload_optimizer.device = OffloadDevice::kCpu;
  s.zero.overlap_comm = false;
  s.policy.prefetch_optimizer_states = false;
  s.policy.delayed_update_warmup = warmup;
  return s;
}

struct Trained {
  std::string digest;
  std::vector<double> losses;
};

Result<Trained> Train(const Scenario& s, int steps) {
  STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s));
  auto env = NewMemEnv();
  RunOptions o;
  o.steps = steps;
  o.env = env.get();
  o.engine = IoEngineKind::kSync;
  STRATA_ASSIGN_OR_RETURN(auto r, RunTraining(plan, o));
  return Trained{r.weights_digest, r.losses};
}

// The reference: `warmup` ordinary steps (w = adam(w, g)), one that keeps
// its gradients (pending = g), then w = adam(w, pending); pending = g. The
// model computes with the weights as they are at the step's start.
Trained Reference(const Scenario& s, int steps, int warmup) {
  const Plan plan = *BuildPlan(s);
  auto model = MakeMlpWorkload(plan, RunOptions{}.seed, 0);
  const size_t G = plan.param_groups.size();
  std::vector<std::vector<float>> w(G), m(G), v(G), pending(G);
  for (size_t g = 0; g < G; ++g) {
    w[g] = model->InitGroup(static_cast<int>(g));
    m[g].assign(w[g].size(), 0.0f);
    v[g].assign(w[g].size(), 0.0f);
  }
  int64_t adam_steps = 0;
  auto adam = [&](const std::vector<std::vector<float>>& grads) {
    const AdamStepConsts c = MakeAdamStep(AdamConfig{}, ++adam_steps, 1.0f);
    for (size_t g = 0; g < G; ++g)
      for (size_t i = 0; i < w[g].size(); ++i) AdamElement(w[g][i], grads[g][i], m[g][i], v[g][i], c);
  };
  // A module's groups end to end, and back.
  auto joined = [&](const PlanModule& mod, const std::vector<std::vector<float>>& of) {
    std::vector<float> out;
    for (int g : mod.param_groups) out.insert(out.end(), of[g].begin(), of[g].end());
    return out;
  };
  Trained t;
  for (int step = 0; step < steps; ++step) {
    model->StartStep(step);
    for (size_t k = 0; k < plan.modules.size(); ++k)
      model->Forward(0, static_cast<int>(k), joined(plan.modules[k], w).data());
    std::vector<std::vector<float>> grads(G);
    double loss = 0;
    for (size_t k = plan.modules.size(); k-- > 0;) {
      const PlanModule& mod = plan.modules[k];
      const std::vector<float> weights = joined(mod, w);
      std::vector<float> dw(weights.size(), 0.0f);
      loss += model->Backward(0, static_cast<int>(k), weights.data(), dw.data(), 1.0f);
      size_t at = 0;
      for (int g : mod.param_groups) {
        grads[g].assign(dw.begin() + static_cast<std::ptrdiff_t>(at),
                        dw.begin() + static_cast<std::ptrdiff_t>(at + w[g].size()));
        at += w[g].size();
      }
    }
    t.losses.push_back(loss);
    if (step < warmup) {
      adam(grads);
    } else if (step == warmup) {
      pending = grads;
    } else {
      adam(pending);
      pending = grads;
    }
  }
  Sha256 h;
  for (const auto& g : w) h.Update(g.data(), g.size() * sizeof(float));
  t.digest = Sha256::Hex(h.Finish());
  return t;
}

TEST(DelayedUpdateRun, MatchesThePlainDelayedLoop) {
  constexpr int kSteps = 6;
  for (int warmup : {0, 2}) {
    const Scenario s = Offloaded(Precision::kFp32, warmup);
    auto run = Train(s, kSteps);
    ASSERT_TRUE(run.ok()) << run.status().message();
    const Trained ref = Reference(s, kSteps, warmup);
    EXPECT_EQ(run->digest, ref.digest) << "warm-up " << warmup;
    EXPECT_EQ(run->losses, ref.losses) << "warm-up " << warmup;
    // The delay changes the training: the same loop without it differs.
    EXPECT_NE(ref.digest, Reference(s, kSteps, kSteps).digest);
  }
}

// A warm-up as long as the run: every step is an ordinary one, bit for bit
// the plan without the delay (fp16 with its loss scale, two micro steps,
// two ranks' worth of code paths on one).
TEST(DelayedUpdateRun, AWarmupAsLongAsTheRunChangesNothing) {
  constexpr int kSteps = 3;
  for (int gas : {1, 2}) {
    Scenario s = Offloaded(Precision::kFp16, -1);
    s.training.gradient_accumulation_steps = gas;
    auto ordinary = Train(s, kSteps);
    ASSERT_TRUE(ordinary.ok()) << ordinary.status().message();
    s.policy.delayed_update_warmup = kSteps;
    auto warm = Train(s, kSteps);
    ASSERT_TRUE(warm.ok()) << warm.status().message();
    EXPECT_EQ(warm->digest, ordinary->digest) << "gas " << gas;
    EXPECT_EQ(warm->losses, ordinary->losses) << "gas " << gas;
    s.policy.delayed_update_warmup = 1;  // and with the delay, other weights
    auto delayed = Train(s, kSteps);
    ASSERT_TRUE(delayed.ok()) << delayed.status().message();
    EXPECT_NE(delayed->digest, ordinary->digest) << "gas " << gas;
  }
}

// Checkpoints would lose the pending gradients: refused by name.
TEST(DelayedUpdateRun, CheckpointsAreRefused) {
  auto plan = BuildPlan(Offloaded(Precision::kFp32, 1));
  ASSERT_TRUE(plan.ok());
  auto env = NewMemEnv();
  RunOptions o;
  o.steps = 2;
  o.env = env.get();
  o.save_every = 1;
  o.checkpoint_dir = std::string(testing::BinaryDir()) + "/tmp/dpu_ckpt";
  auto r = RunTraining(*plan, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("policy.delayed_update"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace strata::exec
