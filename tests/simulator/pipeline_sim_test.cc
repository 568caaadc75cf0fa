// Pipeline stages in the simulator (issue #16): 1F1B's bubble, sends over
// NVLink or the network, and the symmetric replay of one node per stage.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim_test_util.h"
#include "strata/planner/planner.h"
#include "strata/simulator/sim_report.h"
#include "strata/simulator/simulator.h"
#include "test_util.h"

namespace strata::sim {
namespace {

// An MLP of `layers` equal layers on `pipeline` stages of one rank each:
// equal stages, flat compute, transfers that cost (almost) nothing.
Scenario EqualStages(int layers, int pipeline, int micro_steps) {
  Scenario s;
  s.name = "equal-stages";
  s.model.kind = ModelKind::kMlp;
  s.model.sizes.assign(static_cast<size_t>(layers) + 1, 512);
  testing::RoomyHardware(s, pipeline);
  s.hardware.gpu.peak_flops = FlopRate{1e12};
  s.hardware.gpu.efficiency = 1.0;
  s.hardware.gpu.compute_model = ComputeModel::kFlat;
  s.hardware.nvlink.bandwidth = Bandwidth{1e15};
  s.training.micro_batch_size = 64;
  s.training.gradient_accumulation_steps = micro_steps;
  s.zero.stage = 0;
  s.parallelism.pipeline = pipeline;
  return s;
}

SimResult Sim(const Plan& p, const HardwareSpec& h, SimOptions o = {}) {
  auto r = Simulate(p, h, testing::Exact(o));
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

TEST(PipelineSim, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (int P : {2, 4})
    for (int m : {1, 4, 8, 16}) {
      const Scenario s = EqualStages(8, P, m);
      ASSERT_TRUE(CheckScenario(s).empty());
      const Plan p = *BuildPlan(s);
      const SimResult r = Sim(p, s.hardware);
      const PipelineBubble b = AnalyzePipeline(r.timeline);
      const double want = static_cast<double>(P - 1) / (m + P - 1);
      EXPECT_NEAR(b.fraction, want, 2e-3) << "P " << P << " m " << m;
      // The span: (m + P - 1) micro-batch passes of one stage (forward 1,
      // backward 2 units of its FLOPs).
      const double per_pass = 3 * 2.0 * 64 * 512 * 512 * (8 / P) / 1e12;
      EXPECT_NEAR(b.span_s, (m + P - 1) * per_pass, 2e-3 * b.span_s) << "P " << P << " m " << m;
      for (int st = 0; st < P; ++st)
        EXPECT_NEAR(b.busy_s[static_cast<size_t>(st)], m * per_pass, 1e-9 + 1e-6 * m * per_pass);
    }
}

// Activations cross node boundaries on the network: with nothing else to
// do, each micro batch waits for its transfers, at network bandwidth.
TEST(PipelineSim, SendsCrossNodesOnTheNetwork) {
  Scenario s = EqualStages(2, 2, 1);
  s.hardware.nodes = 2;
  s.hardware.gpus_per_node = 1;
  s.hardware.network.bandwidth = Bandwidth{1e9};
  s.training.micro_batch_size = 1024;  // 1 MiB of activations per boundary
  const Plan p = *BuildPlan(s);
  const SimResult near = Sim(p, s.hardware);
  s.hardware.network.bandwidth = Bandwidth{0.5e9};
  const SimResult far = Sim(p, s.hardware);
  // Two transfers (activation down, gradient up) of 1 MiB: 2 ms more at half the bandwidth.
  const double bytes = 1024.0 * 512 * 2;
  EXPECT_NEAR(far.timeline.iteration_s - near.timeline.iteration_s, 2 * bytes / 1e9, 1e-6);
  // Each transfer first waits the network's latency.
  s.hardware.network.latency = Seconds{1e-3};
  const SimResult late = Sim(p, s.hardware);
  EXPECT_NEAR(late.timeline.iteration_s - far.timeline.iteration_s, 2e-3, 1e-6);
}

// The symmetric replay simulates one node per stage (the closed set of
// peers of node 0) and agrees with every node simulated.
TEST(PipelineSim, SymmetricReplayAgreesWithAllNodes) {
  Scenario s = testing::SmallGpt(1, 2);
  s.model.layers = 4;
  s.hardware.nodes = 4;
  s.parallelism.pipeline = 2;
  s.training.gradient_accumulation_steps = 4;
  const Plan p = *BuildPlan(s);
  const SimResult sym = Sim(p, s.hardware);
  SimOptions all;
  all.reduce_symmetric_nodes = false;
  const SimResult every = Sim(p, s.hardware, all);
  EXPECT_EQ(sym.ranks, (std::vector<int>{0, 1, 4, 5}));  // node 0 and node 2 (stage 1's first)
  EXPECT_EQ(static_cast<int>(every.ranks.size()), 8);
  EXPECT_NEAR(sym.timeline.iteration_s, every.timeline.iteration_s, 1e-9 * every.timeline.iteration_s);
  const SimSummary sum = Summarize(p, sym);
  EXPECT_GT(sum.bubble.fraction, 0);
  const auto j = nlohmann::json::parse(SummaryJson(sym.timeline, sum));
  EXPECT_EQ(j["pipeline"]["stages"], 2);
  EXPECT_NEAR(j["pipeline"]["bubble"].get<double>(), sum.bubble.fraction, 1e-12);
}

}  // namespace
}  // namespace strata::sim
