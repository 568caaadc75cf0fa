// Activation checkpoints (docs/fidelity.md): where DeepSpeed copies CPU
// checkpoints on each of its paths (checkpointing.py), and Megatron-LM
// v1.1.5-ZeRO3's split_transformers (two checkpoint segments per layer).
#include <gtest/gtest.h>

#include <algorithm>

#include "strata/core/model.h"
#include "strata/plan/plan.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::MustPlanValid;

using testing::DependsOn;
using testing::FindBuffer;
using testing::FindOp;
using testing::Order;
int64_t Named(const Plan& p, const std::string& needle) {
  return std::count_if(p.ops.begin(), p.ops.end(),
                       [&](const Op& op) { return op.name.find(needle) != std::string::npos; });
}

// cpu_checkpointing as DeepSpeed runs it (checkpointing.py
// CheckpointFunction). With partition_activations: the checkpoint is copied
// into pageable CPU memory on the compute stream, and back on the compute
// stream right before its recomputation. Without (current DeepSpeed's
// _ActivationOffloadEngine): pinned, on a side stream, the newest
// checkpoint kept on the GPU (layer l leaves after layer l + 1's forward),
// back when the recomputation asks. v0.5 (before that engine): blocking
// either way. Strata's policy.prefetch_checkpoints: pinned, on the copy
// streams, layer l - 1's checkpoint coming back while layer l recomputes.
TEST(Checkpoints, CpuCopiesFollowDeepSpeedsPaths) {
  enum Mode { kBlocking, kEngine, kPrefetch, kV05 };
  for (const Mode mode : {kBlocking, kEngine, kPrefetch, kV05}) {
    SCOPED_TRACE(mode);
    Scenario s = testing::SmallGpt(3, 1);
    s.training.activation_checkpointing = true;
    s.training.cpu_checkpointing = true;
    s.training.partition_activations = mode == kBlocking;
    s.policy.prefetch_checkpoints = mode == kPrefetch;
    if (mode == kV05) s.policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
    const Plan p = MustPlanValid(s);
    const int L = s.model.layers;
    for (int l = 0; l < L; ++l) {
      SCOPED_TRACE(l);
      const std::string layer = "layer" + std::to_string(l);
      const bool moves = mode == kEngine ? l + 1 < L : true;
      const bool blocking = mode == kBlocking || mode == kV05;
      const Buffer* cpu = FindBuffer(p, "m0.ckpt_cpu." + layer);
      ASSERT_EQ(cpu != nullptr, moves);
      if (!moves) continue;
      const Op& d2h = *FindOp(p, "m0.ckpt_d2h." + layer);
      const Op& h2d = *FindOp(p, "m0.ckpt_h2d." + layer);
      EXPECT_EQ(d2h.stream, blocking ? Stream::kCompute : Stream::kD2H);
      EXPECT_EQ(h2d.stream, blocking ? Stream::kCompute : Stream::kH2D);
      EXPECT_TRUE(DependsOn(h2d, d2h.id));
      EXPECT_EQ(cpu->tier, Tier::kCpu);
      EXPECT_EQ(cpu->pinned, !blocking);
      EXPECT_EQ(IsPageableCopy(p, d2h), blocking);
      // The copy leaves after this layer's forward (the engine: the next one's).
      const std::string after = "layer" + std::to_string(mode == kEngine ? l + 1 : l);
      EXPECT_TRUE(DependsOn(d2h, FindOp(p, "m0.fwd." + after + ".fc2")->id));
      // The recomputation of the layer's first module waits for its copy.
      const Op& rec = *FindOp(p, "m0.recompute." + layer + ".ln1");
      EXPECT_TRUE(DependsOn(rec, h2d.id));
      if (mode != kPrefetch) {
        // Asked for by the recomputation: nothing between them.
        EXPECT_EQ(h2d.id + 1, rec.id);
      } else if (l + 1 < L) {
        // Strata: issued while the layer above recomputes.
        EXPECT_TRUE(DependsOn(h2d, FindOp(p, "m0.recompute.layer" + std::to_string(l + 1) + ".ln1")->id));
      }
    }
  }
}

// DeepSpeed's blocking CPU checkpoints are new pageable tensors every
// forward (checkpointing.py new_empty(..., device='cpu')): at 32 MiB and more
// (glibc's largest mmap threshold) each is a fresh mapping whose pages the
// host faults in before the copy lands (FreshPageBytes). Pinned buffers
// (the offload engine), smaller ones and the copy back are not.
TEST(Checkpoints, BlockingCheckpointsOf32MiBLandInFreshPages) {
  for (const bool blocking : {true, false}) {
    for (const int micro : {2, 8192}) {  // 8 KiB and 32 MiB checkpoints
      SCOPED_TRACE(std::to_string(blocking) + " micro batch " + std::to_string(micro));
      Scenario s = testing::SmallGpt(3, 1);
      s.training.activation_checkpointing = true;
      s.training.cpu_checkpointing = true;
      s.training.partition_activations = blocking;
      s.training.micro_batch_size = micro;
      const Plan p = MustPlanValid(s);
      const Op& d2h = *FindOp(p, "m0.ckpt_d2h.layer0");
      const Op& h2d = *FindOp(p, "m0.ckpt_h2d.layer0");
      ASSERT_EQ(d2h.bytes.v, int64_t{micro} * 32 * 64 * 2);
      const int64_t fresh = blocking && micro == 8192 ? int64_t{32} << 20 : 0;
      EXPECT_EQ(FreshPageBytes(p, d2h, 0), fresh);
      EXPECT_EQ(FreshPageBytes(p, d2h, -1), fresh);
      EXPECT_EQ(FreshPageBytes(p, h2d, 0), 0);
    }
  }
}

// Moves that name ranks: each rank counts the fresh buffers its own moves
// write, each whole and once (DeepSpeed touches every page of a new
// buffer); rank -1 counts every rank's.
TEST(Checkpoints, FreshPagesPerRankAndWholeBuffers) {
  Plan p;
  const int64_t mib = int64_t{1} << 20;
  p.buffers = {{0, "gpu", Tier::kGpu, StateKind::kActivation, Bytes(128 * mib), false},
               {1, "cpu.r0", Tier::kCpu, StateKind::kActivation, Bytes(64 * mib), false, false},
               {2, "cpu.r1", Tier::kCpu, StateKind::kActivation, Bytes(40 * mib), false, false}};
  Op op;
  op.kind = OpKind::kCopyD2H;
  op.allocs = {1, 2};
  // Rank 0 writes its buffer in two halves; rank 1 a part of its own.
  op.moves = {
      {Region{0, Bytes(0), Bytes(32 * mib)}, Region{1, Bytes(0), Bytes(32 * mib)}, false, false, 0},
      {Region{0, Bytes(32 * mib), Bytes(32 * mib)}, Region{1, Bytes(32 * mib), Bytes(32 * mib)}, false, false, 0},
      {Region{0, Bytes(64 * mib), Bytes(8 * mib)}, Region{2, Bytes(0), Bytes(8 * mib)}, false, false, 1}};
  EXPECT_EQ(FreshPageBytes(p, op, 0), 64 * mib);
  EXPECT_EQ(FreshPageBytes(p, op, 1), 40 * mib);
  EXPECT_EQ(FreshPageBytes(p, op, -1), 104 * mib);
  EXPECT_EQ(FreshPageBytes(p, op, 2), 0);
  p.buffers[2].bytes = Bytes(32 * mib - 4096);  // under glibc's largest mmap threshold: reused heap memory
  EXPECT_EQ(FreshPageBytes(p, op, 1), 0);
  op.allocs = {2};  // rank 0's buffer allocated by an earlier op: touched already
  EXPECT_EQ(FreshPageBytes(p, op, 0), 0);
}

// split_transformers (Megatron-LM v1.1.5-ZeRO3's ParallelTransformerLayerPart1
// and Part2, each checkpointed): layer l's attention half is segment 2l,
// its MLP half 2l + 1, each keeping its input (T x h) and recomputed from
// it right before its own backward.
TEST(Checkpoints, SplitTransformersCheckpointEachHalf) {
  Scenario s = testing::SmallGpt(3, 1);
  s.training.activation_checkpointing = true;
  s.training.split_transformers = true;
  const auto built = BuildModelGraph(s.model, s.training, s.parallelism);
  ASSERT_TRUE(built.ok()) << built.status().message();
  const ModelGraph& g = *built;
  const int L = s.model.layers;
  ASSERT_EQ(g.num_layers, 2 * L);
  const int64_t T = int64_t{s.training.micro_batch_size} * s.model.seq_length;
  for (const ModuleSpec& m : g.modules) {
    if (m.name.rfind("layer", 0) != 0) {
      EXPECT_EQ(m.layer, -1) << m.name;
      continue;
    }
    const int l = std::stoi(m.name.substr(5));
    const std::string tail = m.name.substr(m.name.find('.') + 1);
    const bool mlp = tail == "ln2" || tail == "fc1" || tail == "fc2";
    EXPECT_EQ(m.layer, 2 * l + (mlp ? 1 : 0)) << m.name;
  }
  for (const Bytes b : g.checkpoint_bytes) EXPECT_EQ(b.v, T * s.model.hidden_size * 2);
  const Plan p = MustPlanValid(s);
  EXPECT_EQ(Named(p, "m0.recompute."), 7 * L);
  for (int l = 0; l < L; ++l) {
    const std::string n = "layer" + std::to_string(l);
    // Each half recomputes right before its own backward: the MLP half's
    // recomputation follows the layer above's backward, the attention
    // half's follows this layer's MLP backward.
    const OpId rec_mlp = FindOp(p, "m0.recompute." + n + ".ln2")->id, bwd_fc2 = FindOp(p, "m0.bwd." + n + ".fc2")->id;
    const OpId bwd_ln2 = FindOp(p, "m0.bwd." + n + ".ln2")->id, rec_attn = FindOp(p, "m0.recompute." + n + ".ln1")->id;
    EXPECT_LT(rec_mlp, bwd_fc2);
    EXPECT_LT(bwd_ln2, rec_attn);
    EXPECT_LT(rec_attn, FindOp(p, "m0.bwd." + n + ".attn_out")->id);
    EXPECT_NE(FindBuffer(p, "m0.ckpt.layer" + std::to_string(2 * l)), nullptr);
    EXPECT_NE(FindBuffer(p, "m0.ckpt.layer" + std::to_string(2 * l + 1)), nullptr);
  }
  // CPU checkpoints (the blocking path): two copies each way per layer.
  s.training.cpu_checkpointing = true;
  s.training.partition_activations = true;
  const Plan c = MustPlanValid(s);
  EXPECT_EQ(Named(c, "ckpt_d2h"), 2 * L);
  EXPECT_EQ(Named(c, "ckpt_h2d"), 2 * L);
}

// synchronize_checkpoint_boundary (DeepSpeed's torch.cuda.synchronize() at
// CheckpointFunction's boundaries): a segment's first forward op waits for
// every GPU op issued before the previous segment's forward ended, the
// parameter prefetches for this segment included; without it, the
// prefetch overlaps (the check has teeth).
TEST(Checkpoints, SynchronizedBoundariesWaitForEveryGpuStream) {
  for (const bool sync : {false, true}) {
    SCOPED_TRACE(sync);
    Scenario s = testing::SmallGpt(3, 2);
    s.training.activation_checkpointing = true;
    s.training.synchronize_checkpoint_boundary = sync;
    const Plan p = MustPlanValid(s);
    const Order order(p);
    int missed = 0;
    for (int l = 1; l < s.model.layers; ++l) {
      const OpId end = FindOp(p, "m0.fwd.layer" + std::to_string(l - 1) + ".fc2")->id;
      const OpId first = FindOp(p, "m0.fwd.layer" + std::to_string(l) + ".ln1")->id;
      for (OpId x = 0; x < end; ++x) {
        const Stream st = p.ops[x].stream;
        if (st != Stream::kCompute && st != Stream::kComm && st != Stream::kH2D && st != Stream::kD2H) continue;
        if (!order.HappensBefore(x, first)) {
          ++missed;
          if (sync) {
            ADD_FAILURE() << p.ops[x].name << " does not finish before " << p.ops[first].name;
          }
        }
      }
      // The backward: the recomputation of a segment waits for the
      // reductions issued in the backward of the segment above.
      const OpId rec = FindOp(p, "m0.recompute.layer" + std::to_string(l - 1) + ".ln1")->id;
      const OpId bwd = FindOp(p, "m0.bwd.layer" + std::to_string(l) + ".ln1")->id;
      for (OpId x = bwd; x < rec; ++x) {
        if (p.ops[x].stream == Stream::kComm && !order.HappensBefore(x, rec)) {
          ++missed;
          if (sync) {
            ADD_FAILURE() << p.ops[x].name << " does not finish before " << p.ops[rec].name;
          }
        }
      }
    }
    if (!sync) {
      EXPECT_GT(missed, 0) << "no prefetch or reduction overlaps a boundary: the check proves nothing";
    }
  }
}

TEST(Checkpoints, SplitTransformersIsRefusedWhereItMeansNothing) {
  Scenario s = testing::SmallGpt(1, 2);
  s.training.split_transformers = true;
  s.parallelism.pipeline = 2;
  auto issues = CheckScenario(s);
  EXPECT_TRUE(std::any_of(issues.begin(), issues.end(),
                          [](const ScenarioIssue& i) { return i.path == "training.split_transformers"; }));
  Scenario mlp;
  mlp.model.kind = ModelKind::kMlp;
  mlp.model.sizes = {8, 8};
  testing::RoomyHardware(mlp, 1);
  mlp.training.split_transformers = true;
  issues = CheckScenario(mlp);
  EXPECT_TRUE(std::any_of(issues.begin(), issues.end(),
                          [](const ScenarioIssue& i) { return i.path == "training.split_transformers"; }));
}

// DeepSpeed v0.3.16 (policy v0.3) asserts partitioned activations with CPU
// checkpoints; later releases take them without.
TEST(Checkpoints, CpuCheckpointsNeedPartitionedActivationsUnderV03) {
  Scenario s = testing::SmallGpt(1, 1);
  s.training.activation_checkpointing = true;
  s.training.cpu_checkpointing = true;
  auto refused = [&] {
    auto issues = CheckScenario(s);
    return std::any_of(issues.begin(), issues.end(),
                       [](const ScenarioIssue& i) { return i.path == "training.cpu_checkpointing"; });
  };
  for (DeepSpeedStage3 v :
       {DeepSpeedStage3::kCurrent, DeepSpeedStage3::kV05, DeepSpeedStage3::kV03, DeepSpeedStage3::kV0313}) {
    s.policy.deepspeed_stage3 = v;
    s.training.partition_activations = false;
    EXPECT_EQ(refused(), v == DeepSpeedStage3::kV03 || v == DeepSpeedStage3::kV0313);
    s.training.partition_activations = true;
    EXPECT_FALSE(refused());
  }
}

// ZeRO-3 Offload as released (policy v0.3.13) offloads to CPU only: an
// NVMe device names its key; CPU offload passes.
TEST(Checkpoints, V0313RefusesNvmeOffload) {
  Scenario s = testing::SmallGpt(3, 1);
  s.policy.deepspeed_stage3 = DeepSpeedStage3::kV0313;
  auto paths = [&] {
    std::vector<std::string> out;
    for (const ScenarioIssue& i : CheckScenario(s)) out.push_back(i.path);
    return out;
  };
  s.zero.offload_param.device = OffloadDevice::kCpu;
  s.zero.offload_optimizer.device = OffloadDevice::kCpu;
  EXPECT_TRUE(paths().empty());
  s.hardware.nvme.capacity = Bytes(int64_t{1} << 40);
  s.zero.offload_optimizer.device = OffloadDevice::kNvme;
  EXPECT_EQ(paths(), std::vector<std::string>{"zero_optimization.offload_optimizer.device"});
  s.zero.offload_param.device = OffloadDevice::kNvme;
  EXPECT_EQ(paths().size(), 2u);
  s.policy.deepspeed_stage3 = DeepSpeedStage3::kV03;
  EXPECT_TRUE(paths().empty());
}

// Stage 3 before DeepSpeed PR #2009 (v0.3.12-v0.6.5) asserts "parameter
// offload is only available with optimizer state offload"; current lifts it.
TEST(Checkpoints, ParameterOffloadNeedsOptimizerOffloadBeforeV066) {
  Scenario s = testing::SmallGpt(3, 1);
  s.zero.offload_param.device = OffloadDevice::kCpu;
  s.zero.offload_optimizer.device = OffloadDevice::kNone;
  for (DeepSpeedStage3 v :
       {DeepSpeedStage3::kCurrent, DeepSpeedStage3::kV05, DeepSpeedStage3::kV03, DeepSpeedStage3::kV0313}) {
    s.policy.deepspeed_stage3 = v;
    std::vector<std::string> paths;
    for (const ScenarioIssue& i : CheckScenario(s)) paths.push_back(i.path);
    if (v == DeepSpeedStage3::kCurrent)
      EXPECT_TRUE(paths.empty());
    else
      EXPECT_EQ(paths, std::vector<std::string>{"zero_optimization.offload_param.device"});
  }
}

}  // namespace
}  // namespace strata
