// Collectives of several kinds of group (issue #16): each rank's ring is
// its own group's, on NVLink inside a node and on the NICs across nodes,
// where a node's rings of one kind share them; symmetric and all-nodes
// replays agree.
#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "strata/simulator/simulator.h"

namespace strata::sim {
namespace {

using testing::PlanMaker;
using testing::RoundHardware;

double Time(const Plan& p, const HardwareSpec& h, SimOptions o = {}) {
  auto r = Simulate(p, h, testing::Exact(o));
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return r->timeline.iteration_s;
}

Plan WithGroups(PlanMaker& m, std::vector<CommGroup> groups) {
  Plan p = m.plan();
  p.groups = std::move(groups);
  return p;
}

TEST(GroupRings, TensorGroupsRunOnNvlink) {
  const HardwareSpec h = RoundHardware(1, 4);  // NVLink 100 GB/s each way
  PlanMaker m(h);
  const OpId ar = m.Add(OpKind::kAllReduce, Stream::kCompute, 1'000'000'000);
  Plan p = WithGroups(m, {{"dp", {0, 2}}, {"tp", {0, 1}}});
  p.ops[ar].group = 1;
  // Two ranks: each sends 2 (n-1)/n = 1 GB: 10 ms at 100 GB/s.
  EXPECT_NEAR(Time(p, h), 0.01, 1e-9);
  p.ops[ar].group = 0;  // the data-parallel pair 0-2 (and 1-3): also NVLink, a node
  EXPECT_NEAR(Time(p, h), 0.01, 1e-9);
}

TEST(GroupRings, DataParallelRingsAcrossNodesShareTheNics) {
  // 2 nodes x 2 GPUs, tensor 2: data-parallel groups {0, 2} and {1, 3},
  // each crossing between the nodes; the node's network (20 GB/s per
  // direction) carries both rings.
  const HardwareSpec h = RoundHardware(2, 2);
  PlanMaker m(h);
  const OpId ag = m.Add(OpKind::kAllGather, Stream::kComm, 2'000'000'000);
  Plan p = WithGroups(m, {{"dp", {0, 2}}, {"tp", {0, 1}}});
  p.ops[ag].group = 0;
  // Each rank sends 1 GB; two flows share 20 GB/s: 0.1 s.
  SimOptions all;
  all.reduce_symmetric_nodes = false;
  EXPECT_NEAR(Time(p, h), 0.1, 1e-9);
  EXPECT_NEAR(Time(p, h, all), 0.1, 1e-9);
  for (CollectiveModel c : {CollectiveModel::kRing, CollectiveModel::kRingSteps}) {
    SimOptions o;
    o.collectives = c;
    EXPECT_NEAR(Time(p, h, o), 0.1, 1e-9) << static_cast<int>(c);
  }
  // The tensor-parallel pairs stay inside their nodes: NVLink, 2 GB
  // allreduced = 2 GB sent each, 20 ms.
  p.ops[ag].kind = OpKind::kAllReduce;
  p.ops[ag].group = 1;
  EXPECT_NEAR(Time(p, h), 0.02, 1e-9);
  EXPECT_NEAR(Time(p, h, all), 0.02, 1e-9);
}

}  // namespace
}  // namespace strata::sim
