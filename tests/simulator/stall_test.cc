// SimOptions::stall_rate / stall_time (docs/simulator.md "Stalls"): a
// compute op of s seconds stalls with probability rate x s and then takes
// stall_time more. Checked: the exact cost in every replay mode, the draws'
// independence from stall_time, the amplification by a collective after
// every op (one rank's stall holds up the group), every node simulated, and
// the refusal of bad values.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <thread>

#include "sim_test_util.h"
#include "strata/simulator/simulator.h"

namespace strata::sim {
namespace {

using testing::PlanMaker;
using testing::RoundHardware;

SimResult Sim(const Plan& p, const HardwareSpec& h, SimOptions o) {
  auto r = Simulate(p, h, o);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

SimOptions Stalls(double rate, double time, uint64_t seed = 0) {
  SimOptions o;
  o.jitter = 0;  // exact, so that a stall is the only change
  o.jitter_seed = seed;
  o.stall_rate = rate;
  o.stall_time = time;
  return o;
}

// One forward of 1 s (1e12 FLOPs at 1 TFLOPS): at a rate of 2 per second
// its probability is over 1, so it stalls, in each replay mode (a timer in
// signal mode, a longer Exec otherwise); at a rate near 0 it does not.
TEST(Stalls, AnOpThatStallsTakesTheStallTimeMore) {
  const auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  m.Add(OpKind::kForward, Stream::kCompute, 0, 1e12);
  const double base = Sim(m.plan(), h, Stalls(0, 0)).timeline.iteration_s;
  ASSERT_GT(base, 0);
  for (const bool signals : {false, true}) {
    SimOptions o = Stalls(2.0, 0.25);
    o.signal_completions = signals;
    o.activity_owners_from_ranks = 0;
    const SimResult r = Sim(m.plan(), h, o);
    EXPECT_NEAR(r.timeline.iteration_s, base + 0.25, 1e-9) << signals;
    EXPECT_EQ(r.stalls, 1) << signals;
    EXPECT_DOUBLE_EQ(r.stalled_s, 0.25) << signals;
    o.stall_rate = 1e-12;
    const SimResult none = Sim(m.plan(), h, o);
    EXPECT_NEAR(none.timeline.iteration_s, base, 1e-9) << signals;
    EXPECT_EQ(none.stalls, 0) << signals;
  }
  // From a second thread Simulate spawns the strata-sim-worker helper, which
  // receives the options in its request: the same stall.
  SimResult threaded;
  std::thread t([&] { threaded = Sim(m.plan(), h, Stalls(2.0, 0.25)); });
  t.join();
  EXPECT_NEAR(threaded.timeline.iteration_s, base + 0.25, 1e-9);
  EXPECT_EQ(threaded.stalls, 1);
  // A rate without a time (or a time without a rate) is no stall.
  EXPECT_NEAR(Sim(m.plan(), h, Stalls(2.0, 0)).timeline.iteration_s, base, 1e-9);
  EXPECT_NEAR(Sim(m.plan(), h, Stalls(0, 0.25)).timeline.iteration_s, base, 1e-9);
}

// `ranks` GPUs (4 per node), `rounds` forwards of 10 ms, each followed by a
// 1 kB allreduce of every rank when `coupled` (so each round ends when its
// slowest rank does), else the forwards run back to back.
Plan Rounds(const HardwareSpec& h, int rounds, bool coupled) {
  PlanMaker m(h);
  OpId prev = -1;
  for (int i = 0; i < rounds; ++i) {
    std::vector<OpId> deps;
    if (prev >= 0) deps.push_back(prev);
    prev = m.Add(OpKind::kForward, Stream::kCompute, 0, 1e10, deps);  // 10 ms
    if (coupled) prev = m.Add(OpKind::kAllReduce, Stream::kComm, 1000, 0, {prev});
  }
  return m.plan();
}

// 16 ranks, 200 rounds, a stall of 0.1 s with probability 1% per op. With an
// allreduce after every forward a round is late when any of the 16 ranks
// stalls: 200 x (1 - 0.99^16) x 0.1 s = 2.98 s expected. Without it each
// rank only pays its own (2 stalls expected, 0.2 s; the slowest of 16 a few
// more). The draws are a hash, so the bounds are loose but the gap is not.
TEST(Stalls, ACollectiveAfterEveryOpPaysEveryRanksStalls) {
  const auto h = RoundHardware(4, 4);
  const int rounds = 200;
  const double d = 0.1, p = 0.01, rate = p / 0.01;
  for (const bool coupled : {true, false}) {
    const Plan plan = Rounds(h, rounds, coupled);
    const double base = Sim(plan, h, Stalls(0, 0)).timeline.iteration_s;
    const SimResult r = Sim(plan, h, Stalls(rate, d));
    EXPECT_EQ(r.ranks.size(), 16u) << "stalls simulate every node";
    const double extra = r.timeline.iteration_s - base;
    const double expect_coupled = rounds * (1 - std::pow(1 - p, 16)) * d;
    SCOPED_TRACE(coupled ? "coupled" : "independent");
    std::printf("%s: %.3f s more than %.3f s, %lld stalls\n", coupled ? "coupled" : "independent", extra, base,
                static_cast<long long>(r.stalls));
    if (coupled) {
      EXPECT_GT(extra, 0.6 * expect_coupled);
      EXPECT_LT(extra, 1.4 * expect_coupled);
    } else {
      EXPECT_GT(extra, 0);
      EXPECT_LT(extra, 0.35 * expect_coupled);  // a few stalls of the slowest rank, not every rank's
    }
  }
}

// The draws do not depend on stall_time: a longer stall stalls the same ops
// and never ends the iteration sooner; the seed changes the draws; the same
// seed gives the same timeline.
TEST(Stalls, DrawsAreFixedBySeedRankAndOp) {
  const auto h = RoundHardware(1, 4);
  const Plan plan = Rounds(h, 100, true);
  auto stalled = [&](const SimResult& r, double d) {
    int n = 0;
    for (const TimelineOp& op : r.timeline.ops)
      if (plan.ops[op.op].kind == OpKind::kForward && op.end_s - op.start_s > 0.01 + d / 2) ++n;
    return n;
  };
  const SimResult a = Sim(plan, h, Stalls(2.0, 0.05)), b = Sim(plan, h, Stalls(2.0, 0.2));
  const SimResult again = Sim(plan, h, Stalls(2.0, 0.05)), other = Sim(plan, h, Stalls(2.0, 0.05, 1));
  EXPECT_GT(stalled(a, 0.05), 0);
  EXPECT_EQ(stalled(a, 0.05), stalled(b, 0.2));
  EXPECT_GE(b.timeline.iteration_s, a.timeline.iteration_s);
  EXPECT_EQ(a.timeline.iteration_s, again.timeline.iteration_s);
  EXPECT_NE(a.timeline.iteration_s, other.timeline.iteration_s);
}

TEST(Stalls, BadValuesAreRefused) {
  const auto h = RoundHardware(1, 1);
  PlanMaker m(h);
  m.Add(OpKind::kForward, Stream::kCompute, 0, 1e12);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [rate, time] : std::array<std::pair<double, double>, 7>{
           {{-1, 0.1}, {1, -0.1}, {inf, 0.1}, {1, inf}, {nan, 0.1}, {1, nan}, {1, 1e8}}}) {
    auto r = Simulate(m.plan(), h, Stalls(rate, time));
    ASSERT_FALSE(r.ok()) << rate << " " << time;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace strata::sim
