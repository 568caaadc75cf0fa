// Tensor parallelism in the plan (issue #16): the groups, ZeRO over the
// data-parallel group, the tensor-parallel collectives on the compute
// stream, and the scenario's rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "strata/core/model.h"
#include "strata/plan/plan_json.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::MustPlanValid;
using testing::SmallGpt;

TEST(TensorParallel, GroupsAndZeroOverTheDataParallelGroup) {
  for (int stage : {0, 1, 2, 3}) {
    Scenario s = SmallGpt(stage, 8);
    s.parallelism.tensor = 2;
    ASSERT_TRUE(CheckScenario(s).empty());
    const Plan p = MustPlanValid(s);
    EXPECT_EQ(p.world_size, 8);
    ASSERT_EQ(p.groups.size(), 2u);
    EXPECT_EQ(p.groups[0].name, "dp");
    EXPECT_EQ(p.groups[0].ranks, (std::vector<int>{0, 2, 4, 6}));
    EXPECT_EQ(p.groups[1].name, "tp");
    EXPECT_EQ(p.groups[1].ranks, (std::vector<int>{0, 1}));
    EXPECT_EQ(p.data_parallel(), 4);
    EXPECT_EQ(p.tensor_parallel(), 2);
    EXPECT_EQ(p.LayoutText(), "tensor 2 x data 4");
    EXPECT_EQ(p.DataRank(5), 2);
    EXPECT_EQ(p.groups[0].RanksOf(5), (std::vector<int>{1, 3, 5, 7}));
    EXPECT_EQ(p.groups[1].Next(5), 4);
    // Samples: each data-parallel replica's micro batch.
    EXPECT_EQ(p.samples_per_iteration, 2 * 4);
    // The whole model's parameters; each rank's shard is partitioned four ways.
    const ModelGraph whole = *BuildModelGraph(s.model, s.training);
    EXPECT_EQ(p.total_params, whole.total_params);
    if (stage == 3) {
      const ModelGraph shard = *BuildModelGraph(s.model, s.training, s.parallelism);
      int64_t part = 0, elements = 0;
      for (const PlanParamGroup& g : p.param_groups) part += g.partition_elements.v, elements += g.elements.v;
      EXPECT_EQ(elements, shard.total_params.v);
      EXPECT_GE(part * 4, elements);
      EXPECT_LT(part * 4, elements + 4 * static_cast<int64_t>(p.param_groups.size()) * 4);
    }
  }
}

// Per layer and micro batch: an allreduce of the attention block's and the
// MLP block's output forward, and of their input gradients backward, all
// on the compute stream over the "tp" group; with activation checkpointing
// the recomputation repeats the forward's.
TEST(TensorParallel, CollectivesOnTheComputeStream) {
  for (bool ckpt : {false, true}) {
    Scenario s = SmallGpt(1, 4);
    s.parallelism.tensor = 4;
    s.training.activation_checkpointing = ckpt;
    const Plan p = MustPlanValid(s);
    const int64_t act = 2 * 2 * 32 * 64;  // b s h, 2 bytes
    int per_layer = 0, others = 0;
    for (const Op& op : p.ops) {
      if (op.group != 1) continue;
      EXPECT_EQ(op.stream, Stream::kCompute) << op.name;
      EXPECT_EQ(op.kind, OpKind::kAllReduce) << op.name;
      if (op.layer == 1) {
        ++per_layer;
        EXPECT_EQ(op.bytes.v, act) << op.name;
      } else if (op.layer < 0) {
        ++others;
      }
    }
    EXPECT_EQ(per_layer, ckpt ? 6 : 4);
    EXPECT_EQ(others, 3);  // the embedding's output; the loss's statistics and the head's input gradient
  }
}

TEST(TensorParallel, ScenarioRules) {
  auto problems = [](const Scenario& s) {
    std::string all;
    for (const auto& i : CheckScenario(s)) all += i.path + ": " + i.message + "\n";
    return all;
  };
  Scenario s = SmallGpt(1, 8);
  s.parallelism.tensor = 3;
  EXPECT_NE(problems(s).find("parallelism.tensor: tensor x pipeline = 3 does not divide the world size 8"),
            std::string::npos)
      << problems(s);
  s = SmallGpt(1, 8);
  s.parallelism.tensor = 8;  // 4 heads
  EXPECT_NE(problems(s).find("model.num_heads 4 is not divisible by tensor 8"), std::string::npos) << problems(s);
  s = SmallGpt(3, 8);
  s.parallelism.pipeline = 4;  // 3 layers; stage 3
  const std::string p = problems(s);
  EXPECT_NE(p.find("parallelism.pipeline: model.layers 3 is fewer than pipeline stages 4"), std::string::npos) << p;
  EXPECT_NE(p.find("zero_optimization.stage: ZeRO stage 3 with pipeline parallelism: \"ZeRO-2 and ZeRO-3 are "
                   "incompatible with pipeline parallelism\""),
            std::string::npos)
      << p;
  s = SmallGpt(1, 8);
  s.model = ModelSpec{};
  s.model.kind = ModelKind::kMlp;
  s.model.sizes = {32, 6, 8};
  s.parallelism.tensor = 4;
  EXPECT_NE(problems(s).find("model.sizes: layer 0's 6 outputs are not divisible by parallelism.tensor 4"),
            std::string::npos)
      << problems(s);
  s = SmallGpt(1, 8);
  s.parallelism.sequence_parallel = true;
  EXPECT_NE(problems(s).find("parallelism.sequence_parallel: sequence parallelism splits the tensor-parallel region"),
            std::string::npos);
}

// The MLP split over tensor-parallel ranks: its all-reduces name the
// activation they act on (Operand: what the executor's workload passes),
// for the forward and its recomputation the row layer's output, for the
// backward the column layer's input gradient; the JSON keeps them.
TEST(TensorParallel, MlpCollectivesNameTheirOperand) {
  for (bool ckpt : {false, true}) {
    Scenario s = SmallGpt(1, 4);
    s.model = ModelSpec{};
    s.model.kind = ModelKind::kMlp;
    s.model.sizes = {32, 64, 48, 16, 10};
    s.parallelism.tensor = 2;
    s.training.gradient_accumulation_steps = 2;
    s.training.activation_checkpointing = ckpt;
    ASSERT_TRUE(CheckScenario(s).empty());
    const Plan p = MustPlanValid(s);
    std::map<std::pair<int, Operand>, int> seen;  // (module, operand) -> count
    for (const Op& op : p.ops) {
      if (op.group < 0 || p.groups[static_cast<size_t>(op.group)].name != "tp") {
        EXPECT_EQ(op.operand, Operand::kNone) << op.name;
        continue;
      }
      EXPECT_EQ(op.kind, OpKind::kAllReduce) << op.name;
      EXPECT_TRUE(op.moves.empty()) << op.name;
      const Op& before = p.ops[static_cast<size_t>(op.id - 1)];  // the compute it follows on the stream
      EXPECT_EQ(before.module, op.module) << op.name;
      EXPECT_EQ(before.kind, op.operand == Operand::kOutput ? OpKind::kForward : OpKind::kBackward) << op.name;
      ++seen[{op.module, op.operand}];
    }
    // Per micro step: layers 1 and 3 (row) reduce their output in each
    // forward (again in a recompute), layer 2 (column) its input gradient.
    const int fwd = ckpt ? 4 : 2;
    EXPECT_EQ(seen, (std::map<std::pair<int, Operand>, int>{
                        {{1, Operand::kOutput}, fwd}, {{3, Operand::kOutput}, fwd}, {{2, Operand::kInputGrad}, 2}}));
    auto back = DecodePlan(EncodePlan(p));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, p);
  }
}

// A tiled MLP plans as more, smaller modules: ZeRO-3 fetches each tile on
// its own, so the largest gathered buffer is a tile's.
TEST(TensorParallel, TiledMlpFetchesTileByTile) {
  Scenario s = SmallGpt(3, 4);
  s.parallelism.tensor = 2;
  const Plan plain = MustPlanValid(s);
  s.model.tiled_in_splits = 2;
  s.model.tiled_out_splits = 2;
  ASSERT_TRUE(CheckScenario(s).empty());
  const Plan tiled = MustPlanValid(s);
  EXPECT_EQ(tiled.total_params, plain.total_params);
  int64_t plain_max = 0, tiled_max = 0;
  auto mlp_gather = [](const Op& op) {
    return op.kind == OpKind::kAllGather && op.group == 0 && op.name.find(".fc") != std::string::npos;
  };
  for (const Op& op : plain.ops)
    if (mlp_gather(op)) plain_max = std::max(plain_max, op.bytes.v);
  for (const Op& op : tiled.ops)
    if (mlp_gather(op)) tiled_max = std::max(tiled_max, op.bytes.v);
  EXPECT_GT(tiled_max, 0);
  EXPECT_LT(tiled_max, plain_max);
  s.model.mlp = MlpKind::kSwiGlu;
  EXPECT_FALSE(CheckScenario(s).empty());  // GeLU MLPs only
}

}  // namespace
}  // namespace strata
