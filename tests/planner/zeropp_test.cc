// ZeRO++ (docs/fidelity.md "ZeRO++"): hpZ's secondary partition and its
// gathers within the group, qwZ's int8 allgathers with their scales, qgZ's
// two-hop int4 gradient reduction across nodes. Each expectation is worked
// out from DeepSpeed's source in the comment above it.
#include <gtest/gtest.h>

#include <string>

#include "strata/plan/validator.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::MustPlanValid;

// Six 512x512 layers and a 512x10 one on 2 nodes of 2 GPUs, stage 3;
// biases persist (threshold 600), so each module gathers one tensor, its
// weight: 262,144 elements, 65,536 a rank (fc6's 5,120).
Scenario Mlp(int nodes = 2) {
  Scenario s = testing::SmallGpt(3, 2);
  s.hardware.nodes = nodes;
  s.model.kind = ModelKind::kMlp;
  s.model.sizes = {512, 512, 512, 512, 512, 512, 512, 10};
  s.zero.stage3_param_persistence_threshold = Elements(600);
  s.zero.stage3_prefetch_bucket_size = Elements(1'000'000);
  return s;
}

const CommGroup& GroupOf(const Plan& p, const Op& op) { return p.groups[static_cast<size_t>(op.group)]; }

// partition_parameters.py: a released parameter fills its secondary
// partition (_partition_param_sec: numel padded to the world, over hpz
// ranks), which every later gather uses, over zero_param_process_group
// (the hpz consecutive ranks); stage3.py _post_step invalidates them.
TEST(ZeroPlusPlus, HpzGathersFromTheSecondaryPartitionWithinItsGroup) {
  Scenario s = Mlp();
  s.zero.zero_hpz_partition_size = 2;
  s.zero.stage3_max_reuse_distance = Elements(0);  // released after each use
  s.training.gradient_accumulation_steps = 2;
  const Plan p = MustPlanValid(s);
  int primary = 0, secondary = 0;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kAllGather || op.name.find(".weight") == std::string::npos) continue;
    const bool first_forward = op.name.rfind("m0.fwd.", 0) == 0;
    EXPECT_EQ(GroupOf(p, op).name, first_forward ? "dp" : "hpz") << op.name;
    if (op.name.find("fc6") == std::string::npos) {
      EXPECT_EQ(op.bytes.v, 262'144 * 2) << op.name;  // the whole, gathered either way
    }
    (first_forward ? primary : secondary) += 1;
  }
  EXPECT_EQ(primary, 7);  // micro step 0's forward
  // Micro step 1's forward, and what the backward gathers again (the
  // coordinator keeps most of it from the forward).
  EXPECT_GE(secondary, 7 + 1);
  const CommGroup* hpz = nullptr;
  for (const CommGroup& g : p.groups)
    if (g.name == "hpz") hpz = &g;
  ASSERT_NE(hpz, nullptr);
  EXPECT_EQ(hpz->ranks, (std::vector<int>{0, 1}));
  int buffers = 0;
  for (const Buffer& b : p.buffers)
    if (b.name.find("secondary.") != std::string::npos) {
      ++buffers;
      EXPECT_EQ(b.tier, Tier::kGpu);
      // Half the whole: 2x a rank's partition.
      EXPECT_EQ(b.bytes.v, b.name.find("fc6") == std::string::npos ? 262'144 : 5'120) << b.name;
    }
  EXPECT_EQ(buffers, 7);
  // What the secondary partitions add to the GPU's peak: 6 x 256 KiB and fc6's.
  Scenario plain = s;
  plain.zero.zero_hpz_partition_size = 1;
  const int gpu = static_cast<int>(Tier::kGpu);
  EXPECT_EQ(ValidatePlan(p).memory.peak[gpu].v - ValidatePlan(MustPlanValid(plain)).memory.peak[gpu].v,
            6 * 262'144 + 5'120);
}

// partition_parameters.py CUDAQuantizer.quantize on a rank's 65,536
// elements: ceil(65536 / 8000) = 9 groups, the least divisor of 65536 / 8
// from 9 up is 16, and 65536 > 8000 x 16 fails: 16 groups of 4096, an fp32
// scale each. The gather moves 2 x (65,536 + 64) bytes, not 2 x 131,072.
TEST(ZeroPlusPlus, QwzGathersInt8WithItsScales) {
  Scenario s = Mlp();
  s.zero.zero_quantized_weights = true;
  const Plan p = MustPlanValid(s);
  int gathers = 0;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kAllGather && op.name.find("fc0.weight") != std::string::npos) {
      ++gathers;
      EXPECT_EQ(op.quant_bits, 8);
      EXPECT_EQ(op.bytes.v, 4 * (65'536 + 4 * 16)) << op.name;
    }
  EXPECT_GE(gathers, 1);
}

// hpZ and qwZ together: the coordinator passes quantize to every fetch,
// the secondary gathers too: 2 ranks' shards of 131,072 elements (half the
// whole), quantized in 32 groups (ceil(131072 / 8000) = 17, the least
// divisor of 16,384 from 17 is 32, and 131,072 > 8000 x 32 fails).
TEST(ZeroPlusPlus, HpzGathersAreQuantizedToo) {
  Scenario s = Mlp();
  s.zero.zero_hpz_partition_size = 2;
  s.zero.zero_quantized_weights = true;
  s.zero.stage3_max_reuse_distance = Elements(0);
  s.training.gradient_accumulation_steps = 2;
  const Plan p = MustPlanValid(s);
  int secondary = 0;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kAllGather || op.name.find("fc0.weight") == std::string::npos) continue;
    EXPECT_EQ(op.quant_bits, 8) << op.name;
    if (GroupOf(p, op).name != "hpz") continue;
    ++secondary;
    EXPECT_EQ(op.bytes.v, 2 * (131'072 + 4 * 32)) << op.name;
  }
  EXPECT_GE(secondary, 1);
}

// coalesced_collectives.py all_to_all_quant_reduce across 2 nodes of 2
// GPUs: a weight's 262,144 gradients go as int4 (131,072 bytes) with an
// fp32 scale per min(rows, columns) = 512 elements (an MLP's: sqrt(N)),
// 512 of them (at least the world's 4): within the node, then a node's
// half across. Biases (vectors) stay in the plain reduce-scatter. One
// node: no qgZ.
TEST(ZeroPlusPlus, QgzReducesMatricesInTwoHopsAcrossNodes) {
  Scenario s = Mlp();
  s.zero.zero_quantized_gradients = true;
  s.zero.reduce_bucket_size = Elements(1);  // one tensor a bucket
  const Plan p = MustPlanValid(s);
  const Op* local = testing::FindOp(p, "m0.reduce.fc3.weight.qgz_local");
  const Op* across = testing::FindOp(p, "m0.reduce.fc3.weight.qgz_global");
  const Op* rest = testing::FindOp(p, "m0.reduce.fc3.weight");
  ASSERT_TRUE(local != nullptr && across != nullptr && rest != nullptr);
  EXPECT_EQ(GroupOf(p, *local).name, "zpp_local");
  EXPECT_EQ(GroupOf(p, *local).ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(GroupOf(p, *across).name, "zpp_global");
  EXPECT_EQ(GroupOf(p, *across).ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(local->quant_bits, 4);
  EXPECT_EQ(local->bytes.v, 262'144 / 2 + 4 * 512);
  EXPECT_EQ(across->bytes.v, (262'144 / 2 + 4 * 512) / 2);
  EXPECT_EQ(rest->bytes.v, 0);  // nothing left to the plain reduction
  EXPECT_TRUE(testing::DependsOn(*rest, across->id));
  const Op* bias = testing::FindOp(p, "m0.reduce.fc3.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(GroupOf(p, *bias).name, "dp");
  for (const Op& op : p.ops) EXPECT_EQ(op.name.find("bias.qgz"), std::string::npos) << op.name;
  const Plan one = MustPlanValid(Mlp(1));
  for (const Op& op : one.ops) EXPECT_EQ(op.quant_bits, 0) << op.name;
}

}  // namespace
}  // namespace strata
