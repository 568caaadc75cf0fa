// SimOptions::jitter (docs/simulator.md "Symmetry breaking"): every
// activity's work scaled by 1 + jitter x u, u in [-1, 1) hashed from the
// seed, rank, op and ring step. Bounded and deterministic; and the reason it
// exists: SPMD ranks whose step has no collective inside (DeepSpeed's
// optimizer sub-group loop) leave an exact replay's lockstep, so that one
// rank's NVMe writes overlap another's reads.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sim_test_util.h"
#include "strata/planner/planner.h"
#include "strata/simulator/simulator.h"
#include "test_util.h"

namespace strata::sim {
namespace {

using testing::PlanMaker;
using testing::RoundHardware;

SimResult Sim(const Plan& p, const HardwareSpec& h, double jitter, uint64_t seed = 0) {
  SimOptions o;
  o.jitter = jitter;
  o.jitter_seed = seed;
  auto r = Simulate(p, h, o);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

// One transfer alone: bytes over bandwidth, times a factor within the
// jitter of 1 (and not exactly 1: the hash draws a u away from 0).
TEST(Jitter, ScalesOneTransferWithinItsAmount) {
  const auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);  // 0.1 s at 10 GB/s exactly
  for (const double j : {1e-3, 0.1}) {
    const double t = Sim(m.plan(), h, j).timeline.iteration_s;
    EXPECT_LE(std::abs(t - 0.1), 0.1 * j + 1e-12) << j;
    EXPECT_NE(t, 0.1) << j;
  }
  EXPECT_DOUBLE_EQ(Sim(m.plan(), h, 0).timeline.iteration_s, 0.1);
}

TEST(Jitter, IsDeterministicAndSeeded) {
  const auto h = RoundHardware(1, 4);
  PlanMaker m(h);
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 1'000'000'000);
  m.Add(OpKind::kAllGather, Stream::kComm, 1'000'000'000);
  const Plan& p = m.plan();
  const SimResult a = Sim(p, h, 1e-3, 7), b = Sim(p, h, 1e-3, 7), c = Sim(p, h, 1e-3, 8);
  ASSERT_EQ(a.timeline.ops.size(), b.timeline.ops.size());
  bool seed_differs = false;
  for (size_t i = 0; i < a.timeline.ops.size(); ++i) {
    EXPECT_EQ(a.timeline.ops[i].end_s, b.timeline.ops[i].end_s);
    seed_differs |= a.timeline.ops[i].end_s != c.timeline.ops[i].end_s;
  }
  EXPECT_TRUE(seed_differs);
}

TEST(Jitter, OutOfRangeIsRefused) {
  const auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1000);
  for (const double j : {-1e-3, 0.5, 2.0}) {
    SimOptions o;
    o.jitter = j;
    auto r = Simulate(m.plan(), h, o);
    ASSERT_FALSE(r.ok()) << j;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  }
}

// The 1T GPT on a DGX-2 (optimizer states and parameters on NVMe, 16 ranks
// sharing 8 drives whose reads and writes are independent), 4 layers. The
// exact replay keeps the 16 ranks' steps in lockstep: every rank reads,
// then steps, then writes, at the same instants. Any jitter lets them
// drift apart (nothing inside the sub-group loop waits for another rank),
// so reads and writes overlap and the iteration is shorter; by about the
// same whatever the seed.
TEST(Jitter, RanksLeaveTheLockstepOfTheOptimizerStep) {
  Scenario s = testing::Builtin("gpt-1t-dgx2");
  s.model.layers = 4;
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // The last sub-group's NVMe read on every rank: its start.
  auto read_starts = [&](const SimResult& r) {
    OpId last_read = -1;
    for (const Op& o : plan->ops)
      if (o.kind == OpKind::kNvmeRead && o.name.rfind("step.sub_group", 0) == 0) last_read = o.id;
    std::map<int, double> at;
    for (const TimelineOp& op : r.timeline.ops)
      if (op.op == last_read) at[op.rank] = op.start_s;
    return at;
  };
  const SimResult exact = Sim(*plan, s.hardware, 0);
  const auto lockstep = read_starts(exact);
  ASSERT_EQ(lockstep.size(), 16u);
  for (const auto& [rank, t] : lockstep) EXPECT_EQ(t, lockstep.begin()->second) << rank;

  const SimResult a = Sim(*plan, s.hardware, 1e-3, 0), b = Sim(*plan, s.hardware, 1e-3, 1);
  const auto drift = read_starts(a);
  double lo = 1e300, hi = 0;
  for (const auto& [rank, t] : drift) lo = std::min(lo, t), hi = std::max(hi, t);
  EXPECT_GT(hi - lo, 1.0);  // seconds apart by the last sub-group
  EXPECT_LT(a.timeline.iteration_s, 0.97 * exact.timeline.iteration_s);
  EXPECT_NEAR(a.timeline.iteration_s, b.timeline.iteration_s, 0.01 * a.timeline.iteration_s);
}

}  // namespace
}  // namespace strata::sim
