// ScenarioAsFramework (framework_counterpart.h): ZeRO stages and FSDP2's
// sharding as FSDP1's documentation pairs them (ShardingStrategy:
// FULL_SHARD "is like ZeRO-3", SHARD_GRAD_OP like ZeRO-2, NO_SHARD like
// DDP), offload as each framework has it.
#include "strata/config/framework_counterpart.h"

namespace strata::config {

namespace {

Result<Scenario> ToFsdp(const Scenario& s) {
  const ZeroConfig& z = s.zero;
  if (z.offload_param.device == OffloadDevice::kNvme || z.offload_optimizer.device == OffloadDevice::kNvme)
    return Status::InvalidArgument("zero_optimization.offload_" +
                                   std::string(z.offload_param.device == OffloadDevice::kNvme ? "param" : "optimizer") +
                                   ".device: nvme has no FSDP2 counterpart (FSDP has no NVMe offload)");
  if (z.stage == 1)
    return Status::InvalidArgument(
        "zero_optimization.stage: ZeRO-1 (optimizer states sharded, gradients whole) has no FSDP2 counterpart");
  Scenario out = s;
  out.framework = Framework::kFsdp;
  out.zero = ZeroConfig{};
  out.aio = AioConfig{};
  out.policy.gpu_cache = out.policy.cpu_cache = Bytes(0);
  out.training.cpu_checkpointing = false;  // torch.utils.checkpoint keeps checkpoints on the GPU
  out.training.partition_activations = false;
  FsdpSpec f;
  f.reshard_after_forward = z.stage == 3 ? (z.zero_hpz_partition_size > 1 ? z.zero_hpz_partition_size : -1) : 0;
  if (z.stage == 0) f.shard = 1;  // NO_SHARD: every rank holds everything
  f.offload_cpu = z.offload_param.device == OffloadDevice::kCpu || z.offload_optimizer.device == OffloadDevice::kCpu;
  f.pin_memory =
      z.offload_optimizer.device == OffloadDevice::kCpu ? z.offload_optimizer.pin_memory : z.offload_param.pin_memory;
  out.fsdp = f;
  return out;
}

Result<Scenario> ToDeepSpeed(const Scenario& s) {
  const FsdpSpec& f = s.fsdp;
  const int world = s.hardware.world_size();
  const int shard = f.shard > 0 ? f.shard : world / std::max(1, f.replicate);
  if (shard > 1 && shard < world)
    return Status::InvalidArgument(
        "fsdp.mesh: HSDP (replicate x shard) has no counterpart among DeepSpeed's ZeRO "
        "stages as Strata models them");
  Scenario out = s;
  out.framework = Framework::kDeepSpeed;
  out.fsdp = FsdpSpec{};
  ZeroConfig z;
  const int k = f.reshard_after_forward;
  z.stage = shard == 1 && world > 1 ? 0 : k == 0 ? 2 : 3;
  // hpZ keeps a secondary partition over k ranks, as k does (not with
  // offload, which Strata plans without hpZ).
  if (k > 1 && !f.offload_cpu) z.zero_hpz_partition_size = k;
  if (f.offload_cpu) {
    z.offload_optimizer.device = OffloadDevice::kCpu;
    z.offload_optimizer.pin_memory = f.pin_memory;
    if (z.stage == 3) {
      z.offload_param.device = OffloadDevice::kCpu;
      z.offload_param.pin_memory = f.pin_memory;
    }
  }
  out.zero = z;
  return out;
}

}  // namespace

Result<Scenario> ScenarioAsFramework(const Scenario& s, Framework to) {
  if (s.framework == to) return s;
  return to == Framework::kFsdp ? ToFsdp(s) : ToDeepSpeed(s);
}

std::string FrameworkSummary(const Scenario& s) {
  if (s.framework == Framework::kFsdp) {
    const FsdpSpec& f = s.fsdp;
    const int k = f.reshard_after_forward;
    std::string out = f.shard == 1 && s.hardware.world_size() > 1 ? "FSDP2 NO_SHARD"
                      : k == 0                                    ? "FSDP2 SHARD_GRAD_OP"
                      : k > 1                                     ? "FSDP2 reshard " + std::to_string(k)
                                                                  : "FSDP2 FULL_SHARD";
    return out + (f.offload_cpu ? ", CPU offload" : "");
  }
  const ZeroConfig& z = s.zero;
  std::string out = "ZeRO-" + std::to_string(z.stage);
  if (z.zero_hpz_partition_size > 1) out += " hpZ " + std::to_string(z.zero_hpz_partition_size);
  if (z.offload_param.device != OffloadDevice::kNone || z.offload_optimizer.device != OffloadDevice::kNone)
    out += ", offload param " + std::string(OffloadDeviceName(z.offload_param.device)) + " optimizer " +
           std::string(OffloadDeviceName(z.offload_optimizer.device));
  return out;
}

}  // namespace strata::config
