// ScenarioAsFramework (docs/fsdp.md, "Side by side"): ZeRO stages as
// FSDP2's sharding and back, offload as each framework has it, and what
// has no counterpart refused by key.
#include <gtest/gtest.h>

#include "strata/config/framework_counterpart.h"

namespace strata::config {
namespace {

Scenario Ds(int stage, OffloadDevice param = OffloadDevice::kNone, OffloadDevice optim = OffloadDevice::kNone) {
  Scenario s;
  s.hardware.nodes = 1;
  s.hardware.gpus_per_node = 8;
  s.zero.stage = stage;
  s.zero.offload_param.device = param;
  s.zero.offload_optimizer.device = optim;
  s.zero.offload_optimizer.pin_memory = true;
  return s;
}

TEST(FrameworkCounterpart, ZeroStagesAreFsdp1sStrategies) {
  auto full = ScenarioAsFramework(Ds(3), Framework::kFsdp);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->framework, Framework::kFsdp);
  EXPECT_EQ(full->fsdp.reshard_after_forward, -1);
  EXPECT_EQ(FrameworkSummary(*full), "FSDP2 FULL_SHARD");
  EXPECT_EQ(ScenarioAsFramework(Ds(2), Framework::kFsdp)->fsdp.reshard_after_forward, 0);
  EXPECT_EQ(FrameworkSummary(*ScenarioAsFramework(Ds(0), Framework::kFsdp)), "FSDP2 NO_SHARD");
  Scenario hpz = Ds(3);
  hpz.zero.zero_hpz_partition_size = 4;
  EXPECT_EQ(ScenarioAsFramework(hpz, Framework::kFsdp)->fsdp.reshard_after_forward, 4);
  auto off = ScenarioAsFramework(Ds(3, OffloadDevice::kCpu, OffloadDevice::kCpu), Framework::kFsdp);
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->fsdp.offload_cpu);
  EXPECT_TRUE(off->fsdp.pin_memory);
  EXPECT_EQ(off->zero.offload_param.device, OffloadDevice::kNone);
  // And back: the same ZeRO configuration.
  auto back = ScenarioAsFramework(*off, Framework::kDeepSpeed);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->zero.stage, 3);
  EXPECT_EQ(back->zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_EQ(back->zero.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_EQ(ScenarioAsFramework(*ScenarioAsFramework(Ds(2), Framework::kFsdp), Framework::kDeepSpeed)->zero.stage, 2);
  EXPECT_EQ(ScenarioAsFramework(*ScenarioAsFramework(hpz, Framework::kFsdp), Framework::kDeepSpeed)
                ->zero.zero_hpz_partition_size,
            4);
}

TEST(FrameworkCounterpart, WhatHasNoCounterpartIsRefusedByKey) {
  auto nvme = ScenarioAsFramework(Ds(3, OffloadDevice::kNvme, OffloadDevice::kCpu), Framework::kFsdp);
  ASSERT_FALSE(nvme.ok());
  EXPECT_NE(nvme.status().message().find("zero_optimization.offload_param.device"), std::string::npos);
  auto one = ScenarioAsFramework(Ds(1), Framework::kFsdp);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("zero_optimization.stage"), std::string::npos);
  Scenario hsdp = *ScenarioAsFramework(Ds(3), Framework::kFsdp);
  hsdp.fsdp.replicate = 2;
  hsdp.fsdp.shard = 4;
  auto h = ScenarioAsFramework(hsdp, Framework::kDeepSpeed);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("fsdp.mesh"), std::string::npos);
}

}  // namespace
}  // namespace strata::config
