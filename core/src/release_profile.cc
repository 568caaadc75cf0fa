#include "strata/core/release_profile.h"

namespace strata {
namespace {

// The table: docs/fidelity.md ("DeepSpeed releases") says where each
// difference comes from. v0.5 is the ZeRO-Infinity paper's release line.
ReleaseProfile V05() {
  ReleaseProfile p;
  p.name = "v0.5";
  p.module_trace_coordinator = true;
  p.debug_norms = true;
  p.list_collectives = true;
  p.direct_fp32_gradients = true;
  p.scoped_gpu_gradient_partition = true;
  p.writeback_sized_by_partitions = true;
  p.blocking_checkpoint_copies = true;
  p.cpu_adam_tile_elements = int64_t{128} << 20;  // TILE from v0.3.15 to v0.14
  p.param_offload_needs_optimizer_offload = true;
  p.dict_config = true;
  p.bf16_communication_name = "bfp16";
  p.hook_param_seconds = 380e-6;  // DeepSpeed issue #1069: pre_launch 130 us, launch 250 us
  p.hook_waits_for_device = true;
  return p;
}

ReleaseProfile V03() {
  ReleaseProfile p = V05();
  p.name = "v0.3";
  p.async_fp16_writeback = true;
  p.cpu_adam_tile_elements = int64_t{1} << 30;  // TILE up to v0.3.14 and in a1e9753
  p.cpu_checkpoints_need_partitioned_activations = true;
  p.bf16_communication_name = nullptr;
  return p;
}

ReleaseProfile V0313() {
  ReleaseProfile p = V05();
  p.name = "v0.3.13";
  p.aligned_trace = true;
  p.debug_norms = false;
  p.cpu_adam_tile_elements = int64_t{1} << 30;
  p.cpu_checkpoints_need_partitioned_activations = true;
  p.nvme_offload = false;
  p.cpu_offload_use_pin_memory = true;
  p.bf16_communication_name = nullptr;
  return p;
}

}  // namespace

const ReleaseProfile& ReleaseProfileFor(DeepSpeedStage3 release) {
  static const ReleaseProfile kCurrent, kV05 = V05(), kV03 = V03(), kV0313 = V0313();
  switch (release) {
    case DeepSpeedStage3::kV05:
      return kV05;
    case DeepSpeedStage3::kV03:
      return kV03;
    case DeepSpeedStage3::kV0313:
      return kV0313;
    case DeepSpeedStage3::kCurrent:
      break;
  }
  return kCurrent;
}

ReleaseProfile ReleaseProfileOf(const PolicyConfig& policy) {
  ReleaseProfile p = ReleaseProfileFor(policy.deepspeed_stage3);
  p.aligned_trace = p.aligned_trace || policy.aligned_trace;
  return p;
}

}  // namespace strata
