// Memory that earlier DeepSpeed releases held and current DeepSpeed does
// not (docs/fidelity.md, "Earlier DeepSpeed releases"): DeepSpeedCPUAdam's
// pinned double buffer (csrc/includes/cpu_adam.h, the Adam_Optimizer
// constructor: two cudaMallocHost of TILE floats per process), counted in
// CPU memory and never allocated (plan.h Buffer::backed).
#include <gtest/gtest.h>

#include "strata/plan/plan.h"
#include "strata/plan/plan_json.h"
#include "strata/plan/validator.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::FindBuffer;
using testing::MustPlanValid;

constexpr int64_t kGiB = int64_t{1} << 30;

Scenario OffloadedMlp(int stage, OffloadDevice optim, DeepSpeedStage3 release) {
  Scenario s;
  s.name = "releases-mlp";
  s.model.kind = ModelKind::kMlp;
  s.model.sizes = {1000, 600, 600, 10};
  testing::RoomyHardware(s, 2);
  s.zero.stage = stage;
  s.zero.offload_optimizer.device = optim;
  s.policy.deepspeed_stage3 = release;
  return s;
}

TEST(Releases, CpuAdamDoubleBufferByRelease) {
  // TILE 1024^3 floats up to v0.3.14 (v0.3.13) and in the paper's a1e9753 (v0.3),
  // 128 x 1024^2 from v0.3.15 to v0.14 (v0.5), none since v0.15 (current);
  // whatever the model's size, for every stage that offloads the optimizer.
  struct Case {
    int stage;
    OffloadDevice optim;
    DeepSpeedStage3 release;
    int64_t bytes;  // 0: no buffer
  };
  for (const Case& c : {Case{3, OffloadDevice::kCpu, DeepSpeedStage3::kV03, 8 * kGiB},
                        Case{3, OffloadDevice::kNvme, DeepSpeedStage3::kV03, 8 * kGiB},
                        Case{3, OffloadDevice::kCpu, DeepSpeedStage3::kV0313, 8 * kGiB},
                        Case{3, OffloadDevice::kCpu, DeepSpeedStage3::kV05, 1 * kGiB},
                        Case{2, OffloadDevice::kCpu, DeepSpeedStage3::kV05, 1 * kGiB},
                        Case{3, OffloadDevice::kCpu, DeepSpeedStage3::kCurrent, 0},
                        Case{3, OffloadDevice::kNone, DeepSpeedStage3::kV03, 0}}) {
    SCOPED_TRACE("stage " + std::to_string(c.stage) + ", " + std::to_string(static_cast<int>(c.release)));
    const Plan p = MustPlanValid(OffloadedMlp(c.stage, c.optim, c.release));
    const Buffer* b = FindBuffer(p, "cpu_adam.double_buffer");
    if (c.bytes == 0) {
      EXPECT_EQ(b, nullptr);
      continue;
    }
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->bytes.v, c.bytes);
    EXPECT_EQ(b->tier, Tier::kCpu);
    EXPECT_EQ(b->kind, StateKind::kSwapBuffer);
    EXPECT_TRUE(b->resident);
    EXPECT_TRUE(b->pinned);
    EXPECT_FALSE(b->backed);
    for (const Op& op : p.ops)
      for (const auto* list : {&op.allocs, &op.frees, &op.reads, &op.writes})
        for (BufferId id : *list) EXPECT_NE(id, b->id) << op.name;
  }
}

TEST(Releases, TheDoubleBufferCountsInEveryRanksCpuMemory) {
  // Two ranks on one node: the node's CPU peak holds two of them.
  Plan p = MustPlanValid(OffloadedMlp(3, OffloadDevice::kCpu, DeepSpeedStage3::kV05));
  const Bytes with = ValidatePlan(p).memory.peak[static_cast<int>(Tier::kCpu)];
  for (Buffer& b : p.buffers)
    if (b.name == "cpu_adam.double_buffer") b.bytes = Bytes(0);
  const Bytes without = ValidatePlan(p).memory.peak[static_cast<int>(Tier::kCpu)];
  EXPECT_EQ(with.v - without.v, 2 * kGiB);
}

TEST(Releases, UnbackedBuffersAreNamedByNoOpAndResident) {
  Plan p = MustPlanValid(OffloadedMlp(3, OffloadDevice::kCpu, DeepSpeedStage3::kV03));
  // Survives the JSON round trip.
  auto back = DecodePlan(EncodePlan(p));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
  BufferId id = -1;
  for (const Buffer& b : p.buffers)
    if (!b.backed) id = b.id;
  ASSERT_GE(id, 0);
  auto kinds = [](const ValidationReport& r) {
    int n = 0;
    for (const Violation& v : r.violations) n += v.kind == "unbacked";
    return n;
  };
  Plan used = p;
  used.ops.back().reads.push_back(id);
  EXPECT_EQ(kinds(ValidatePlan(used)), 1);
  Plan transient = p;
  transient.buffers[static_cast<size_t>(id)].resident = false;
  EXPECT_GE(kinds(ValidatePlan(transient)), 1);
}

}  // namespace
}  // namespace strata
