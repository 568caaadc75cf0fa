// The resource bound (cost/bound.h): hand-computed cases, and a lower
// bound of what the simulator finds for every shipped scenario.
#include "strata/cost/bound.h"

#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "strata/config/scenario_loader.h"
#include "strata/planner/planner.h"
#include "strata/simulator/simulator.h"
#include "test_util.h"

namespace strata::sim {
namespace {

using testing::PlanMaker;
using testing::RoundHardware;

using testing::Exact;  // the bound is of the exact replay

double Of(const ResourceBound& b, const std::string& name) {
  for (const auto& r : b.resources)
    if (r.resource == name) return r.seconds;
  return -1;
}

TEST(Bound, EachResourceIsItsWorkOverItsRate) {
  auto h = RoundHardware(1, 1);
  h.nvme.latency = Seconds{0.001};
  PlanMaker m(h);
  m.Add(OpKind::kForward, Stream::kCompute, 0, 2e12);            // 2 s at 1 TFLOPS
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 5'000'000'000);          // 0.5 s at 10 GB/s
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 4'000'000'000);    // 1 s at 4 GB/s, + 1 ms
  m.Add(OpKind::kNvmeWrite, Stream::kNvmeWrite, 2'000'000'000);  // 1 s at 2 GB/s, + 1 ms
  const ResourceBound b = ComputeResourceBound(m.plan(), h);
  EXPECT_DOUBLE_EQ(Of(b, "compute"), 2.0);
  EXPECT_DOUBLE_EQ(Of(b, "h2d"), 0.5);
  EXPECT_DOUBLE_EQ(Of(b, "nvme_read"), 1.001);
  EXPECT_DOUBLE_EQ(Of(b, "nvme_write"), 1.001);
  EXPECT_EQ(Of(b, "nvme"), -1);  // independent directions: no device resource
  EXPECT_EQ(b.busiest.resource, "compute");
  EXPECT_DOUBLE_EQ(b.busiest.seconds, 2.0);
}

// A collective's copy kernels are its copy_bytes at HBM bandwidth, beside
// the ring's bytes over the link and the reduction.
TEST(Bound, CollectiveCopiesCountInTheCollectiveResource) {
  auto h = RoundHardware(1, 4);  // NVLink 100 GB/s, HBM 1 TB/s
  h.gpu.reduction_bandwidth = Bandwidth{10e9};
  PlanMaker m(h);
  const OpId rs = m.Add(OpKind::kReduceScatter, Stream::kComm, 4'000'000'000);
  const double plain = Of(ComputeResourceBound(m.plan(), h), "collective");
  EXPECT_NEAR(plain, 0.75 * 4e9 / 100e9 + 4e9 / 10e9 + h.nvlink.latency.v, 1e-12);
  m.op(rs).copy_bytes = Bytes(16'000'000'000);
  EXPECT_NEAR(Of(ComputeResourceBound(m.plan(), h), "collective"), plain + 16e9 / 1e12, 1e-12);
}

// A pageable copy: its staging is 2 bytes of CPU memory traffic a byte (the
// cpu resource) and, with cpu.staging_bandwidth, time on its own stream
// before the DMA (the copy's direction).
TEST(Bound, PageableCopiesStageOnTheCpuAndTheirStream) {
  auto h = RoundHardware(1, 1);  // PCIe 10 GB/s, CPU memory 50 GB/s
  const Plan p = testing::OneCopyPlan(h, /*pinned=*/false, /*with_optimizer=*/false);
  ResourceBound b = ComputeResourceBound(p, h);
  EXPECT_DOUBLE_EQ(Of(b, "h2d"), 0.1);
  EXPECT_DOUBLE_EQ(Of(b, "cpu"), 0.04);
  h.cpu.staging_bandwidth = Bandwidth{5e9};
  b = ComputeResourceBound(p, h);
  EXPECT_DOUBLE_EQ(Of(b, "h2d"), 0.1 + 0.2);
  EXPECT_DOUBLE_EQ(Of(b, "cpu"), 0.04);
  auto r = Simulate(p, h, Exact());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->timeline.iteration_s, 0.2 + 0.1, 1e-9);
}

// One device: moving both at once at readwrite_bandwidth, or in turns at the
// solo rates, whichever is less.
TEST(Bound, SharedNvmeDeviceTakesTheBetterOfTurnsAndTogether) {
  auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 1'000'000'000);
  m.Add(OpKind::kNvmeWrite, Stream::kNvmeWrite, 1'000'000'000);
  h.nvme.readwrite_bandwidth = Bandwidth{3e9};  // together: 2 GB / 3 GB/s beats turns (0.25 + 0.5 s)
  ResourceBound b = ComputeResourceBound(m.plan(), h);
  EXPECT_DOUBLE_EQ(Of(b, "nvme"), 2.0 / 3.0);
  EXPECT_EQ(b.busiest.resource, "nvme");
  // The simulator runs both at once: 1.5 GB/s each, done together.
  auto r = Simulate(m.plan(), h, Exact());
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->timeline.iteration_s, 2.0 / 3.0, 1e-9);
  h.nvme.readwrite_bandwidth = Bandwidth{1e9};  // together: 2 s; turns: 0.75 s
  b = ComputeResourceBound(m.plan(), h);
  EXPECT_DOUBLE_EQ(Of(b, "nvme"), 0.75);
}

// Node-wide resources carry every rank of the node.
TEST(Bound, NodeSharedNvmeCountsTheNodesRanks) {
  const auto h = RoundHardware(1, 4);
  PlanMaker m(h);
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 1'000'000'000);
  EXPECT_DOUBLE_EQ(Of(ComputeResourceBound(m.plan(), h), "nvme_read"), 1.0);  // 4 GB at 4 GB/s
}

// No simulated iteration beats the bound, on any shipped scenario or stage.
TEST(Bound, IsALowerBoundOfTheSimulation) {
  std::vector<Scenario> all;
  for (const auto& name : config::BuiltinScenarioNames()) all.push_back(testing::Builtin(name));
  for (int stage = 0; stage <= 3; ++stage)
    for (int gpus : {1, 2}) {
      Scenario s = testing::SmallGpt(stage, gpus);
      if (stage == 3) {
        s.zero.offload_param.device = OffloadDevice::kNvme;
        s.zero.offload_optimizer.device = OffloadDevice::kNvme;
        s.hardware.nvme.readwrite_bandwidth = Bandwidth{1e9};
        s.hardware.nvme.latency = Seconds{1e-4};
      }
      all.push_back(s);
    }
  for (int m : {1, 4}) {  // pipeline stages: the fill and drain term; sends' latency
    Scenario s = testing::SmallGpt(1, 2);
    s.model.layers = 4;
    s.parallelism.pipeline = 2;
    s.training.gradient_accumulation_steps = m;
    all.push_back(s);
    s.hardware.nodes = 2;
    s.hardware.network.latency = Seconds{1e-4};
    s.hardware.nvlink.latency = Seconds{1e-5};
    all.push_back(s);
  }
  // Pageable copies (gpt-tiny has some), one copy's staging bound.
  Scenario staged = testing::Builtin("gpt-tiny");
  staged.hardware.cpu.staging_bandwidth = Bandwidth{1e9};
  all.push_back(staged);
  for (const Scenario& s : all) {
    auto plan = BuildPlan(s);
    ASSERT_TRUE(plan.ok()) << s.name;
    auto r = Simulate(*plan, s.hardware, Exact());
    ASSERT_TRUE(r.ok()) << s.name;
    const ResourceBound b = ComputeResourceBound(*plan, s.hardware);
    EXPECT_GT(b.busiest.seconds, 0) << s.name;
    EXPECT_LE(b.busiest.seconds, r->timeline.iteration_s * (1 + 1e-9))
        << s.name << ": bound " << b.busiest.resource << " " << b.busiest.seconds << " s, simulated "
        << r->timeline.iteration_s << " s";
  }
}

}  // namespace
}  // namespace strata::sim
