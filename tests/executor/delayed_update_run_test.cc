// strata run with a delayed parameter update (policy.delayed_update,
// docs/dpu.md) against the delayed-update loop written plainly here: the
// MLP workload's forward and backward, Adam element by element
// (adam_math.h), fp16's rounding and dynamic loss scale; the warm-up's
// ordinary steps, one step that only keeps its gradients, then every step
// applying the previous step's gradients (at the loss scale they were
// computed with, skipped if they overflowed). The weights' digest, every
// step's loss, loss scale and skip must be the same.
#include <gtest/gtest.h>

#include <cmath>
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

// The MLP on one rank, ZeRO-2 with the optimizer on the CPU, one micro
// step: the loop's arithmetic is then the workload's, the casts and Adam's.
Scenario Offloaded(Precision precision, int warmup, std::vector<int64_t> sizes = {64, 48, 10}, int batch = 4) {
  Scenario s = testing::Builtin("seed");
  s.model.sizes = std::move(sizes);
  s.training.micro_batch_size = batch;
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
  std::vector<double> losses, loss_scale;
  std::vector<bool> skipped;
};

Result<Trained> Train(const Scenario& s, int steps) {
  STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s));
  auto env = NewMemEnv();
  RunOptions o;
  o.steps = steps;
  o.env = env.get();
  o.engine = IoEngineKind::kSync;
  STRATA_ASSIGN_OR_RETURN(auto r, RunTraining(plan, o));
  return Trained{r.weights_digest, r.losses, r.loss_scale, r.step_skipped};
}

// The reference, `warmup` < 0 for no delay. The model computes with the
// low-precision weights as they are at the step's start.
Trained Reference(const Scenario& s, int steps, int warmup) {
  const Plan plan = *BuildPlan(s);
  const bool fp16 = s.training.precision == Precision::kFp16;
  auto low = [&](float x) { return fp16 ? HalfToFloat(FloatToHalf(x)) : x; };  // fp32: as it is
  auto model = MakeMlpWorkload(plan, RunOptions{}.seed, 0);
  const size_t G = plan.param_groups.size();
  using Groups = std::vector<std::vector<float>>;
  Groups w(G), m(G), v(G), p(G);
  for (size_t g = 0; g < G; ++g) {
    w[g] = model->InitGroup(static_cast<int>(g));
    m[g].assign(w[g].size(), 0.0f);
    v[g].assign(w[g].size(), 0.0f);
  }
  auto cast = [&] {
    for (size_t g = 0; g < G; ++g) {
      p[g].resize(w[g].size());
      for (size_t i = 0; i < w[g].size(); ++i) p[g][i] = low(w[g][i]);
    }
  };
  cast();
  int64_t adam_steps = 0;
  auto adam = [&](const Groups& grads, float scale) {
    const AdamStepConsts c = MakeAdamStep(AdamConfig{}, ++adam_steps, 1.0f / scale);
    for (size_t g = 0; g < G; ++g)
      for (size_t i = 0; i < w[g].size(); ++i) AdamElement(w[g][i], grads[g][i], m[g][i], v[g][i], c);
    cast();
  };
  // A module's groups end to end.
  auto joined = [&](const PlanModule& mod, const Groups& of) {
    std::vector<float> out;
    for (int g : mod.param_groups) out.insert(out.end(), of[g].begin(), of[g].end());
    return out;
  };
  struct Gradients {
    Groups g;
    float scale = 1;
    bool overflow = false;
  } pending;
  float scale = fp16 ? 65536.0f : 1.0f;  // the executor's initial scale (DeepSpeed's 2^16)
  int good = 0;
  Trained t;
  for (int step = 0; step < steps; ++step) {
    model->StartStep(step);
    for (size_t k = 0; k < plan.modules.size(); ++k) model->Forward(0, static_cast<int>(k), joined(plan.modules[k], p).data());
    Gradients now{Groups(G), scale, false};
    double loss = 0;
    for (size_t k = plan.modules.size(); k-- > 0;) {
      const PlanModule& mod = plan.modules[k];
      const std::vector<float> weights = joined(mod, p);
      std::vector<float> dw(weights.size(), 0.0f);
      loss += model->Backward(0, static_cast<int>(k), weights.data(), dw.data(), scale);
      size_t at = 0;
      for (int g : mod.param_groups) {
        for (size_t i = 0; i < w[g].size(); ++i) {
          now.g[g].push_back(low(dw[at + i]));  // stored in the low precision, widened for Adam
          now.overflow = now.overflow || !std::isfinite(now.g[g].back());
        }
        at += w[g].size();
      }
    }
    t.losses.push_back(loss);
    t.loss_scale.push_back(scale);
    bool applied = false;
    if (warmup < 0 || step < warmup) {
      if (!now.overflow) adam(now.g, now.scale), applied = true;
    } else if (step > warmup && !pending.overflow) {
      adam(pending.g, pending.scale), applied = true;
    }
    if (warmup >= 0 && step >= warmup) pending = now;
    t.skipped.push_back(!applied);
    // DeepSpeed's dynamic scaler, on this step's gradients.
    if (now.overflow) {
      good = 0;
      if (fp16) scale = std::max(1.0f, scale / 2);
    } else if (fp16 && ++good == 1000) {
      scale *= 2;
      good = 0;
    }
  }
  Sha256 h;
  for (const auto& g : w) h.Update(g.data(), g.size() * sizeof(float));
  t.digest = Sha256::Hex(h.Finish());
  return t;
}

void ExpectSame(const Trained& run, const Trained& ref, const std::string& what) {
  EXPECT_EQ(run.digest, ref.digest) << what;
  EXPECT_EQ(run.losses, ref.losses) << what;
  EXPECT_EQ(run.loss_scale, ref.loss_scale) << what;
  EXPECT_EQ(run.skipped, ref.skipped) << what;
}

TEST(DelayedUpdateRun, MatchesThePlainDelayedLoop) {
  constexpr int kSteps = 6;
  for (int warmup : {0, 2}) {
    const Scenario s = Offloaded(Precision::kFp32, warmup);
    auto run = Train(s, kSteps);
    ASSERT_TRUE(run.ok()) << run.status().message();
    const Trained ref = Reference(s, kSteps, warmup);
    ExpectSame(*run, ref, "fp32, warm-up " + std::to_string(warmup));
    // The delay changes the training: the same loop without it differs.
    EXPECT_NE(ref.digest, Reference(s, kSteps, -1).digest);
  }
}

// fp16 on the seed's MLP with one sample a step, whose first gradients
// overflow at the initial scale: the pending gradients carry their scale
// and their overflow to the step that applies them. The loop without the
// delay is first checked against the ordinary plan's run.
TEST(DelayedUpdateRun, Fp16CarriesTheScaleAndTheOverflowOfThePendingGradients) {
  constexpr int kSteps = 5;
  Scenario s = Offloaded(Precision::kFp16, -1, {1000, 1000, 10}, 1);
  auto ordinary = Train(s, kSteps);
  ASSERT_TRUE(ordinary.ok()) << ordinary.status().message();
  ExpectSame(*ordinary, Reference(s, kSteps, -1), "fp16, no delay");
  ASSERT_TRUE(ordinary->skipped[0]) << "the scenario's first step no longer overflows";
  for (int warmup : {0, 1}) {
    s.policy.delayed_update_warmup = warmup;
    auto run = Train(s, kSteps);
    ASSERT_TRUE(run.ok()) << run.status().message();
    ExpectSame(*run, Reference(s, kSteps, warmup), "fp16, warm-up " + std::to_string(warmup));
  }
}

// The dynamic scale doubles after 1000 steps without overflow: the step
// after the doubling applies gradients computed at the old scale. A small
// MLP, 1150 steps, past its one overflow (step 140) and the doubling after.
TEST(DelayedUpdateRun, PendingGradientsKeepTheScaleTheyWereComputedAt) {
  constexpr int kSteps = 1150;
  const Scenario s = Offloaded(Precision::kFp16, 0, {16, 16, 4}, 2);
  const Trained ref = Reference(s, kSteps, 0);
  bool doubled = false;
  for (size_t i = 1; i < ref.loss_scale.size(); ++i) doubled = doubled || ref.loss_scale[i] > ref.loss_scale[i - 1];
  ASSERT_TRUE(doubled) << "the scale no longer doubles within the run: lengthen it";
  auto run = Train(s, kSteps);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ExpectSame(*run, ref, "1150 steps");
}

// A warm-up as long as the run: every step is an ordinary one, bit for bit
// the plan without the delay (fp16, one and two micro steps).
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
    ExpectSame(*warm, *ordinary, "gas " + std::to_string(gas));
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
