// ZeRO stages 1-2 as DeepSpeed's stage_1_and_2.py runs them
// (planner_flat.cc): one flat buffer cut across ranks, buckets all-reduced
// with each rank keeping its own slices, the owner-rank offload traffic.
//
// MLP [8, 8, 8, 8, 4] in fp16, one group per tensor: fc0-fc2 weights 64
// elements and biases 8, fc3 weight 32 and bias 4; 252 in all, flat
// offsets fc0.w 0, fc0.b 64, fc1.w 72, fc1.b 136, fc2.w 144, fc2.b 208,
// fc3.w 216, fc3.b 248. Two ranks: the flat buffer is padded to a multiple
// of 2 x 2 (252 already is) and cut at 126:
//   rank 0 owns [0, 126):   fc0.w, fc0.b, fc1.w [72, 126) (54 of its 64);
//   rank 1 owns [126, 252): fc1.w [126, 136) (10), fc1.b, fc2.*, fc3.*.
// reduce_bucket_size 100, stage 2, backward order (each module's weight,
// then bias): fc3.w 32 + fc3.b 4 + fc2.w 64 = 100 fill a bucket; fc2.b
// would overflow it, so it is reduced (after fc2's backward) and fc2.b
// starts the next: + fc1.w 64 + fc1.b 8 = 80; fc0.w would overflow it:
// reduced before fc0's backward; fc0.w + fc0.b = 72 at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "strata/cost/bound.h"
#include "strata/plan/plan.h"
#include "strata/plan/plan_json.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata {
namespace {

Scenario Mlp4(int stage, OffloadDevice optim, int micro_steps = 1) {
  Scenario s;
  s.name = "stage12-mlp";
  s.model.kind = ModelKind::kMlp;
  s.model.sizes = {8, 8, 8, 8, 4};
  testing::RoomyHardware(s, 2);
  s.zero.stage = stage;
  s.zero.overlap_comm = false;
  s.zero.reduce_bucket_size = Elements(100);
  s.zero.offload_optimizer.device = optim;
  s.training.gradient_accumulation_steps = micro_steps;
  return s;
}

using testing::MustPlanValid;

// Bytes rank `r` moves per op kind, over the iteration.
std::map<OpKind, int64_t> RankBytes(const Plan& p, int r) {
  std::map<OpKind, int64_t> b;
  for (const Op& op : p.ops) b[op.kind] += OpBytesOnRank(op, r);
  return b;
}

const Buffer* Named(const Plan& p, const std::string& name) {
  for (const Buffer& b : p.buffers)
    if (b.name == name) return &b;
  return nullptr;
}

TEST(Stage12, FlatBufferIsCutAcrossRanks) {
  const Plan p = MustPlanValid(Mlp4(2, OffloadDevice::kNone));
  EXPECT_EQ(p.flat_partition.v, 126);
  ASSERT_EQ(p.param_groups.size(), 8u);
  EXPECT_EQ(p.param_groups[2].flat_offset.v, 72);  // whole tensors, in order
  EXPECT_EQ(p.param_groups[6].flat_offset.v, 216);
  EXPECT_EQ(Named(p, "param16.replica")->bytes.v, 252 * 2);
  EXPECT_EQ(Named(p, "master32")->bytes.v, 126 * 4);
  // copy_grads_in_partition: the full numel of every tensor overlapping the
  // partition, for the larger rank: rank 1 overlaps fc1.w, fc1.b, fc2.*,
  // fc3.* = 64 + 8 + 72 + 36 = 180.
  EXPECT_EQ(Named(p, "grad.partition")->bytes.v, 180 * 2);
}

// Stage 2 without offload: one all-reduce per bucket of the bucket's bytes
// (not a reduce-scatter: use_multi_rank_bucket_allreduce), in backward order;
// each rank keeps the slices it owns; the step's output goes into the
// rank's slice and the whole flat buffer is gathered.
TEST(Stage12, BucketsAreAllReducedAndOwnersKeepTheirSlices) {
  const Plan p = MustPlanValid(Mlp4(2, OffloadDevice::kNone));
  std::vector<std::pair<std::string, int64_t>> reduces;
  for (const Op& op : p.ops) {
    EXPECT_NE(op.kind, OpKind::kReduceScatter) << op.name;
    if (op.kind == OpKind::kAllReduce) reduces.push_back({op.name, op.bytes.v});
  }
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"m0.reduce.fc3.weight", 100 * 2}, {"m0.reduce.fc2.bias", 80 * 2}, {"m0.reduce.fc0.weight", 72 * 2}};
  EXPECT_EQ(reduces, want);
  // The second bucket holds fc2.b (bucket [0, 8)), fc1.w ([8, 72)), fc1.b
  // ([72, 80)). fc1.w is cut: flat [72, 126) kept by rank 0 (at element 72
  // of its partition), [126, 136) by rank 1 (at 0 of its partition).
  int checked = 0;
  for (const Op& op : p.ops) {
    if (op.name != "m0.reduce.fc2.bias") continue;
    ++checked;
    ASSERT_EQ(op.moves.size(), 4u);
    EXPECT_EQ(op.moves[0].rank, 1);  // fc2.b: flat 208, at 82 of rank 1's partition
    EXPECT_EQ(op.moves[0].dst.offset.v, 82 * 2);
    EXPECT_EQ(op.moves[1].rank, 0);
    EXPECT_EQ(op.moves[1].src.offset.v, 8 * 2);
    EXPECT_EQ(op.moves[1].dst.offset.v, 72 * 2);
    EXPECT_EQ(op.moves[1].dst.bytes.v, 54 * 2);
    EXPECT_EQ(op.moves[2].rank, 1);
    EXPECT_EQ(op.moves[2].src.offset.v, (8 + 54) * 2);
    EXPECT_EQ(op.moves[2].dst.offset.v, 0);
    EXPECT_EQ(op.moves[2].dst.bytes.v, 10 * 2);
  }
  EXPECT_EQ(checked, 1);
  // Their copy kernels (reads plus writes): the div_ of the bucket, and
  // unless the bucket is one slice of one owner (average_tensor merges
  // them: a view, copied back onto itself), the flattening copy and the
  // copy back of the rank's own slices (the mean over the ranks).
  std::map<std::string, int64_t> copies;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kAllReduce) copies[op.name] = op.copy_bytes.v;
  EXPECT_EQ(copies["m0.reduce.fc3.weight"], 2 * 200);                          // all rank 1's
  EXPECT_EQ(copies["m0.reduce.fc2.bias"], 2 * 160 + 2 * 160 + 2 * (160 / 2));  // ranks 1, 0, 1
  EXPECT_EQ(copies["m0.reduce.fc0.weight"], 2 * 144);                          // all rank 0's
  int64_t gathered = 0;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kAllGather) gathered += op.bytes.v;
  EXPECT_EQ(gathered, 252 * 2);
}

// ZeRO-Offload: only the owner copies a slice to the CPU, as fp32, at the
// boundary; each rank's D2H over the iteration is 4 B per owned element, and
// in the first flush (fc3.*, fc2.w: backward order) rank 0 copies nothing.
TEST(Stage12, OwnerRankOffloadTraffic) {
  Scenario s = Mlp4(2, OffloadDevice::kCpu);
  s.zero.offload_optimizer.pin_memory = true;
  const Plan p = MustPlanValid(s);
  for (int r = 0; r < 2; ++r) {
    auto b = RankBytes(p, r);
    EXPECT_EQ(b[OpKind::kCopyD2H], 126 * 4) << "rank " << r;
    EXPECT_EQ(b[OpKind::kCopyH2D], 126 * 2) << "rank " << r;  // bit16 partition up
  }
  std::vector<std::pair<int64_t, int64_t>> per_flush;  // (rank 0, rank 1) bytes
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kCopyD2H) per_flush.push_back({OpBytesOnRank(op, 0), OpBytesOnRank(op, 1)});
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 100 * 4}, {54 * 4, (8 + 10 + 8) * 4}, {72 * 4, 0}};
  EXPECT_EQ(per_flush, want);
  // The pinned CPU copy of the partition, the temporaries of the largest
  // tensor (64 elements), no accumulator with one micro step.
  EXPECT_EQ(Named(p, "param16.partition.cpu")->bytes.v, 126 * 2);
  EXPECT_EQ(Named(p, "grad.offload.gpu_temp")->bytes.v, 64 * 2);
  EXPECT_EQ(Named(p, "grad32")->bytes.v, 126 * 4);
  EXPECT_TRUE(Named(p, "master32")->pinned);
  EXPECT_FALSE(Named(p, "adam.moments")->pinned);
  EXPECT_EQ(Named(p, "grad.accum.cpu"), nullptr);
  EXPECT_TRUE(Named(p, "param16.partition.cpu")->pinned);
  EXPECT_TRUE(Named(p, "grad32")->pinned);
}

// Stage 2, two micro steps: the low-precision CPU accumulator gets every
// owned slice each micro step (2 B per element), and after the first one
// the sum comes back up first; the fp32 copy only at the boundary.
// With overlap_comm the micro steps' copies overlap: the accumulator's
// slices of different ranks share offsets (one rank's fc1 slice and the
// other's fc2), which the validator must not call a hazard.
TEST(Stage12, OffloadAccumulatesThroughTheCpu) {
  for (bool overlap : {false, true}) {
    Scenario s = Mlp4(2, OffloadDevice::kCpu, 2);
    s.zero.overlap_comm = overlap;
    const Plan p = MustPlanValid(s);
    EXPECT_EQ(Named(p, "grad.accum.cpu")->bytes.v, 180 * 2);
    for (int r = 0; r < 2; ++r) {
      auto b = RankBytes(p, r);
      EXPECT_EQ(b[OpKind::kCopyD2H], 2 * 126 * 2 + 126 * 4) << "rank " << r;
      EXPECT_EQ(b[OpKind::kCopyH2D], 126 * 2 + 126 * 2) << "rank " << r;
    }
    // The sum is added to the gradient on the GPU after it arrives
    // (async_accumulate_grad_in_cpu_via_gpu's add_): 3 bytes of HBM
    // traffic a byte copied; no other copy carries kernels.
    int accum = 0;
    for (const Op& op : p.ops) {
      if (op.kind != OpKind::kCopyH2D && op.kind != OpKind::kCopyD2H) continue;
      const bool up = op.name.ends_with(".accum_h2d");
      accum += up;
      EXPECT_EQ(op.copy_bytes.v, up ? 3 * op.bytes.v : 0) << op.name;
    }
    EXPECT_GT(accum, 0);
  }
}

// Stage 1 reduces once, at the boundary, in group order (reduce_gradients).
TEST(Stage12, Stage1ReducesOnceInGroupOrder) {
  const Plan p = MustPlanValid(Mlp4(1, OffloadDevice::kCpu, 2));
  std::vector<std::string> reduces;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kAllReduce) reduces.push_back(op.name);
  const std::vector<std::string> want = {"m1.reduce.replica.0", "m1.reduce.replica.1", "m1.reduce.replica.2",
                                         "m1.reduce.replica.3"};
  EXPECT_EQ(reduces, want);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(RankBytes(p, r)[OpKind::kCopyD2H], 126 * 4) << "rank " << r;
}

// The resource bound counts each rank's own copies: D2H is the busiest
// rank's 2 copies (either rank: two of the three flushes) of 504 bytes, not
// all 3.
TEST(Stage12, BoundCountsTheBusiestRanksCopies) {
  Scenario s = Mlp4(2, OffloadDevice::kCpu);
  s.hardware.pcie.bandwidth = Bandwidth{1e9};
  s.hardware.pcie.latency = Seconds{1e-3};
  const Plan p = MustPlanValid(s);
  const ResourceBound b = ComputeResourceBound(p, s.hardware);
  double d2h = -1;
  for (const auto& r : b.resources)
    if (r.resource == "d2h") d2h = r.seconds;
  EXPECT_NEAR(d2h, 2e-3 + 504 / 1e9, 1e-12);
}

// Stage 1's buckets reuse one buffer (no overlap_comm): each bucket's
// all-reduce waits for the previous bucket's last copy.
TEST(Stage12, Stage1BucketsWaitForThePreviousReduction) {
  const Plan p = MustPlanValid(Mlp4(1, OffloadDevice::kCpu));
  OpId previous_last = -1;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAllReduce && previous_last >= 0) {
      EXPECT_NE(std::find(op.deps.begin(), op.deps.end(), previous_last), op.deps.end()) << op.name;
    }
    if (op.kind == OpKind::kCopyD2H) previous_last = op.id;
  }
  EXPECT_GE(previous_last, 0);
}

TEST(Stage12, RankMovesRoundTripThroughJson) {
  const Plan p = MustPlanValid(Mlp4(2, OffloadDevice::kCpu, 2));
  auto back = DecodePlan(EncodePlan(p));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, p);
}

// Stage 0 (no ZeRO) runs the engine's fallback all-reduce and FP16_Optimizer.
// Two ranks, MLP above: the four groups (252 elements) are far below
// MEMORY_OPT_ALLREDUCE_SIZE (5e8), so one bucket: one all-reduce of 504
// bytes through a transient flat copy of the same size (allreduce_and_copy).
// The step casts each fp16 gradient to fp32 (252 x 4 B) and flattens them
// into one fp32 gradient (252 x 4 B), both dropped at the step's end.
TEST(Stage0, EngineAllReduceAndFp16OptimizerStep) {
  const Plan p = MustPlanValid(Mlp4(0, OffloadDevice::kNone));
  int reductions = 0;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kAllReduce) continue;
    ++reductions;
    EXPECT_EQ(op.bytes.v, 252 * 2);
    ASSERT_EQ(op.allocs.size(), 1u);
    EXPECT_EQ(p.buffers[op.allocs[0]].bytes.v, 252 * 2);
    EXPECT_EQ(op.frees, op.allocs);
    // allreduce_bucket's flatten and mul_, allreduce_and_copy's copy back.
    EXPECT_EQ(op.copy_bytes.v, 6 * 252 * 2);
  }
  EXPECT_EQ(reductions, 1);
  const Op* step = nullptr;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kOptimizerStep) step = &op;
  ASSERT_NE(step, nullptr);
  std::vector<std::string> transient;
  for (BufferId b : step->allocs) {
    transient.push_back(p.buffers[b].name);
    EXPECT_EQ(p.buffers[b].bytes.v, 252 * 4);
    EXPECT_EQ(p.buffers[b].tier, Tier::kGpu);
  }
  EXPECT_EQ(transient, (std::vector<std::string>{"step.grad32", "step.grad32.cast"}));
  EXPECT_EQ(step->frees, step->allocs);
  // fp32 training has no FP16_Optimizer (engine.py: no wrapper): no casts.
  Scenario fp32 = Mlp4(0, OffloadDevice::kNone);
  fp32.training.precision = Precision::kFp32;
  for (const Op& op : MustPlanValid(fp32).ops) {
    if (op.kind == OpKind::kOptimizerStep) {
      EXPECT_TRUE(op.allocs.empty());
    }
  }
}

// Stage 0 with an offloaded optimizer is not a DeepSpeed configuration:
// the planner refuses it even when the caller skipped CheckScenario.
TEST(Stage0, PlannerRefusesOffloadWithoutZero) {
  auto p = BuildPlan(Mlp4(0, OffloadDevice::kCpu));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(p.status().message().find("stage >= 1"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace strata
