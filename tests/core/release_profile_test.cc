// DeepSpeed releases as data (release_profile.h): each release's profile
// differs from its neighbour by what docs/fidelity.md ("DeepSpeed releases")
// says that release changed, and policy.aligned_trace only turns the
// coordinator's alignment on.
#include "strata/core/release_profile.h"

#include <gtest/gtest.h>

#include <string>

namespace strata {
namespace {

// The flags before PR #1453 (v0.6.0), the same in v0.5, v0.3 and v0.3.13.
void ExpectBeforeV06(const ReleaseProfile& p) {
  EXPECT_TRUE(p.module_trace_coordinator);
  EXPECT_TRUE(p.list_collectives);
  EXPECT_TRUE(p.direct_fp32_gradients);
  EXPECT_TRUE(p.scoped_gpu_gradient_partition);
  EXPECT_TRUE(p.writeback_sized_by_partitions);
  EXPECT_TRUE(p.blocking_checkpoint_copies);
  EXPECT_TRUE(p.param_offload_needs_optimizer_offload);
  EXPECT_GT(p.cpu_adam_tile_elements, 0);
  EXPECT_TRUE(p.dict_config);  // before PR #2004 (v0.7.0)
}

TEST(ReleaseProfile, CurrentHasNoEarlierMechanism) {
  const ReleaseProfile& p = ReleaseProfileFor(DeepSpeedStage3::kCurrent);
  EXPECT_STREQ(p.name, "current");
  EXPECT_FALSE(p.module_trace_coordinator || p.aligned_trace || p.debug_norms || p.list_collectives ||
               p.direct_fp32_gradients || p.scoped_gpu_gradient_partition || p.writeback_sized_by_partitions ||
               p.async_fp16_writeback || p.blocking_checkpoint_copies ||
               p.cpu_checkpoints_need_partitioned_activations || p.param_offload_needs_optimizer_offload);
  EXPECT_EQ(p.cpu_adam_tile_elements, 0);  // CPU Adam off CUDA since v0.15
  EXPECT_TRUE(p.nvme_offload);
  EXPECT_FALSE(p.dict_config || p.cpu_offload_use_pin_memory);
  EXPECT_STREQ(p.bf16_communication_name, "bf16");
}

TEST(ReleaseProfile, V05IsThePaperReleaseLine) {
  const ReleaseProfile& p = ReleaseProfileFor(DeepSpeedStage3::kV05);
  EXPECT_STREQ(p.name, "v0.5");
  ExpectBeforeV06(p);
  EXPECT_FALSE(p.aligned_trace);         // the reset hook of PR #867
  EXPECT_TRUE(p.debug_norms);            // PR #976
  EXPECT_FALSE(p.async_fp16_writeback);  // blocking since PR #1076 (v0.4.0)
  EXPECT_EQ(p.cpu_adam_tile_elements, int64_t{128} << 20);
  EXPECT_FALSE(p.cpu_checkpoints_need_partitioned_activations);
  EXPECT_TRUE(p.nvme_offload);
  EXPECT_STREQ(p.bf16_communication_name, "bfp16");  // v0.5.10's spelling
  EXPECT_FALSE(p.cpu_offload_use_pin_memory);
}

TEST(ReleaseProfile, V03IsV05WithAnAsyncWriteBack) {
  const ReleaseProfile& p = ReleaseProfileFor(DeepSpeedStage3::kV03);
  EXPECT_STREQ(p.name, "v0.3");
  ExpectBeforeV06(p);
  EXPECT_TRUE(p.async_fp16_writeback);
  EXPECT_TRUE(p.debug_norms);
  EXPECT_FALSE(p.aligned_trace);
  EXPECT_EQ(p.cpu_adam_tile_elements, int64_t{1} << 30);
  EXPECT_TRUE(p.cpu_checkpoints_need_partitioned_activations);
  EXPECT_TRUE(p.nvme_offload);
  EXPECT_EQ(p.bf16_communication_name, nullptr);  // no communication_data_type yet
}

TEST(ReleaseProfile, V0313IsZero3OffloadAsReleased) {
  const ReleaseProfile& p = ReleaseProfileFor(DeepSpeedStage3::kV0313);
  EXPECT_STREQ(p.name, "v0.3.13");
  ExpectBeforeV06(p);
  EXPECT_TRUE(p.aligned_trace);  // before PR #867
  EXPECT_FALSE(p.debug_norms);   // before PR #976
  EXPECT_FALSE(p.nvme_offload);  // before ZeRO-Infinity
  EXPECT_FALSE(p.async_fp16_writeback);
  EXPECT_EQ(p.cpu_adam_tile_elements, int64_t{1} << 30);
  EXPECT_TRUE(p.cpu_checkpoints_need_partitioned_activations);
  EXPECT_TRUE(p.cpu_offload_use_pin_memory);  // read by v0.3.13's stage3.py
  EXPECT_EQ(p.bf16_communication_name, nullptr);
}

TEST(ReleaseProfile, AlignedTraceOnlyTurnsAlignmentOn) {
  PolicyConfig policy;
  policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
  EXPECT_FALSE(ReleaseProfileOf(policy).aligned_trace);
  policy.aligned_trace = true;
  EXPECT_TRUE(ReleaseProfileOf(policy).aligned_trace);
  policy.deepspeed_stage3 = DeepSpeedStage3::kV0313;
  policy.aligned_trace = false;
  EXPECT_TRUE(ReleaseProfileOf(policy).aligned_trace);
  // Everything else is the release's own.
  policy.deepspeed_stage3 = DeepSpeedStage3::kV03;
  policy.aligned_trace = true;
  const ReleaseProfile p = ReleaseProfileOf(policy);
  EXPECT_STREQ(p.name, "v0.3");
  EXPECT_TRUE(p.async_fp16_writeback);
}

}  // namespace
}  // namespace strata
