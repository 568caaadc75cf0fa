// The bandwidth model against hand-computed answers.
#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <string>

#include "sim_test_util.h"
#include "strata/cost/bound.h"
#include "strata/planner/planner.h"
#include "strata/simulator/simulator.h"
#include "test_util.h"

namespace strata::sim {
namespace {

using testing::OneCopyPlan;
using testing::PlanMaker;
using testing::RoundHardware;

const OpSpan& SpanOf(const SimResult& r, OpId op, int rank = 0) {
  for (const auto& o : r.timeline.ops)
    if (o.op == op && o.rank == rank) {
      static OpSpan s;
      s = {o.rank, o.op, o.start_s, o.end_s};
      return s;
    }
  throw std::runtime_error("no span");
}

// The replay modes, which must give the same times: an exec per rank,
// activity owners, signal completions, and signals with flow domains.
std::array<SimOptions, 4> EveryReplayMode() {
  std::array<SimOptions, 4> m;
  m[0].activity_owners_from_ranks = std::numeric_limits<int>::max();
  for (int i = 1; i < 4; ++i) m[i].activity_owners_from_ranks = 0;
  m[1].signal_completions = false;
  m[2].signal_completions = m[3].signal_completions = true;
  m[2].flow_domains = false;
  m[3].flow_domains = true;
  return m;
}

// The analytic model, replayed exactly.
SimResult Sim(const Plan& p, const HardwareSpec& h, SimOptions o = {}) {
  auto r = Simulate(p, h, testing::Exact(o));
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

constexpr double kTol = 1e-9;

TEST(Analytic, OneTransferTakesBytesOverBandwidth) {
  const auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);
  const SimResult r = Sim(m.plan(), h);
  EXPECT_NEAR(r.timeline.iteration_s, 0.1, kTol);  // 1 GB at 10 GB/s
  EXPECT_EQ(r.activities, 1);
}

// Hooks take their host time on the host stream, one after another, and
// run ahead of the GPU: the second hook ends while the first module
// computes, so only the first one is exposed (0.5 + 1 + 1 s), in every
// replay mode; the resource bound counts the host's 1 s.
TEST(Analytic, HooksRunAheadOfTheGpu) {
  const auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  const OpId h1 = m.Add(OpKind::kHook, Stream::kHost, 0);
  m.op(h1).host_seconds = 0.5;
  const OpId c1 = m.Add(OpKind::kForward, Stream::kCompute, 0, 1e12, {h1});
  const OpId h2 = m.Add(OpKind::kHook, Stream::kHost, 0);
  m.op(h2).host_seconds = 0.5;
  const OpId c2 = m.Add(OpKind::kForward, Stream::kCompute, 0, 1e12, {h2});
  for (const SimOptions& o : EveryReplayMode()) {
    const SimResult r = Sim(m.plan(), h, o);
    EXPECT_NEAR(r.timeline.iteration_s, 2.5, kTol);
    EXPECT_NEAR(SpanOf(r, h2).end_s, 1.0, kTol);
    EXPECT_NEAR(SpanOf(r, c2).start_s, SpanOf(r, c1).end_s, kTol);
  }
  const ResourceBound b = ComputeResourceBound(m.plan(), h);
  double host = -1;
  for (const ResourceTime& t : b.resources)
    if (t.resource == "host") host = t.seconds;
  EXPECT_NEAR(host, 1.0, kTol);
}

TEST(Analytic, H2DAndD2HInParallelDoNotShare) {
  const auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);
  m.Add(OpKind::kCopyD2H, Stream::kD2H, 1'000'000'000);
  const SimResult r = Sim(m.plan(), h);
  EXPECT_NEAR(SpanOf(r, 0).end_s, 0.1, kTol);
  EXPECT_NEAR(SpanOf(r, 1).end_s, 0.1, kTol);
}

TEST(Analytic, TwoFlowsOnOnePcieDirectionShareIt) {
  // No NVLink: rank 0's allgather flow reaches rank 1 through rank 1's PCIe
  // host-to-device direction, which rank 1's own H2D copy also uses.
  const auto h = RoundHardware(1, 2, /*nvlink=*/false);
  PlanMaker m(h);
  m.Add(OpKind::kAllGather, Stream::kComm, 2'000'000'000);  // each rank sends 1 GB
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);
  const SimResult r = Sim(m.plan(), h);
  // Both 1 GB flows share 10 GB/s: each gets 5 GB/s and ends at 0.2 s.
  EXPECT_NEAR(SpanOf(r, 1, 1).end_s, 0.2, kTol);
  EXPECT_NEAR(SpanOf(r, 0, 0).end_s, 0.2, kTol);
  // Alone, the copy takes 0.1 s.
  PlanMaker alone(h);
  alone.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);
  EXPECT_NEAR(Sim(alone.plan(), h).timeline.iteration_s, 0.1, kTol);
}

// A copy from pageable CPU memory first passes its bytes through pinned
// staging, a memcpy (2 bytes of CPU memory traffic per byte: a read and a
// write), then crosses PCIe; the staging pass shares the CPU's memory
// bandwidth with the optimizer.
TEST(Analytic, PageableCopyStagesThroughCpuMemoryFirst) {
  const auto h = RoundHardware(1, 1);
  Plan p = OneCopyPlan(h, /*pinned=*/false, /*with_optimizer=*/true);
  ASSERT_TRUE(IsPageableCopy(p, p.ops[0]));
  // Staging (2 GB of traffic) and the optimizer (1 GB) share 50 GB/s: the
  // optimizer ends at 0.04 s, staging, 1 GB left alone, at 0.06 s; then
  // 1 GB at 10 GB/s over PCIe.
  SimResult r = Sim(p, h);
  EXPECT_NEAR(SpanOf(r, 1).end_s, 0.04, kTol);
  EXPECT_NEAR(SpanOf(r, 0).end_s, 0.16, kTol);
  // Pinned: the PCIe transfer alone, beside the optimizer.
  p.buffers[0].pinned = true;
  ASSERT_FALSE(IsPageableCopy(p, p.ops[0]));
  r = Sim(p, h);
  EXPECT_NEAR(SpanOf(r, 0).end_s, 0.1, kTol);
  EXPECT_NEAR(SpanOf(r, 1).end_s, 0.02, kTol);
}

// cpu.staging_bandwidth: one thread stages a copy, so a copy alone stages
// at that rate however fast the node's memory is; with many copies at once
// the memory binds first. Every replay mode gives the same times.
TEST(Analytic, PageableStagingIsBoundPerCopyAndByTheNodesMemory) {
  struct Case {
    int gpus;
    double staging;  // GB/s per copy, 0: none
    double end_s;
  };
  // 1 GPU: 2 GB of traffic at min(2 x 5, 50) = 10 GB/s (0.2 s), or at 50
  // (0.04 s) without the limit, then 0.1 s of PCIe. 8 GPUs: 16 GB at the
  // node's 50 GB/s (0.32 s) whether or not each copy may reach 10.
  for (const Case& c : {Case{1, 5, 0.3}, Case{1, 0, 0.14}, Case{8, 5, 0.42}, Case{8, 0, 0.42}}) {
    HardwareSpec h = RoundHardware(1, c.gpus);
    h.cpu.staging_bandwidth = Bandwidth{c.staging * 1e9};
    const Plan p = OneCopyPlan(h, /*pinned=*/false, /*with_optimizer=*/false);
    for (const SimOptions& o : EveryReplayMode()) {
      SCOPED_TRACE(std::to_string(c.gpus) + " GPUs, staging " + std::to_string(c.staging) + " GB/s, signals " +
                   std::to_string(o.signal_completions) + ", domains " + std::to_string(o.flow_domains));
      const SimResult r = Sim(p, h, o);
      for (int rank = 0; rank < c.gpus; ++rank) EXPECT_NEAR(SpanOf(r, 0, rank).end_s, c.end_s, 1e-6);
    }
  }
}

// A D2H into a transient pageable buffer of 32 MiB or more that the copy
// allocates lands in fresh pages (scheduler FreshPageBytes): the host first
// faults in each 4 KiB page (cpu.page_fault_time), then the copy stages and
// crosses PCIe, in every replay mode; the bound counts it on the copy's
// path. Pinned, resident, smaller or allocated elsewhere: no first touch.
TEST(Analytic, CopyIntoFreshPagesFaultsThemInFirst) {
  struct Case {
    const char* what;
    int64_t bytes;
    bool pinned, resident, allocated;
    double fault_s;  // page_fault_time
    double end_s;
  };
  // 1,024,000,000 bytes = 250,000 pages: 0.5 s at 2 us each; staging 2.048
  // GB of traffic at 50 GB/s (0.04096 s); PCIe at 10 GB/s (0.1024 s).
  constexpr int64_t kB = 1'024'000'000;
  constexpr int64_t kSmall = (int64_t{32} << 20) - 4096;
  const double small_copy = 2.0 * kSmall / 50e9 + kSmall / 10e9;
  for (const Case& c :
       {Case{"fresh", kB, false, false, true, 2e-6, 0.64336}, Case{"not charged", kB, false, false, true, 0, 0.14336},
        Case{"pinned", kB, true, false, true, 2e-6, 0.1024}, Case{"resident", kB, false, true, true, 2e-6, 0.14336},
        Case{"allocated before", kB, false, false, false, 2e-6, 0.14336},
        Case{"under 32 MiB", kSmall, false, false, true, 2e-6, small_copy}}) {
    SCOPED_TRACE(c.what);
    HardwareSpec h = RoundHardware(1, 1);
    h.cpu.page_fault_time = Seconds{c.fault_s};
    PlanMaker m(h);
    m.Add(OpKind::kCopyD2H, Stream::kCompute, c.bytes);
    Plan p = m.plan();
    p.buffers = {{0, "ckpt", Tier::kGpu, StateKind::kActivation, Bytes(c.bytes), true},
                 {1, "ckpt_cpu", Tier::kCpu, StateKind::kActivation, Bytes(c.bytes), c.resident, c.pinned}};
    p.ops[0].reads = {0};
    p.ops[0].writes = {1};
    if (c.allocated) p.ops[0].allocs = {1};
    p.ops[0].moves = {{Region{0, Bytes(0), Bytes(c.bytes)}, Region{1, Bytes(0), Bytes(c.bytes)}}};
    for (const SimOptions& o : EveryReplayMode()) {
      SCOPED_TRACE("signals " + std::to_string(o.signal_completions) + ", domains " + std::to_string(o.flow_domains));
      EXPECT_NEAR(SpanOf(Sim(p, h, o), 0).end_s, c.end_s, 1e-6);
    }
    EXPECT_NEAR(ComputeResourceBound(p, h).busiest.seconds, c.end_s - (c.pinned ? 0 : 2.0 * c.bytes / 50e9), 1e-6);
  }
}

// A copy's side kernels (Op::copy_bytes: stage 2's add of the CPU gradient
// accumulator) run at HBM bandwidth after its DMA, on its stream, in every
// replay mode, and the bound counts them on that stream.
TEST(Analytic, CopySideKernelsFollowTheDma) {
  for (int gpus : {1, 4}) {
    HardwareSpec h = RoundHardware(1, gpus);
    h.gpu.hbm_bandwidth = Bandwidth{100e9};
    Plan p = OneCopyPlan(h, /*pinned=*/true, /*with_optimizer=*/false);
    p.ops[0].copy_bytes = Bytes(3'000'000'000);
    // 1 GB at 10 GB/s of PCIe, then 3 GB of HBM traffic at 100 GB/s.
    for (const SimOptions& o : EveryReplayMode()) {
      SCOPED_TRACE(std::to_string(gpus) + " GPUs, signals " + std::to_string(o.signal_completions) + ", domains " +
                   std::to_string(o.flow_domains));
      const SimResult r = Sim(p, h, o);
      for (int rank = 0; rank < gpus; ++rank) EXPECT_NEAR(SpanOf(r, 0, rank).end_s, 0.13, 1e-6);
    }
    const ResourceBound b = ComputeResourceBound(p, h);
    double h2d = -1;
    for (const ResourceTime& t : b.resources)
      if (t.resource == "h2d") h2d = t.seconds;
    EXPECT_NEAR(h2d, 0.13, 1e-9);
  }
  // Moves that name ranks: op bytes and copy_bytes are the mean rank's, and
  // each rank runs kernels in proportion to its own bytes. Here rank 1 owns
  // the whole 1 GB (the mean over 2 ranks is 0.5 GB): 3 GB of kernels after
  // its DMA; rank 0 has nothing to copy.
  HardwareSpec h = RoundHardware(1, 2);
  h.gpu.hbm_bandwidth = Bandwidth{100e9};
  Plan p = OneCopyPlan(h, /*pinned=*/true, /*with_optimizer=*/false);
  p.ops[0].moves[0].rank = 1;
  p.ops[0].bytes = Bytes(500'000'000);
  p.ops[0].copy_bytes = Bytes(1'500'000'000);
  for (const SimOptions& o : EveryReplayMode()) {
    SCOPED_TRACE("rank moves, signals " + std::to_string(o.signal_completions) + ", domains " +
                 std::to_string(o.flow_domains));
    const SimResult r = Sim(p, h, o);
    EXPECT_NEAR(SpanOf(r, 0, 1).end_s, 0.13, 1e-6);
    EXPECT_NEAR(SpanOf(r, 0, 0).end_s, 0.0, 1e-6);
  }
  double h2d = -1;
  for (const ResourceTime& t : ComputeResourceBound(p, h).resources)
    if (t.resource == "h2d") h2d = t.seconds;
  EXPECT_NEAR(h2d, 0.13, 1e-9);
}

TEST(Analytic, NvmeReadsOfAllGpusShareTheNodesBandwidth) {
  const auto h = RoundHardware(1, 4);
  PlanMaker m(h);
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 1'000'000'000);
  const SimResult r = Sim(m.plan(), h);
  // 4 ranks x 1 GB at 4 GB/s shared.
  for (int rank = 0; rank < 4; ++rank) EXPECT_NEAR(SpanOf(r, 0, rank).end_s, 1.0, kTol);
  // Reads and writes do not share.
  PlanMaker rw(h);
  rw.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 1'000'000'000);
  rw.Add(OpKind::kNvmeWrite, Stream::kNvmeWrite, 500'000'000);
  const SimResult r2 = Sim(rw.plan(), h);
  EXPECT_NEAR(SpanOf(r2, 0).end_s, 1.0, kTol);
  EXPECT_NEAR(SpanOf(r2, 1).end_s, 1.0, kTol);  // 4 x 0.5 GB at 2 GB/s
}

TEST(Analytic, PerOpLatencyComesBeforeTheFlowAndSharesNothing) {
  auto h = RoundHardware(1, 1);
  h.nvme.read_bandwidth = Bandwidth{1e9};
  h.nvme.latency = Seconds{0.01};
  h.pcie.latency = Seconds{0.002};
  PlanMaker m(h);
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 100'000'000);  // 10 ms + 100 ms
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 100'000'000);  // then 10 ms + 100 ms
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);      // 2 ms + 100 ms at 10 GB/s, alongside
  const SimResult r = Sim(m.plan(), h);
  EXPECT_NEAR(SpanOf(r, 0).start_s, 0.0, kTol);
  EXPECT_NEAR(SpanOf(r, 0).end_s, 0.11, kTol);
  EXPECT_NEAR(SpanOf(r, 1).end_s, 0.22, kTol);
  EXPECT_NEAR(SpanOf(r, 2).end_s, 0.102, kTol);
  // Two reads in flight at once: both latencies elapse together, then the
  // flows share the link.
  auto h2 = RoundHardware(1, 2);
  h2.nvme.read_bandwidth = Bandwidth{1e9};
  h2.nvme.latency = Seconds{0.01};
  PlanMaker two(h2);
  two.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 100'000'000);
  const SimResult r2 = Sim(two.plan(), h2);
  EXPECT_NEAR(SpanOf(r2, 0, 0).end_s, 0.21, kTol);
  EXPECT_NEAR(SpanOf(r2, 0, 1).end_s, 0.21, kTol);
}

TEST(Analytic, ReadsAndWritesShareTheDeviceWhenItSaysSo) {
  auto h = RoundHardware(1, 1);
  h.nvme.read_bandwidth = Bandwidth{1e9};
  h.nvme.write_bandwidth = Bandwidth{1e9};
  h.nvme.readwrite_bandwidth = Bandwidth{1e9};
  PlanMaker m(h);
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 1'000'000'000);
  m.Add(OpKind::kNvmeWrite, Stream::kNvmeWrite, 500'000'000);
  const SimResult r = Sim(m.plan(), h);
  // 0.5 GB/s each until the write ends (1 s), then the read alone at 1 GB/s
  // for its last 0.5 GB: both directions together never exceed 1 GB/s.
  EXPECT_NEAR(SpanOf(r, 1).end_s, 1.0, kTol);
  EXPECT_NEAR(SpanOf(r, 0).end_s, 1.5, kTol);
  // Alone, each direction keeps its own rate.
  PlanMaker alone(h);
  alone.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 1'000'000'000);
  EXPECT_NEAR(Sim(alone.plan(), h).timeline.iteration_s, 1.0, kTol);
}

TEST(Analytic, ComputeBoundTimeIsFlopsOverRate) {
  auto h = RoundHardware(1, 1);
  h.gpu.efficiency = 0.5;
  PlanMaker m(h);
  const OpId f = m.Add(OpKind::kForward, Stream::kCompute, 0, 3e12);
  m.Add(OpKind::kBackward, Stream::kCompute, 0, 6e12, {f});
  const SimResult r = Sim(m.plan(), h);
  EXPECT_NEAR(r.timeline.iteration_s, 9e12 / 0.5e12, 1e-6);
}

// Signal mode times the compute stream's ops (one at a time on their GPU);
// a hand-made pass on another stream shares the GPU with them, in every mode.
TEST(Analytic, PassesOnTwoStreamsShareTheGpuInEveryMode) {
  const auto h = RoundHardware(1, 1);
  SimOptions maestro, signals;
  signals.activity_owners_from_ranks = 0;
  signals.signal_completions = true;
  for (const SimOptions& o : {maestro, signals}) {
    PlanMaker alone(h);
    const OpId f = alone.Add(OpKind::kForward, Stream::kCompute, 0, 3e12);
    alone.Add(OpKind::kBackward, Stream::kCompute, 0, 1e12, {f});
    const SimResult a = Sim(alone.plan(), h, o);
    EXPECT_NEAR(SpanOf(a, 0).end_s, 3, kTol);
    EXPECT_NEAR(SpanOf(a, 1).end_s, 4, kTol);
    PlanMaker two(h);
    two.Add(OpKind::kForward, Stream::kCompute, 0, 3e12);
    two.Add(OpKind::kForward, Stream::kComm, 0, 1e12);
    const SimResult b = Sim(two.plan(), h, o);
    EXPECT_NEAR(SpanOf(b, 1).end_s, 2, kTol);  // half the GPU each until then
    EXPECT_NEAR(SpanOf(b, 0).end_s, 4, kTol);
  }
}

TEST(Analytic, OptimizerStepsAreMemoryBound) {
  const auto h = RoundHardware(1, 2);
  PlanMaker m(h);
  m.Add(OpKind::kOptimizerStep, Stream::kCpuOptim, 10'000'000'000);  // per rank, CPU shared by 2 ranks
  m.Add(OpKind::kOptimizerStep, Stream::kCompute, 10'000'000'000);   // GPU: HBM-bound
  const SimResult r = Sim(m.plan(), h);
  EXPECT_NEAR(SpanOf(r, 0).end_s, 2 * 10e9 / 50e9, 1e-9);
  EXPECT_NEAR(SpanOf(r, 1).end_s, 10e9 / 1e12, 1e-9);
}

TEST(Analytic, RingCollectivesMoveNMinusOneOverNOfTheBytes) {
  const auto h = RoundHardware(1, 4);
  PlanMaker m(h);
  const OpId ag = m.Add(OpKind::kAllGather, Stream::kComm, 4'000'000'000);
  const OpId rs = m.Add(OpKind::kReduceScatter, Stream::kComm, 4'000'000'000);
  const OpId ar = m.Add(OpKind::kAllReduce, Stream::kComm, 4'000'000'000);
  const SimResult r = Sim(m.plan(), h);
  const double one = 0.75 * 4e9 / 100e9;  // (n-1)/n x bytes over NVLink
  EXPECT_NEAR(SpanOf(r, ag).end_s - SpanOf(r, ag).start_s, one, kTol);
  EXPECT_NEAR(SpanOf(r, rs).end_s - SpanOf(r, rs).start_s, one, kTol);
  EXPECT_NEAR(SpanOf(r, ar).end_s - SpanOf(r, ar).start_s, 2 * one, kTol);
}

TEST(Analytic, ReductionsCostTheirBytesOverTheReductionRateAfterTheRing) {
  auto h = RoundHardware(1, 4);
  h.gpu.reduction_bandwidth = Bandwidth{10e9};
  PlanMaker m(h);
  const OpId ag = m.Add(OpKind::kAllGather, Stream::kComm, 4'000'000'000);
  const OpId rs = m.Add(OpKind::kReduceScatter, Stream::kComm, 4'000'000'000);
  const OpId ar = m.Add(OpKind::kAllReduce, Stream::kComm, 4'000'000'000);
  const SimResult r = Sim(m.plan(), h);
  const double one = 0.75 * 4e9 / 100e9, reduce = 4e9 / 10e9;
  EXPECT_NEAR(SpanOf(r, ag).end_s - SpanOf(r, ag).start_s, one, kTol);  // a gather reduces nothing
  EXPECT_NEAR(SpanOf(r, rs).end_s - SpanOf(r, rs).start_s, one + reduce, kTol);
  EXPECT_NEAR(SpanOf(r, ar).end_s - SpanOf(r, ar).start_s, 2 * one + reduce, kTol);
}

// A collective's copy kernels (flattening, copying out, pre-dividing) take
// their bytes at HBM bandwidth on top of the ring and the reduction, in
// both collective models.
TEST(Analytic, CollectiveCopiesCostTheirBytesOverHbmBandwidth) {
  auto h = RoundHardware(1, 4);  // HBM 1 TB/s
  h.gpu.reduction_bandwidth = Bandwidth{10e9};
  PlanMaker m(h);
  const OpId ag = m.Add(OpKind::kAllGather, Stream::kComm, 4'000'000'000);
  const OpId rs = m.Add(OpKind::kReduceScatter, Stream::kComm, 4'000'000'000);
  const OpId ar = m.Add(OpKind::kAllReduce, Stream::kComm, 4'000'000'000);
  m.op(ag).copy_bytes = Bytes(12'000'000'000);
  m.op(rs).copy_bytes = Bytes(16'000'000'000);
  m.op(ar).copy_bytes = Bytes(24'000'000'000);
  const double one = 0.75 * 4e9 / 100e9, reduce = 4e9 / 10e9;
  for (auto model : {CollectiveModel::kRing, CollectiveModel::kRingSteps}) {
    SimOptions o;
    o.collectives = model;
    const SimResult r = Sim(m.plan(), h, o);
    EXPECT_NEAR(SpanOf(r, ag).end_s - SpanOf(r, ag).start_s, one + 12e9 / 1e12, kTol);
    EXPECT_NEAR(SpanOf(r, rs).end_s - SpanOf(r, rs).start_s, one + reduce + 16e9 / 1e12, kTol);
    EXPECT_NEAR(SpanOf(r, ar).end_s - SpanOf(r, ar).start_s, 2 * one + reduce + 24e9 / 1e12, kTol);
  }
}

TEST(Analytic, InterNodeRingIsLimitedByTheNetwork) {
  const auto h = RoundHardware(2, 2);
  PlanMaker m(h);
  m.Add(OpKind::kAllGather, Stream::kComm, 4'000'000'000);
  const SimResult r = Sim(m.plan(), h);
  EXPECT_NEAR(r.timeline.iteration_s, 0.75 * 4e9 / 20e9, kTol);  // slowest hop: 20 GB/s
}

// The per-step ring and the one-flow ring agree on small worlds, and the
// one-node symmetry reduction agrees with simulating every node.
TEST(Analytic, CollectiveModelsAndSymmetryAgree) {
  for (auto [nodes, gpn, nvlink] : {std::tuple{1, 4, true}, {2, 2, true}, {3, 2, false}, {4, 1, true}}) {
    const auto h = RoundHardware(nodes, gpn, nvlink);
    PlanMaker m(h);
    const OpId a = m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 300'000'000);
    const OpId g = m.Add(OpKind::kAllGather, Stream::kComm, 3'000'000'000, 0, {a});
    m.Add(OpKind::kCopyH2D, Stream::kH2D, 500'000'000, 0, {a});
    m.Add(OpKind::kAllReduce, Stream::kComm, 1'000'000'000, 0, {g});
    std::vector<double> times;
    for (auto model : {CollectiveModel::kRing, CollectiveModel::kRingSteps})
      for (bool reduce : {true, false}) {
        SimOptions o;
        o.collectives = model;
        o.reduce_symmetric_nodes = reduce;
        times.push_back(Sim(m.plan(), h, o).timeline.iteration_s);
      }
    for (double t : times) EXPECT_NEAR(t, times[0], 1e-9) << nodes << "x" << gpn;
  }
}

TEST(Analytic, StreamsAreFifoAndDepsAreHonoured) {
  const auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);  // same stream: after the first
  const OpId rd = m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 400'000'000);
  m.Add(OpKind::kForward, Stream::kCompute, 0, 1e11, {rd});
  const SimResult r = Sim(m.plan(), h);
  EXPECT_NEAR(SpanOf(r, 1).start_s, 0.1, kTol);
  EXPECT_NEAR(SpanOf(r, 1).end_s, 0.2, kTol);
  EXPECT_NEAR(SpanOf(r, 3).start_s, 0.1, kTol);
  EXPECT_NEAR(SpanOf(r, 3).end_s, 0.2, kTol);
}

// A delayed parameter update (policy.delayed_update) on GPT-2 1.5B with
// ZeRO-Offload, the CPU Adam made as long as the forward and backward:
// ordinarily the iteration holds both; delayed, the step runs beside them,
// so the iteration loses the step's time and is no shorter than either.
TEST(Analytic, DelayedUpdateTakesTheCpuStepOffTheCriticalPath) {
  Scenario s = strata::testing::Builtin("gpt2-1.5b-v100");  // ZeRO-Offload: stage 2, Adam on the CPU
  s.training.micro_batch_size = 1;
  auto sim = [&](int warmup, double* step_s, double* compute_s) {
    s.policy.delayed_update_warmup = warmup;
    auto plan = BuildPlan(s);
    if (!plan.ok()) throw std::runtime_error(plan.status().message());
    auto r = Simulate(*plan, s.hardware, {});
    if (!r.ok()) throw std::runtime_error(r.status().message());
    *step_s = *compute_s = 0;
    for (const TimelineOp& o : r->timeline.ops) {
      if (o.kind() == OpKind::kOptimizerStep) *step_s += o.end_s - o.start_s;
      if (o.stream() == Stream::kCompute) *compute_s += o.end_s - o.start_s;
    }
    return r->timeline.iteration_s;
  };
  double step = 0, compute = 0;
  sim(-1, &step, &compute);
  // CPU Adam's rate set so that the step takes as long as the compute.
  s.hardware.cpu.memory_bandwidth = Bandwidth{s.hardware.cpu.memory_bandwidth.bytes_per_s * step / compute};
  double step0 = 0, compute0 = 0, step1 = 0, compute1 = 0;
  const double ordinary = sim(-1, &step0, &compute0);
  const double delayed = sim(5, &step1, &compute1);
  ASSERT_NEAR(step0 / compute0, 1.0, 0.05);
  EXPECT_NEAR(step1, step0, 0.02 * step0);  // the same work (each activity's jitter aside)
  EXPECT_GE(ordinary, step0 + compute0);
  EXPECT_GE(delayed, std::max(step1, compute1));
  // The step's time leaves the iteration almost whole (what remains: the
  // parameters' copy and the last gradient copies, in both).
  EXPECT_GT(ordinary - delayed, 0.9 * step0) << "ordinary " << ordinary << " s, delayed " << delayed << " s";
}

}  // namespace
}  // namespace strata::sim
