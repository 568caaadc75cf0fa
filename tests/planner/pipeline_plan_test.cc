// Pipeline parallelism in the plan (issue #16): one plan of every stage,
// each stage in Megatron's 1F1B order with its sends and receives, ZeRO
// over the data-parallel group, activations of the micro batches in
// flight, and the rules DeepSpeed enforces.
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

// A small GPT of `layers` layers on pipeline x data ranks (one node).
Scenario PipelineGpt(int zero, int pipeline, int data, int micro_steps, int layers = 4) {
  Scenario s = SmallGpt(zero, pipeline * data);
  s.model.layers = layers;
  s.parallelism.pipeline = pipeline;
  s.training.gradient_accumulation_steps = micro_steps;
  return s;
}

// Megatron-LM's forward_backward_pipelining_without_interleaving: the
// order of micro batches' forward (+k) and backward (-k - 1) passes on
// pipeline rank s.
std::vector<int> OneFOneB(int s, int P, int m) {
  const int warmup = std::min(P - s - 1, m);
  std::vector<int> v;
  for (int k = 0; k < warmup; ++k) v.push_back(k);
  for (int i = 0; i < m - warmup; ++i) v.push_back(warmup + i), v.push_back(-i - 1);
  for (int i = m - warmup; i < m; ++i) v.push_back(-i - 1);
  return v;
}

TEST(Pipeline, EveryStageRunsOneFOneBAndPairsItsTransfers) {
  for (int zero : {0, 1})
    for (int P : {2, 4})
      for (int m : {1, 3, 8})
        for (bool ckpt : {false, true}) {
          Scenario s = PipelineGpt(zero, P, 2, m);
          s.training.activation_checkpointing = ckpt;
          ASSERT_TRUE(CheckScenario(s).empty());
          const Plan p = MustPlanValid(s);
          const std::string what =
              "zero " + std::to_string(zero) + " P " + std::to_string(P) + " m " + std::to_string(m);
          ASSERT_EQ(p.pipeline, P) << what;
          EXPECT_EQ(p.stage_layers, PipelineParts(4, P)) << what;
          ASSERT_EQ(p.groups.back().name, "pp");
          EXPECT_EQ(p.groups.back().ranks.size(), static_cast<size_t>(P));
          EXPECT_EQ(p.groups.back().stride(), 2);
          EXPECT_EQ(p.StageOf(2 * P - 1), P - 1);
          // Each stage's compute passes, collapsed to (micro step, direction).
          std::vector<std::vector<int>> order(static_cast<size_t>(P));
          for (const Op& op : p.ops) {
            if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) continue;
            const int tok = op.phase == Phase::kForward ? op.micro_step : -op.micro_step - 1;
            auto& o = order[static_cast<size_t>(op.stage)];
            if (o.empty() || o.back() != tok) o.push_back(tok);
          }
          for (int st = 0; st < P; ++st)
            EXPECT_EQ(order[static_cast<size_t>(st)], OneFOneB(st, P, m)) << what << " stage " << st;
          // Per micro step: an activation down and a gradient up across each
          // boundary, each receive after its send, of the hidden state's bytes.
          std::map<int, int> recv_by_stage;
          for (const Op& op : p.ops) {
            if (op.kind != OpKind::kRecv) continue;
            ++recv_by_stage[op.stage];
            const bool tied = op.name.find(".tied.") != std::string::npos;
            EXPECT_EQ(op.bytes.v, tied ? 500 * 64 * 2 : 2 * 32 * 64 * 2) << op.name;
            const Op& send = p.ops[static_cast<size_t>(op.deps.back())];
            EXPECT_EQ(send.kind, OpKind::kSend) << op.name;
            EXPECT_EQ(send.stage, op.peer_stage);
            EXPECT_EQ(send.peer_stage, op.stage);
            EXPECT_EQ(send.micro_step, op.micro_step);
            // A boundary's pair names the last layer before it (what the
            // executor's workload passes); the tied table's does not.
            const int boundary = p.stage_layers[static_cast<size_t>(std::max(op.stage, op.peer_stage))] - 1;
            EXPECT_EQ(op.layer, tied ? -1 : boundary) << op.name;
            EXPECT_EQ(send.layer, op.layer) << send.name;
            EXPECT_EQ(op.phase, send.phase) << op.name;
          }
          // Stages 0 and P-1 receive once per micro step, the others twice;
          // the tied token table's gradient once more on the two ends.
          for (int st = 0; st < P; ++st)
            EXPECT_EQ(recv_by_stage[st], (st == 0 || st == P - 1 ? m : 2 * m) + (st == 0 || st == P - 1 ? 1 : 0))
                << what << " stage " << st;
        }
}

// 1F1B keeps min(P - s, m) micro batches' activations on stage s: the
// first stage the most (Narayanan et al., SC'21).
TEST(Pipeline, ActivationsOfTheMicroBatchesInFlight) {
  const int P = 4;
  for (int m : {2, 4, 8}) {
    const Scenario s = PipelineGpt(1, P, 1, m, 8);
    const Plan p = MustPlanValid(s);
    const ModelGraph whole = *BuildModelGraph(s.model, s.training);
    std::vector<int64_t> live(P, 0), peak(P, 0);
    for (const Op& op : p.ops) {
      for (BufferId b : op.allocs)
        if (p.buffers[b].kind == StateKind::kActivation) live[op.stage] += p.buffers[b].bytes.v;
      peak[op.stage] = std::max(peak[op.stage], live[op.stage]);
      for (BufferId b : op.frees)
        if (p.buffers[b].kind == StateKind::kActivation) live[op.stage] -= p.buffers[b].bytes.v;
    }
    for (int st = 0; st < P; ++st) {
      int64_t per_micro = 0;
      for (const ModuleSpec& mod : PipelineStageGraph(whole, st, P).modules) per_micro += mod.act_bytes.v;
      EXPECT_EQ(live[st], 0);
      EXPECT_EQ(peak[st], std::min(P - st, m) * per_micro) << "m " << m << " stage " << st;
    }
  }
}

TEST(Pipeline, ZeroPartitionsOverTheDataParallelGroupOfEachStage) {
  const Plan p = MustPlanValid(PipelineGpt(1, 2, 4, 2));
  EXPECT_EQ(p.data_parallel(), 4);
  EXPECT_EQ(p.LayoutText(), "pipeline 2 x data 4");
  EXPECT_EQ(p.groups[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.groups[0].RanksOf(6), (std::vector<int>{4, 5, 6, 7}));
  ASSERT_EQ(p.stage_flat_partition.size(), 2u);
  // Each stage cuts its own flat buffer four ways (stage_1_and_2.py).
  for (int st = 0; st < 2; ++st) {
    int64_t elements = 0;
    for (const Buffer& b : p.buffers)
      if (b.stage == st && b.name == "s" + std::to_string(st) + ".param16.replica") elements = b.bytes.v / 2;
    EXPECT_GT(elements, 0);
    EXPECT_EQ(p.stage_flat_partition[static_cast<size_t>(st)].v * 4, elements) << st;
  }
  // Samples: each data-parallel replica's micro batches.
  EXPECT_EQ(p.samples_per_iteration, 2 * 2 * 4);
  // Model FLOPs per rank: the whole model's over the stages.
  EXPECT_NEAR(p.model_flops * 2, MustPlanValid(PipelineGpt(1, 1, 4, 2)).model_flops, 1e-6 * p.model_flops);
}

TEST(Pipeline, JsonRoundTrip) {
  Scenario s = PipelineGpt(1, 2, 2, 3);
  s.training.activation_checkpointing = true;
  s.hardware.gpu.reserved_memory = Bytes(int64_t{300} << 20);
  const Plan p = MustPlanValid(s);
  // The merged plan keeps the CUDA context's share that reports name.
  EXPECT_EQ(p.gpu_reserved.v, int64_t{300} << 20);
  EXPECT_EQ(p.capacity[static_cast<int>(Tier::kGpu)], s.hardware.gpu.memory - s.hardware.gpu.reserved_memory);
  auto back = DecodePlan(EncodePlan(p));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == p);
  // Plans written before the field (or with nothing reserved) leave it out.
  Plan none = p;
  none.gpu_reserved = Bytes(0);
  EXPECT_EQ(EncodePlan(none).find("gpu_reserved_bytes"), std::string::npos);
  std::string negative = EncodePlan(p);
  negative.replace(negative.find("\"gpu_reserved_bytes\":"), 21, "\"gpu_reserved_bytes\":-");
  EXPECT_FALSE(DecodePlan(negative).ok());
  // A receive names a stage; a plan of one stage keeps stage lists it was given.
  std::string bad = EncodePlan(p);
  bad.replace(bad.find("\"peer_stage\":1"), 14, "\"peer_stage\":-5");
  EXPECT_FALSE(DecodePlan(bad).ok());
  Plan one = MustPlanValid(PipelineGpt(1, 1, 2, 1));
  one.stage_layers = {0, 4};
  auto again = DecodePlan(EncodePlan(one));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(*again == one);
}

TEST(Pipeline, DeepSpeedsRules) {
  for (int zero : {2, 3}) {
    const Scenario s = PipelineGpt(zero, 2, 2, 2);
    bool said = false;
    for (const auto& i : CheckScenario(s))
      said |= i.path == "zero_optimization.stage" &&
              i.message.find("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism") != std::string::npos;
    EXPECT_TRUE(said);
    auto r = BuildPlan(s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("incompatible with pipeline parallelism"), std::string::npos);
  }
  Scenario s = PipelineGpt(1, 4, 1, 2, 3);
  bool said = false;
  for (const auto& i : CheckScenario(s))
    said |= i.path == "parallelism.pipeline" && i.message == "model.layers 3 is fewer than pipeline stages 4";
  EXPECT_TRUE(said);
  EXPECT_FALSE(BuildPlan(s).ok());
}

// The tied token table's gradients are summed before anything reads them:
// with the optimizer on the CPU and no data-parallel peers, the copy of the
// gradients to the CPU follows the exchange (the validator's hazard check).
TEST(Pipeline, TiedGradientsAreSummedBeforeTheStep) {
  for (int data : {1, 2}) {
    Scenario s = PipelineGpt(1, 2, data, 2);
    s.zero.offload_optimizer.device = OffloadDevice::kCpu;
    const Plan p = MustPlanValid(s);
    int exchanged = 0;
    for (const Op& op : p.ops)
      if (op.name.find(".tied.") != std::string::npos) {
        ++exchanged;
        ASSERT_EQ(op.moves.size(), 1u) << op.name;
        EXPECT_EQ(op.kind == OpKind::kRecv ? op.moves[0].dst.bytes.v : op.moves[0].src.bytes.v, 500 * 64 * 2)
            << op.name;
        EXPECT_EQ(op.moves[0].accumulate, op.kind == OpKind::kRecv) << op.name;
      }
    EXPECT_EQ(exchanged, 4);  // a send and a receive on each end
  }
}

// A node holding ranks of two stages: its CPU peak is each stage's own
// peak together (the list's interleaving of the stages is one order of
// many), times the stage's ranks there.
TEST(Pipeline, NodesOfSeveralStagesAddTheirStagesPeaks) {
  Scenario s = PipelineGpt(1, 2, 2, 4);  // one node of 4: ranks 0-1 stage 0, 2-3 stage 1
  s.training.activation_checkpointing = true;
  s.training.cpu_checkpointing = true;
  const Plan p = MustPlanValid(s);
  std::vector<int64_t> live(2, 0), peak(2, 0);
  for (const Buffer& b : p.buffers)
    if (b.resident && b.tier == Tier::kCpu) live[b.stage] += b.bytes.v;
  peak = live;
  for (const Op& op : p.ops) {
    for (BufferId b : op.allocs)
      if (p.buffers[b].tier == Tier::kCpu) live[op.stage] += p.buffers[b].bytes.v;
    peak[op.stage] = std::max(peak[op.stage], live[op.stage]);
    for (BufferId b : op.frees)
      if (p.buffers[b].tier == Tier::kCpu) live[op.stage] -= p.buffers[b].bytes.v;
  }
  ASSERT_GT(peak[0], 0);
  const ValidationReport r = ValidatePlan(p);
  EXPECT_EQ(r.memory.peak[static_cast<int>(Tier::kCpu)].v, 2 * peak[0] + 2 * peak[1]);
  EXPECT_EQ(r.memory.ranks_at_peak[static_cast<int>(Tier::kCpu)], (std::vector<int>{2, 2}));
}

// The validator holds stages apart: a receive needs its send, and nothing
// else may cross.
TEST(Pipeline, ValidatorChecksTheStages) {
  const Plan good = MustPlanValid(PipelineGpt(1, 2, 1, 2));
  auto kinds = [](const Plan& p) {
    std::string k;
    for (const auto& v : ValidatePlan(p).violations) k += v.message + "\n";
    return k;
  };
  Plan p = good;
  for (Op& op : p.ops)
    if (op.kind == OpKind::kRecv) {
      op.deps.pop_back();  // its send
      break;
    }
  EXPECT_NE(kinds(p).find("matching sends"), std::string::npos) << kinds(p);
  p = good;
  for (Op& op : p.ops)
    if (op.stage == 1 && op.kind == OpKind::kForward) {
      op.deps.push_back(0);  // stage 0's first op
      break;
    }
  EXPECT_NE(kinds(p).find("only a receive may depend on its send across stages"), std::string::npos) << kinds(p);
  p = good;
  for (Op& op : p.ops)
    if (op.stage == 1 && !op.reads.empty()) {
      op.reads.push_back(0);  // a stage-0 buffer
      break;
    }
  EXPECT_NE(kinds(p).find("of stage 0"), std::string::npos) << kinds(p);
  p = good;
  p.buffers.back().stage = 5;  // a buffer on no stage: reported, not read out of range
  EXPECT_NE(kinds(p).find("is on stage 5 of 2"), std::string::npos) << kinds(p);
}

}  // namespace
}  // namespace strata
