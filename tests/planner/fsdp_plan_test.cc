// The FSDP2 front end (docs/fsdp.md): shards padded per parameter, one
// all-gather and one reduce-scatter per unit as reshard_after_forward
// says, and the memory the plan replays against the hand derivation of
// docs/fsdp.md's formula.
#include <gtest/gtest.h>

#include <algorithm>

#include "strata/config/scenario_loader.h"
#include "strata/plan/plan_json.h"
#include "strata/plan/validator.h"
#include "strata/planner/planner.h"

namespace strata {
namespace {

// A GPT of `layers` blocks, hidden 64, a 250-row token table (not a
// multiple of the ranks, so it pads), on `gpus` GPUs of one node.
Plan PlanOf(int layers, int gpus, const std::string& fsdp, bool checkpointing = false) {
  const std::string yaml = "name: f\nframework: fsdp\nmodel: {kind: transformer, layers: " + std::to_string(layers) +
                           ", hidden_size: 64, num_heads: 4, vocab_size: 250, seq_length: 8}\n"
                           "hardware:\n  nodes: 1\n  gpus_per_node: " +
                           std::to_string(gpus) +
                           "\n  gpu: {memory: 16GiB, peak_flops: 100TFLOPS, efficiency: 1.0}\n"
                           "  cpu: {memory: 64GiB}\n"
                           "training: {precision: bf16, micro_batch_size: 1, activation_checkpointing: " +
                           (checkpointing ? "true" : "false") + "}\nfsdp: " + fsdp + "\n";
  auto s = config::ParseScenario(yaml, "f.yaml");
  EXPECT_TRUE(s.ok()) << s.status().message();
  auto plan = BuildPlan(*s);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? *plan : Plan{};
}

int64_t ShardElements(const Plan& p) {
  int64_t s = 0;
  for (const PlanParamGroup& g : p.param_groups) s += g.partition_elements.v;
  return s;
}

int Count(const Plan& p, OpKind k) {
  int n = 0;
  for (const Op& op : p.ops) n += op.kind == k;
  return n;
}

Bytes TierPeak(const Plan& p, Tier t) { return ValidatePlan(p).memory.peak[static_cast<int>(t)]; }

// FSDPParam._init_sharded_param: each parameter's dim 0 in ceil(rows / W)
// rows a rank; the token table's 250 rows over 3 ranks are 84 (2 of them
// padding on the last rank), 84 x 64 elements.
TEST(FsdpPlan, ShardsPadEachParametersRows) {
  const Plan p = PlanOf(2, 3, "{}");
  EXPECT_EQ(p.framework, Framework::kFsdp);
  ASSERT_FALSE(p.param_groups.empty());
  bool table = false;
  for (const PlanParamGroup& g : p.param_groups) {
    if (g.elements.v == 250 * 64) {
      table = true;
      EXPECT_EQ(g.partition_elements.v, 84 * 64) << g.name;
    }
    EXPECT_GE(g.partition_elements.v * 3, g.elements.v) << g.name;
  }
  EXPECT_TRUE(table);
  const int64_t S = ShardElements(p);
  // The fp32 shard and Adam's two moments: FSDP2 keeps no other copy.
  for (const Buffer& b : p.buffers) {
    if (!b.resident) continue;
    EXPECT_EQ(b.bytes.v, (b.kind == StateKind::kMoments ? 8 : 4) * S) << b.name;
  }
  const ValidationReport report = ValidatePlan(p);
  EXPECT_TRUE(report.violations.empty()) << report.violations.front().message;
  auto back = DecodePlan(EncodePlan(p));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, p);
}

// Gathers: the root once (kept from its forward to its backward, FSDP2's
// default for the root), each block in forward and again in backward
// (reshard_after_forward true); none again with false; one unit with
// units: root. One reduce-scatter per unit; each all-gather moves W x S_u
// in param_dtype.
TEST(FsdpPlan, GathersAndReducesPerUnitAsReshardSays) {
  const Plan full = PlanOf(2, 4, "{}");
  EXPECT_EQ(Count(full, OpKind::kAllGather), 1 + 2 * 2);
  EXPECT_EQ(Count(full, OpKind::kReduceScatter), 3);
  Bytes gathered;
  for (const Op& op : full.ops)
    if (op.kind == OpKind::kAllGather) gathered += op.bytes;
  // Root once, blocks twice: 2 bytes x W x (2 S - S_root).
  int64_t root = 0;
  for (const Op& op : full.ops)
    if (op.kind == OpKind::kAllGather && op.name.find("root") != std::string::npos) root = op.bytes.v;
  EXPECT_EQ(gathered.v, 2 * 4 * 2 * ShardElements(full) - root);
  EXPECT_EQ(Count(PlanOf(2, 4, "{reshard_after_forward: false}"), OpKind::kAllGather), 3);
  EXPECT_EQ(Count(PlanOf(2, 4, "{units: root}"), OpKind::kAllGather), 1);
  EXPECT_EQ(Count(PlanOf(2, 4, "{units: [2]}"), OpKind::kAllGather), 1 + 2);
  // reshard_after_forward 2: the backward gathers each block's kept half
  // over pairs of ranks.
  const Plan pairs = PlanOf(2, 4, "{reshard_after_forward: 2}");
  int over_pairs = 0;
  for (const Op& op : pairs.ops)
    if (op.kind == OpKind::kAllGather && pairs.groups[static_cast<size_t>(op.group)].name == "fsdp_post_forward") {
      ++over_pairs;
      for (const Move& m : op.moves) EXPECT_EQ(m.dst.bytes.v, 2 * m.src.bytes.v);
    }
  EXPECT_EQ(over_pairs, 2);
  EXPECT_TRUE(ValidatePlan(pairs).violations.empty());
  EXPECT_TRUE(ValidatePlan(PlanOf(2, 4, "{mesh: {replicate: 2, shard: 2}}")).violations.empty());
}

// docs/fsdp.md, "Memory": on one GPU (W = 1) of 8 blocks the step is the
// peak: the fp32 shard (4 S), the gradients (4 S), the moments (8 S) and
// _multi_tensor_adam's foreach_sqrt temporary (4 S): 20 S, no activation
// left.
TEST(FsdpPlan, StepPeakIsTwentyBytesAParameter) {
  const Plan p = PlanOf(8, 1, "{}");
  EXPECT_EQ(TierPeak(p, Tier::kGpu).v, 20 * ShardElements(p));
}

// Under CPUOffloadPolicy the CPU holds 16 S per rank (shard, gradient,
// moments; x gpus_per_node for the node), the GPU none of it; each
// gather first copies the fp32 shard over PCIe (root once, blocks twice)
// and each gradient shard comes back once.
TEST(FsdpPlan, CpuOffloadHoldsSixteenBytesAParameterOnTheCpu) {
  const Plan p = PlanOf(2, 4, "{offload_policy: cpu}", true);
  const int64_t S = ShardElements(p);
  EXPECT_EQ(TierPeak(p, Tier::kCpu).v, 4 * 16 * S);
  Bytes h2d, d2h;
  int64_t root = 0;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCopyH2D) h2d += op.bytes;
    if (op.kind == OpKind::kCopyD2H) d2h += op.bytes;
    if (op.kind == OpKind::kCopyH2D && op.name.find("root") != std::string::npos) root = op.bytes.v;
    if (op.kind == OpKind::kOptimizerStep) {
      EXPECT_EQ(op.stream, Stream::kCpuOptim);
    }
  }
  EXPECT_EQ(h2d.v, 2 * 4 * S - root);
  EXPECT_EQ(d2h.v, 4 * S);
  for (const Buffer& b : p.buffers) {
    if (b.kind == StateKind::kMaster32 || b.kind == StateKind::kMoments) {
      EXPECT_TRUE(b.tier == Tier::kCpu || !b.resident) << b.name;
    }
  }
  EXPECT_TRUE(ValidatePlan(p).violations.empty());
}

// docs/fsdp.md, "Memory", under CPU offload: in block i's backward the
// GPU holds W b_p (2 S_r + S_{i-1} + 2 S_i + S_{i+1}): the root's
// parameters and gradients, the prefetched unit, unit i's parameters and
// gradients, unit i+1's held reduce-scatter input. Two equal blocks on 4
// ranks in bf16: 8 (2 S_r + 3 S_b), besides activations.
TEST(FsdpPlan, OffloadGpuPeakIsTheBackwardsUnitsInFlight) {
  const Plan p = PlanOf(2, 4, "{offload_policy: cpu}");
  int64_t root = 0, block = 0;
  std::vector<char> seen(p.param_groups.size(), 0);
  for (const PlanModule& m : p.modules)
    for (int gi : m.param_groups) {
      if (seen[static_cast<size_t>(gi)]) continue;
      seen[static_cast<size_t>(gi)] = 1;
      (m.layer < 0 ? root : block) += p.param_groups[static_cast<size_t>(gi)].partition_elements.v;
    }
  const int64_t per_block = block / 2;
  const ValidationReport r = ValidatePlan(p);
  const int gpu = static_cast<int>(Tier::kGpu);
  const Bytes activations = r.memory.at_peak[gpu][static_cast<int>(StateKind::kActivation)];
  EXPECT_EQ((r.memory.peak[gpu] - activations).v, 4 * 2 * (2 * root + 3 * per_block));
}

// PG._backward_prefetch from the root: its pre_backward (before the head's
// backward) prefetches the last block, whose all-gather is issued before
// any backward compute.
TEST(FsdpPlan, TheRootPrefetchesTheLastBlockInBackward) {
  const Plan p = PlanOf(2, 4, "{}");
  int gather = -1, first_backward = -1;
  for (const Op& op : p.ops) {
    if (op.name == "m0.bwd.allgather.layer1") gather = op.id;
    if (op.kind == OpKind::kBackward && first_backward < 0) first_backward = op.id;
  }
  ASSERT_GE(gather, 0);
  EXPECT_LT(gather, first_backward);
}

// A reduce_dtype wider than param_dtype: the reduce-scatter input is its
// own buffer (W S_u x 4 bytes), held until the next unit's reduce-scatter
// (reduce_scatter_states); the model computes in param_dtype.
TEST(FsdpPlan, AWiderReduceInputIsHeldOneDeep) {
  const Plan p = PlanOf(2, 4, "{mp_policy: {param_dtype: fp32, reduce_dtype: fp32}}");
  EXPECT_EQ(p.run.precision, Precision::kFp32);
  const Plan r = PlanOf(2, 4, "{mp_policy: {reduce_dtype: fp32}}");
  std::vector<OpId> scatters;
  for (const Op& op : r.ops)
    if (op.kind == OpKind::kReduceScatter) scatters.push_back(op.id);
  ASSERT_EQ(scatters.size(), 3u);
  const Op& first = r.ops[static_cast<size_t>(scatters[0])];
  ASSERT_FALSE(first.allocs.empty());
  const Buffer& input = r.buffers[static_cast<size_t>(first.allocs.front())];
  EXPECT_NE(input.name.find("fsdp.reduce_input"), std::string::npos);
  int64_t in = 0;
  for (const Move& m : first.moves) in += m.src.bytes.v;
  EXPECT_EQ(input.bytes.v, 2 * in);  // fp32 of the bf16 gradients
  const auto& next_frees = r.ops[static_cast<size_t>(scatters[1])].frees;
  EXPECT_NE(std::find(next_frees.begin(), next_frees.end(), input.id), next_frees.end());
  EXPECT_TRUE(ValidatePlan(r).violations.empty());
}

}  // namespace
}  // namespace strata
