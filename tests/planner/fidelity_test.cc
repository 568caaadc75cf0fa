// DeepSpeed fidelity of the plan (docs/fidelity.md): sub-groups, buffers per
// tier, swap-buffer checks, step order and I/O volumes, each number worked
// out by hand from DeepSpeed's rules on small MLPs.
//
// MLP [1000, 600, 600, 10]: one group per tensor, as DeepSpeed: fc0.weight
// 600,000 elements, fc0.bias 600, fc1.weight 360,000, fc1.bias 600,
// fc2.weight 6,000, fc2.bias 10 (967,210 in all). With anything on NVMe
// Strata pads partitions to 4 KiB (2048 fp16 elements): 600,064, 2,048,
// 360,448, 2,048, 6,144, 2,048 (972,800). Sub-groups of 300,000 then:
// [fc0.weight] 600,064; [fc0.bias, fc1.weight] 362,496; the rest 10,240.
#include <gtest/gtest.h>

#include <algorithm>

#include "strata/plan/plan.h"
#include "strata/plan/validator.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata {
namespace {

Scenario Mlp(std::vector<int64_t> sizes, OffloadDevice optim, int gpus = 1) {
  Scenario s;
  s.name = "fidelity-mlp";
  s.model.kind = ModelKind::kMlp;
  s.model.sizes = std::move(sizes);
  testing::RoomyHardware(s, gpus);
  s.zero.stage = 3;
  s.zero.overlap_comm = true;
  s.zero.stage3_param_persistence_threshold = Elements(0);
  s.zero.sub_group_size = Elements(300'000);
  s.zero.offload_optimizer.device = optim;
  return s;
}

using testing::MustPlanValid;

using testing::DependsOn;
using testing::FindBuffer;
using testing::FindOp;

TEST(Fidelity, SubGroupsAreWholeParameters) {
  // CPU optimizer, nothing on NVMe: no padding. sub_group_size 500,000:
  // fc0.weight (600,000 >= 500,000) closes sub-group 0; the other five
  // tensors (367,210) close at the last parameter. At 300,000: [fc0.weight],
  // [fc0.bias, fc1.weight] (360,600 >= 300,000), then the last three (6,610).
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kCpu);
  s.zero.sub_group_size = Elements(500'000);
  Plan p = MustPlanValid(s);
  EXPECT_EQ(FindOp(p, "step.sub_group0")->elements.v, 600'000);
  EXPECT_EQ(FindOp(p, "step.sub_group1")->elements.v, 367'210);
  EXPECT_EQ(FindOp(p, "step.sub_group1")->flat_begin, 600'000);
  s.zero.sub_group_size = Elements(300'000);
  p = MustPlanValid(s);
  EXPECT_EQ(FindOp(p, "step.sub_group1")->elements.v, 360'600);
  EXPECT_EQ(FindOp(p, "step.sub_group2")->elements.v, 6'610);
  // Stages 0-2 step the whole partition at once.
  s.zero.stage = 2;
  s.zero.overlap_comm = false;
  p = MustPlanValid(s);
  EXPECT_EQ(FindOp(p, "step.sub_group0")->elements.v, 967'210);
}

TEST(Fidelity, BuffersPerTier) {
  // NVMe optimizer: sub-groups of 600,064 and 362,496 elements are
  // swappable (x 4 bytes >= 1 MiB); the last, 10,240, stays in CPU memory.
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kNvme);
  const Plan p = MustPlanValid(s);
  const int64_t swapped = 600'064 + 362'496, small = 10'240;
  ASSERT_NE(FindBuffer(p, "master32"), nullptr);
  EXPECT_EQ(FindBuffer(p, "master32")->tier, Tier::kNvme);
  EXPECT_EQ(FindBuffer(p, "master32")->bytes.v, swapped * 4);
  EXPECT_EQ(FindBuffer(p, "adam.moments")->bytes.v, swapped * 8);
  EXPECT_EQ(FindBuffer(p, "grad32")->bytes.v, swapped * 4);
  ASSERT_NE(FindBuffer(p, "master32.cpu"), nullptr);
  EXPECT_EQ(FindBuffer(p, "master32.cpu")->bytes.v, small * 4);
  EXPECT_FALSE(FindBuffer(p, "master32.cpu")->pinned);  // DeepSpeed never pins the fp32 master
  EXPECT_FALSE(FindBuffer(p, "adam.moments.cpu")->pinned);
  EXPECT_EQ(FindBuffer(p, "grad32.cpu")->bytes.v, small * 4);
  // The low-precision accumulator: every partition, fp16, in CPU memory.
  EXPECT_EQ(FindBuffer(p, "grad.partition.cpu")->bytes.v, (swapped + small) * 2);
  // buffer_count (4) swap buffers of one fp32 tensor of the largest
  // sub-group (600,064 elements, already 256-aligned).
  for (int i = 0; i < 4; ++i) {
    const Buffer* b = FindBuffer(p, "swap.optim." + std::to_string(i));
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->bytes.v, 600'064 * 4);
    EXPECT_TRUE(b->pinned);
  }
  EXPECT_EQ(FindBuffer(p, "swap.optim.4"), nullptr);
}

TEST(Fidelity, WritebackBufferIsSizedFromFullNumel) {
  // offload_param nvme over 2 ranks, MLP [2000, 600, 10]: fc0.weight =
  // 1,200,000 elements, partition 600,000 (1.2 MB >= 1 MiB: NVMe), padded
  // 600,064. The sub-group with the most partition elements is
  // [fc0.weight]; DeepSpeed's write-back buffer holds the io-aligned FULL
  // numel of its parameters: ceil(1,200,000 / 512) * 512 = 1,200,128 fp16
  // elements.
  Scenario s = Mlp({2000, 600, 10}, OffloadDevice::kCpu, 2);
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_param.max_in_cpu = Elements(0);
  const Plan p = MustPlanValid(s);
  ASSERT_NE(FindBuffer(p, "swap.param.writeback"), nullptr);
  EXPECT_EQ(FindBuffer(p, "swap.param.writeback")->bytes.v, 1'200'128 * 2);
  EXPECT_EQ(p.param_groups[0].home, Tier::kNvme);
  EXPECT_EQ(p.param_groups[1].home, Tier::kCpu);  // fc0.bias: 300 x 2 B < 1 MiB, zero.Init keeps it in CPU
  // The step's NVMe-homed output goes through it in one write.
  const Op* wb = FindOp(p, "step.sub_group0.param_out.nvme_write");
  EXPECT_EQ(wb->bytes.v, 600'064 * 2);
  EXPECT_EQ(p.buffers[wb->moves.at(0).src.buffer].name, "swap.param.writeback");
}

// DeepSpeed v0.5 (policy.deepspeed_stage3 v0.5) sized the same buffer from
// the sub-group's partitions: 600,064 elements (io-aligned: 1,172 x 512).
TEST(Fidelity, V05WritebackBufferHoldsPartitions) {
  Scenario s = Mlp({2000, 600, 10}, OffloadDevice::kCpu, 2);
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_param.max_in_cpu = Elements(0);
  s.policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
  const Plan p = MustPlanValid(s);
  ASSERT_NE(FindBuffer(p, "swap.param.writeback"), nullptr);
  EXPECT_EQ(FindBuffer(p, "swap.param.writeback")->bytes.v, 600'064 * 2);
}

// DeepSpeed v0.3.16 and the ZeRO-Infinity paper's a1e9753 (policy v0.3):
// each sub-group's states are written (_release_sub_group) before its fp16
// partition, and that write is left in flight (_partitioned_params_swap_out,
// async_op=True): the next sub-group's read does not wait for it, the next
// step that reuses the write-back buffer does. Since v0.4.0 (v0.5, current)
// the fp16 write comes first and blocks.
TEST(Fidelity, V03LeavesTheFp16WriteBackInFlight) {
  for (DeepSpeedStage3 v : {DeepSpeedStage3::kV05, DeepSpeedStage3::kV03, DeepSpeedStage3::kCurrent}) {
    // fc0.weight and fc1.weight (1M elements, 2 MB each) live on NVMe, in
    // sub-groups 0 and 1.
    Scenario s = Mlp({1000, 1000, 1000, 10}, OffloadDevice::kNvme);
    s.zero.offload_param.device = OffloadDevice::kNvme;
    s.zero.offload_param.max_in_cpu = Elements(0);
    s.policy.deepspeed_stage3 = v;
    const Plan p = MustPlanValid(s);
    const testing::Order order(p);
    const Op* wb0 = FindOp(p, "step.sub_group0.param_out.nvme_write");
    const Op* w0 = FindOp(p, "step.sub_group0.write");
    const Op* r1 = FindOp(p, "step.sub_group1.read");
    const bool v03 = v == DeepSpeedStage3::kV03;
    SCOPED_TRACE(v03 ? "v0.3" : "later");
    EXPECT_EQ(order.HappensBefore(wb0->id, w0->id), !v03);
    EXPECT_EQ(order.HappensBefore(w0->id, wb0->id), v03);
    EXPECT_EQ(order.HappensBefore(wb0->id, r1->id), !v03);
    EXPECT_TRUE(order.HappensBefore(w0->id, r1->id));
    // synchronize_writes before the buffer's next use, by sub-group 1.
    FindOp(p, "step.sub_group1.param_out.nvme_write");
    EXPECT_TRUE(order.HappensBefore(wb0->id, FindOp(p, "step.sub_group1")->id));
    EXPECT_EQ(wb0->bytes.v, FindOp(p, "step.sub_group0")->elements.v * 2);
    // With pipeline_write the states' write is left in flight as well: the
    // next step waits for the fp16 write (its buffer), not for the states.
    s.zero.offload_optimizer.pipeline_read = s.zero.offload_optimizer.pipeline_write = true;
    s.zero.offload_optimizer.buffer_count = 8;
    const Plan q = MustPlanValid(s);
    const testing::Order qo(q);
    EXPECT_FALSE(qo.HappensBefore(FindOp(q, "step.sub_group0.write")->id, FindOp(q, "step.sub_group1")->id));
    EXPECT_TRUE(
        qo.HappensBefore(FindOp(q, "step.sub_group0.param_out.nvme_write")->id, FindOp(q, "step.sub_group1")->id));
  }
}

// stage3.py _post_step (a1e9753, v0.5.4, v0.6.0, master): the persistent
// parameters are gathered once, after the sub-group loop; nothing inside
// the loop is a collective, so no sub-group waits for another rank. Two
// ranks, persistence threshold 1,000: the three biases (600, 600, 10) are
// persistent; each rank's partition is half of every tensor, so with
// sub-groups of 100,000: [fc0.weight], [fc0.bias, fc1.weight], [fc1.bias,
// fc2.weight, fc2.bias]: persistent shards complete in sub-groups 1 and 2.
TEST(Fidelity, PersistentParametersAreGatheredOnceAfterTheStep) {
  for (OffloadDevice d : {OffloadDevice::kCpu, OffloadDevice::kNvme}) {
    Scenario s = Mlp({1000, 600, 600, 10}, d, /*gpus=*/2);
    s.zero.stage3_param_persistence_threshold = Elements(1000);
    s.zero.sub_group_size = Elements(100'000);
    const Plan p = MustPlanValid(s);
    const testing::Order order(p);
    std::vector<const Op*> step, gathers;
    for (const Op& o : p.ops) {
      if (o.name.rfind("step.", 0) != 0) continue;
      if (o.kind == OpKind::kOptimizerStep) step.push_back(&o);
      if (IsCollective(o.kind)) gathers.push_back(&o);
    }
    ASSERT_EQ(step.size(), 3u);
    ASSERT_EQ(gathers.size(), 1u);
    const Op& ag = *gathers[0];
    EXPECT_EQ(ag.name, "step.persistent.allgather");
    EXPECT_EQ(ag.kind, OpKind::kAllGather);
    EXPECT_EQ(ag.moves.size(), 3u);  // each bias's shard to its home
    for (const Op* st : step) EXPECT_TRUE(order.HappensBefore(st->id, ag.id)) << st->name;
    // What it gathers is written before it (the step, or with the CPU
    // optimizer the copy up to the GPU buffer), and nothing in the loop
    // waits for it.
    const BufferId out = FindBuffer(p, "param16.out")->id;
    int writers = 0;
    for (const Op& o : p.ops) {
      if (o.name.rfind("step.sub_group", 0) != 0) continue;
      EXPECT_FALSE(order.HappensBefore(ag.id, o.id)) << o.name;
      if (std::find(o.writes.begin(), o.writes.end(), out) == o.writes.end()) continue;
      ++writers;
      EXPECT_TRUE(order.HappensBefore(o.id, ag.id)) << o.name;
    }
    EXPECT_GE(writers, 2);  // sub-groups 1 and 2
  }
}

TEST(Fidelity, ParamHomesFollowZeroInit) {
  // offload_param nvme, 1 rank: fc0.weight's partition (1.2 MB) goes to
  // NVMe; every other tensor (fc1.weight 720 KB, the biases) stays in CPU
  // memory. max_in_cpu 400,000: no sub-group fits (the first is 600,064),
  // but the flat buffer of 400,000 elements is allocated and pinned anyway.
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kCpu);
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_param.pin_memory = false;
  s.zero.offload_param.max_in_cpu = Elements(400'000);
  Plan p = MustPlanValid(s);
  EXPECT_EQ(p.param_groups[0].home, Tier::kNvme);
  EXPECT_EQ(p.param_groups[1].home, Tier::kCpu);
  ASSERT_NE(FindBuffer(p, "param16.flat.cpu"), nullptr);
  EXPECT_EQ(FindBuffer(p, "param16.flat.cpu")->bytes.v, 400'000 * 2);
  EXPECT_TRUE(FindBuffer(p, "param16.flat.cpu")->pinned);
  EXPECT_FALSE(FindBuffer(p, "param16.partition.cpu")->pinned);  // pin_memory false
  EXPECT_EQ(FindBuffer(p, "param16.partition.cpu")->bytes.v, (972'800 - 600'064) * 2);
  // max_in_cpu 1e6: every sub-group (600,064; +362,496; +10,240) fits.
  s.zero.offload_param.max_in_cpu = Elements(1'000'000);
  p = MustPlanValid(s);
  for (const auto& g : p.param_groups) EXPECT_EQ(g.home, Tier::kCpu) << g.name;
  EXPECT_EQ(FindBuffer(p, "param16.partition.nvme"), nullptr);
  // Persistence is full numel <= threshold, per tensor: at 6,000 fc2.weight
  // and every bias, not fc1.weight.
  s.zero.stage3_param_persistence_threshold = Elements(6'000);
  p = MustPlanValid(s);
  EXPECT_TRUE(p.param_groups[4].persistent);
  EXPECT_TRUE(p.param_groups[1].persistent);
  EXPECT_TRUE(p.param_groups[5].persistent);
  EXPECT_FALSE(p.param_groups[2].persistent);
}

TEST(Fidelity, BufferSizeCheckCoversEveryNvmePartition) {
  // zero.Init swaps fc0.weight (600,000 elements) through a param buffer
  // even when max_in_cpu later keeps it in CPU: buffer_size 500,000 fails.
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kCpu);
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_param.max_in_cpu = Elements(1'000'000);
  s.zero.offload_param.buffer_size = Elements(500'000);
  auto r = BuildPlan(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);  // exit 2: the config, not the memory
  EXPECT_NE(r.status().message().find("DeepSpeed would refuse this config [buffer_size_too_small]"), std::string::npos);
  EXPECT_NE(r.status().message().find("More elements 600000 than buffer size 500000"), std::string::npos)
      << r.status().message();
  s.zero.offload_param.buffer_size = Elements(600'000);  // numel <= buffer_size passes
  EXPECT_TRUE(BuildPlan(s).ok());
}

TEST(Fidelity, OptimizerBufferCountCheck) {
  // MLP [1000, 600, 600, 600, 10]: sub-groups [fc0.weight] 600,064,
  // [fc0.bias, fc1.weight] 362,496, [fc1.bias, fc2.weight] 362,496
  // (swappable), the rest 10,240. Both pipelines: 3 sets of 4 in flight = 12.
  Scenario s = Mlp({1000, 600, 600, 600, 10}, OffloadDevice::kNvme);
  auto& oo = s.zero.offload_optimizer;
  oo.pipeline_read = oo.pipeline_write = true;
  oo.buffer_count = 11;
  auto r = BuildPlan(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("PipelinedOptimizerSwapper ran out of swap buffers"), std::string::npos);
  EXPECT_NE(r.status().message().find("buffer_count >= 12"), std::string::npos);
  oo.buffer_count = 12;
  EXPECT_TRUE(BuildPlan(s).ok());
  // One pipeline: 8. None: 4.
  oo.pipeline_write = false;
  oo.buffer_count = 7;
  EXPECT_FALSE(BuildPlan(s).ok());
  oo.buffer_count = 8;
  EXPECT_TRUE(BuildPlan(s).ok());
  oo.pipeline_read = false;
  oo.buffer_count = 3;
  EXPECT_FALSE(BuildPlan(s).ok());
  oo.buffer_count = 4;
  EXPECT_TRUE(BuildPlan(s).ok());
  // One swappable sub-group: nothing to pipeline with, 4 suffice.
  Scenario one = Mlp({1000, 600, 10}, OffloadDevice::kNvme);
  one.zero.sub_group_size = Elements(1'000'000'000);
  one.zero.offload_optimizer.pipeline_read = one.zero.offload_optimizer.pipeline_write = true;
  one.zero.offload_optimizer.buffer_count = 4;
  EXPECT_TRUE(BuildPlan(one).ok());
}

// partitioned_param_swapper.py swap_in: "No swap buffers to allocate for
// fp16 param" when buffer_count is 0 and a partition is on NVMe. CheckScenario
// refuses buffer_count 0 at the edge; the planner names it to API callers.
TEST(Fidelity, ParamBufferCountZeroFires) {
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kCpu);
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_param.max_in_cpu = Elements(0);
  s.zero.offload_param.buffer_count = 0;
  auto r = BuildPlan(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("[param_buffer_count_zero]"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("No swap buffers to allocate for fp16 param"), std::string::npos);
  s.zero.offload_param.buffer_count = 1;
  EXPECT_TRUE(BuildPlan(s).ok());
}

TEST(Fidelity, NonPipelinedStepIsSerial) {
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kNvme);
  const Plan p = MustPlanValid(s);
  const Op* r0 = FindOp(p, "step.sub_group0.read");
  const Op* st0 = FindOp(p, "step.sub_group0");
  const Op* w0 = FindOp(p, "step.sub_group0.write");
  const Op* r1 = FindOp(p, "step.sub_group1.read");
  EXPECT_TRUE(DependsOn(*st0, r0->id));
  EXPECT_TRUE(DependsOn(*w0, st0->id) || DependsOn(*w0, FindOp(p, "step.sub_group0.param_out.gpu")->id));
  EXPECT_TRUE(DependsOn(*r1, w0->id));  // the next read waits for this write
  // The small sub-group steps in CPU memory after the last write.
  const Op* st2 = FindOp(p, "step.sub_group2");
  EXPECT_TRUE(DependsOn(*st2, FindOp(p, "step.sub_group1.write")->id));
  EXPECT_EQ(p.buffers[st2->grad_in.buffer].name, "grad32.cpu");
  EXPECT_EQ(st2->grad_in.bytes.v, 10'240 * 4);  // fp32 gradient
}

TEST(Fidelity, PipelinedStepReadsOneAheadWritesOneBehind) {
  Scenario s = Mlp({1000, 600, 600, 600, 10}, OffloadDevice::kNvme);
  auto& oo = s.zero.offload_optimizer;
  oo.pipeline_read = oo.pipeline_write = true;
  oo.buffer_count = 12;
  const Plan p = MustPlanValid(s);
  const Op *r0 = FindOp(p, "step.sub_group0.read"), *r1 = FindOp(p, "step.sub_group1.read"),
           *r2 = FindOp(p, "step.sub_group2.read");
  const Op *st0 = FindOp(p, "step.sub_group0"), *st1 = FindOp(p, "step.sub_group1");
  const Op *w0 = FindOp(p, "step.sub_group0.write"), *w1 = FindOp(p, "step.sub_group1.write");
  EXPECT_TRUE(DependsOn(*r1, r0->id));    // issued once sub-group 0's read is in
  EXPECT_FALSE(DependsOn(*r1, st0->id));  // ... before its Adam
  EXPECT_LT(r1->id, st0->id);
  EXPECT_FALSE(DependsOn(*r2, w0->id));  // write 0 still in flight when read 2 is issued
  EXPECT_TRUE(DependsOn(*w1, w0->id));   // waited for at the next swap-out
  EXPECT_TRUE(DependsOn(*st1, r1->id));
  // Three sets of four distinct buffers.
  std::vector<BufferId> slots;
  for (const Op* r : {r0, r1, r2})
    for (const Move& m : r->moves) slots.push_back(m.dst.buffer);
  std::sort(slots.begin(), slots.end());
  EXPECT_EQ(std::unique(slots.begin(), slots.end()) - slots.begin(), 12);
}

TEST(Fidelity, OptimizerAndGradientVolumes) {
  // gas 2, parameters on the GPU, NVMe optimizer. Per micro step the
  // accumulator goes down and back: 2 x 972,800 x 2 B. At the boundary the
  // fp32 gradient: 10,240 x 4 B to grad32.cpu, 962,560 x 4 B staged and
  // written to NVMe. The step reads 4 x 962,560 x 4 B and writes 3 x.
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kNvme);
  s.training.gradient_accumulation_steps = 2;
  const Plan p = MustPlanValid(s);
  const int64_t all = 972'800, swapped = 962'560;
  int64_t bytes[kNumOpKinds] = {};
  for (const Op& op : p.ops) bytes[static_cast<int>(op.kind)] += op.bytes.v;
  EXPECT_EQ(bytes[static_cast<int>(OpKind::kNvmeRead)], 4 * swapped * 4);
  EXPECT_EQ(bytes[static_cast<int>(OpKind::kNvmeWrite)], swapped * 4 + 3 * swapped * 4);
  EXPECT_EQ(bytes[static_cast<int>(OpKind::kCopyD2H)], 2 * all * 2 + all * 4);
  // H2D: the accumulator twice, and the updated fp16 partition once.
  EXPECT_EQ(bytes[static_cast<int>(OpKind::kCopyH2D)], 2 * all * 2 + all * 2);
  // Nothing reaches NVMe before the last micro step.
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kNvmeWrite) {
      EXPECT_EQ(op.micro_step, 1) << op.name;
    }
  // The widened copies move fp32.
  int widened = 0;
  for (const Op& op : p.ops)
    for (const Move& m : op.moves)
      if (m.widen) {
        ++widened;
        EXPECT_EQ(m.dst.bytes, 2 * m.src.bytes);
      }
  EXPECT_GT(widened, 0);
}

// policy.deepspeed_stage3: v0.5, DeepSpeed before v0.6.0 as the
// ZeRO-Infinity paper ran it (stage3.py partition_previous_reduced_grads at
// v0.5.10): with one micro step there is no CPU gradient partition; the
// reduced shards are widened on the GPU and sent to the optimizer. The
// fp32 volumes are the same, the accumulator's round trip is gone, and the
// CPU holds the partition's low-precision bytes less.
TEST(Fidelity, DirectGradientsSkipTheCpuPartition) {
  for (int gpus : {1, 2}) {
    Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kNvme, gpus);
    const Plan buffered = MustPlanValid(s);
    s.policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
    const Plan direct = MustPlanValid(s);
    EXPECT_NE(FindBuffer(buffered, "grad.partition.cpu"), nullptr);
    EXPECT_EQ(FindBuffer(direct, "grad.partition.cpu"), nullptr);
    int64_t b[kNumOpKinds] = {}, d[kNumOpKinds] = {};
    for (const Op& op : buffered.ops) b[static_cast<int>(op.kind)] += op.bytes.v;
    for (const Op& op : direct.ops) d[static_cast<int>(op.kind)] += op.bytes.v;
    int64_t part = 0;  // this rank's partition, padded
    for (const PlanParamGroup& g : direct.param_groups) part += g.partition_elements.v;
    EXPECT_EQ(part, gpus == 1 ? 972'800 : 491'520);
    for (OpKind k : {OpKind::kNvmeRead, OpKind::kNvmeWrite, OpKind::kReduceScatter})
      EXPECT_EQ(d[static_cast<int>(k)], b[static_cast<int>(k)]) << OpKindName(k);
    // The accumulator's D2H and H2D (2 bytes an element each) are gone.
    EXPECT_EQ(b[static_cast<int>(OpKind::kCopyD2H)] - d[static_cast<int>(OpKind::kCopyD2H)], part * 2) << gpus;
    EXPECT_EQ(b[static_cast<int>(OpKind::kCopyH2D)] - d[static_cast<int>(OpKind::kCopyH2D)], part * 2) << gpus;
    // With more micro steps DeepSpeed kept a CPU accumulator then too.
    s.training.gradient_accumulation_steps = 2;
    EXPECT_NE(FindBuffer(MustPlanValid(s), "grad.partition.cpu"), nullptr);
  }
}

// Stage 3 with the optimizer on the GPU (stage3.py
// _prepare_fp32_grad_for_sub_group): each sub-group's step flattens its
// gradient partitions into a new tensor and casts it to fp32, both alive
// during the cast. The gradient partition itself: resident in current
// DeepSpeed (grad_partitions_flat_buffer); before v0.6.0 allocated at the
// first reduced gradient of the backward (partition_previous_reduced_grads)
// and dropped by the step, so the forward runs without it.
TEST(Fidelity, Stage3GpuStepAndGradientPartitionLifetime) {
  for (int gpus : {1, 2}) {
    for (DeepSpeedStage3 v : {DeepSpeedStage3::kCurrent, DeepSpeedStage3::kV05}) {
      Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kNone, gpus);
      s.policy.deepspeed_stage3 = v;
      const Plan p = MustPlanValid(s);
      const Buffer* grad = FindBuffer(p, "grad.partition");
      ASSERT_NE(grad, nullptr);
      EXPECT_EQ(grad->resident, v == DeepSpeedStage3::kCurrent);
      int steps = 0, lone_steps = 0, multi_steps = 0;
      // fc0.weight (1000 x 600) is larger than sub_group_size (Mlp's 300,000
      // on one rank) and steps alone; the rest share sub-groups.
      const int64_t lone = 600'000 / gpus;
      OpId first_write = -1, alloc = -1, free = -1, last_step = -1;
      for (const Op& op : p.ops) {
        const auto has = [&](const std::vector<BufferId>& l) {
          return std::find(l.begin(), l.end(), grad->id) != l.end();
        };
        if (first_write < 0 && has(op.writes)) first_write = op.id;
        if (has(op.allocs)) alloc = op.id;
        if (has(op.frees)) free = op.id;
        if (op.kind != OpKind::kOptimizerStep) continue;
        ++steps;
        last_step = op.id;
        // The flattened copy only for a sub-group of several tensors
        // (_flatten_dense_tensors returns a lone tensor's view).
        const size_t want = op.elements.v == lone ? 1 : 2;
        ++(want == 1 ? lone_steps : multi_steps);
        ASSERT_EQ(op.allocs.size(), want) << op.name;
        ASSERT_GE(op.frees.size(), want) << op.name;  // and the gradient partition, after the last step under v0.5
        EXPECT_TRUE(std::equal(op.allocs.begin(), op.allocs.end(), op.frees.begin())) << op.name;
        const Buffer& g32 = p.buffers[op.allocs.back()];
        EXPECT_EQ(g32.name, "step.grad32");
        EXPECT_EQ(g32.bytes.v, op.elements.v * 4);
        EXPECT_EQ(g32.tier, Tier::kGpu);
        if (want == 2) {
          const Buffer& flat = p.buffers[op.allocs[0]];
          EXPECT_EQ(flat.name, "step.grad.flat");
          EXPECT_EQ(flat.bytes.v, op.elements.v * 2);
        }
      }
      EXPECT_GE(steps, 2);
      EXPECT_EQ(lone_steps, 1);
      EXPECT_GE(multi_steps, 1);
      if (v == DeepSpeedStage3::kCurrent) {
        EXPECT_EQ(alloc, -1);
        EXPECT_EQ(free, -1);
        continue;
      }
      // The first writer: the first backward on one rank, the first
      // reduce-scatter on two; no forward op comes before it.
      ASSERT_GE(first_write, 0);
      EXPECT_EQ(alloc, first_write);
      EXPECT_EQ(p.ops[alloc].kind, gpus == 1 ? OpKind::kBackward : OpKind::kReduceScatter) << p.ops[alloc].name;
      for (const Op& op : p.ops) {
        if (op.kind == OpKind::kForward) {
          EXPECT_LT(op.id, alloc) << op.name;
        }
      }
      EXPECT_EQ(free, last_step);
    }
  }
}

// Stage 3's IPG bucket (stage3.py __add_grad_to_ipg_bucket): each gradient
// tensor is copied into a reduce_bucket_size bucket, reduced once the next
// gradient would overflow it; a gradient larger than the bucket keeps its own
// buffer. Two ranks, no NVMe, backward order fc2, fc1, fc0, weight then
// bias: fc2.weight 6,000 at 0, fc2.bias 10 at 6,000, fc1.weight 360,000 at
// 6,010, fc1.bias 600 at 366,010 share the 5e5 bucket; fc0.weight (600,000)
// is larger than it and keeps its own buffer; fc0.bias (600) still fits, at
// 366,610. When fc0.weight then joins, the bucket (367,210 elements) is
// reduced first, then fc0.weight alone.
TEST(Fidelity, Stage3GradientsGoThroughTheIpgBucket) {
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kNone, 2);
  s.zero.reduce_bucket_size = Elements(500'000);
  const Plan p = MustPlanValid(s);
  const Op* b2 = FindOp(p, "m0.bwd.fc2");
  const Op* b1 = FindOp(p, "m0.bwd.fc1");
  const Op* b0 = FindOp(p, "m0.bwd.fc0");
  ASSERT_TRUE(b2 && b1 && b0);
  ASSERT_EQ(b2->grads.size(), 2u);
  ASSERT_EQ(b1->grads.size(), 2u);
  ASSERT_EQ(b0->grads.size(), 2u);
  const BufferId bucket = b2->grads[0].buffer;
  EXPECT_EQ(p.buffers[bucket].name, "m0.grad.ipg_bucket.0");
  EXPECT_EQ(p.buffers[bucket].bytes.v, 500'000 * 2);
  EXPECT_EQ(b2->grads[0].offset.v, 0);
  EXPECT_EQ(b2->grads[1].offset.v, 6'000 * 2);
  EXPECT_EQ(b1->grads[0].buffer, bucket);
  EXPECT_EQ(b1->grads[0].offset.v, 6'010 * 2);
  EXPECT_EQ(b1->grads[1].offset.v, 366'010 * 2);
  EXPECT_EQ(p.buffers[b0->grads[0].buffer].name, "m0.grad.fc0.weight");
  EXPECT_EQ(b0->grads[1].buffer, bucket);
  EXPECT_EQ(b0->grads[1].offset.v, 366'610 * 2);
  const Op* r21 = FindOp(p, "m0.reduce.fc2.weight");
  const Op* r0 = FindOp(p, "m0.reduce.fc0.weight");
  ASSERT_TRUE(r21 && r0);
  EXPECT_EQ(r21->bytes.v, 367'210 * 2);
  EXPECT_EQ(r0->bytes.v, 600'000 * 2);
  EXPECT_LT(r21->id, r0->id);
}

// DeepSpeed takes 0 for both sizes (runtime/zero/config.py Field(ge=0)):
// with sub_group_size 0 each parameter closes its own sub-group
// (stage3.py _create_fp16_sub_groups: local size >= 0), and with
// reduce_bucket_size 0 every gradient is larger than the bucket, so each is
// reduced on its own (stage3.py reduce_independent_p_g_buckets_and_remove_grads;
// stage_1_and_2.py extra_large_param_to_reduce).
TEST(Fidelity, ZeroSizedBucketsAndSubGroups) {
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kCpu, 2);
  s.zero.sub_group_size = Elements(0);
  s.zero.reduce_bucket_size = Elements(0);
  Plan p = MustPlanValid(s);
  auto count = [&](OpKind kind) {
    int n = 0;
    for (const Op& op : p.ops) n += op.kind == kind;
    return n;
  };
  EXPECT_EQ(count(OpKind::kOptimizerStep), 6);  // fc0..fc2, weight and bias each
  EXPECT_EQ(count(OpKind::kReduceScatter), 6);
  EXPECT_EQ(FindOp(p, "step.sub_group0")->elements.v, 600'000 / 2);
  s.zero.stage = 2;
  s.zero.offload_optimizer.device = OffloadDevice::kNone;
  p = MustPlanValid(s);
  EXPECT_EQ(count(OpKind::kAllReduce), 6);
}

// offload_optimizer.ratio (stage3.py _create_fp32_partitions,
// subgroup_to_device; _optimizer_step): sub-groups i < int((1 - ratio) x N)
// keep fp32 states and gradient on the GPU and step on its compute stream,
// their fp32 gradient copied up from the CPU accumulator
// (_offload_grad_partition_at_boundary); the host does not wait for them
// before the next sub-group. With NVMe the ratio is not planned.
TEST(Fidelity, PartialOptimizerOffload) {
  Scenario s = Mlp({1000, 600, 600, 10}, OffloadDevice::kCpu);
  s.zero.sub_group_size = Elements(300'000);  // three sub-groups (SubGroupsAreWholeParameters)
  s.zero.offload_optimizer.ratio = 0.4;       // int(0.6 x 3) = 1 on the GPU
  const Plan p = MustPlanValid(s);
  const Op* s0 = FindOp(p, "step.sub_group0");
  const Op* s1 = FindOp(p, "step.sub_group1");
  ASSERT_TRUE(s0 && s1);
  EXPECT_EQ(s0->stream, Stream::kCompute);
  EXPECT_EQ(s1->stream, Stream::kCpuOptim);
  EXPECT_EQ(p.buffers[s0->master.buffer].tier, Tier::kGpu);
  EXPECT_EQ(p.buffers[s0->grad_in.buffer].tier, Tier::kGpu);
  EXPECT_EQ(p.buffers[s1->master.buffer].tier, Tier::kCpu);
  // Launched, not waited for: nothing orders the CPU step after the GPU one.
  const testing::Order order(p);
  EXPECT_FALSE(order.HappensBefore(s0->id, s1->id));
  ASSERT_NE(FindBuffer(p, "master32.gpu"), nullptr);
  EXPECT_EQ(FindBuffer(p, "master32.gpu")->bytes.v, 600'000 * 4);
  EXPECT_EQ(FindBuffer(p, "master32")->bytes.v, (360'600 + 6'610) * 4);
  // fc0.weight's fp32 gradient goes up from the accumulator: 4 bytes each.
  const Op* up = nullptr;
  for (const Op& op : p.ops)
    if (op.name.find(".grad32.gpu") != std::string::npos) {
      EXPECT_EQ(up, nullptr) << "one copy up: " << op.name;
      up = &op;
    }
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->kind, OpKind::kCopyH2D);
  EXPECT_EQ(up->bytes.v, 600'000 * 4);
  EXPECT_TRUE(order.HappensBefore(up->id, s0->id));
  // The optimizer on NVMe: the ratio is not planned.
  s.zero.offload_optimizer.device = OffloadDevice::kNvme;
  const Plan nvme = MustPlanValid(s);
  EXPECT_EQ(FindBuffer(nvme, "master32.gpu"), nullptr);
}

}  // namespace
}  // namespace strata
