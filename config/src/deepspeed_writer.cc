#include "strata/config/deepspeed_writer.h"

#include <nlohmann/json.hpp>

namespace strata::config {
namespace {

using Json = nlohmann::ordered_json;

std::string Device(OffloadDevice d) { return std::string(OffloadDeviceName(d)); }

Json Zero(const ZeroConfig& z) {
  Json j;
  j["stage"] = z.stage;
  const auto& p = z.offload_param;
  j["offload_param"] = {{"device", Device(p.device)},     {"nvme_path", p.nvme_path},
                        {"buffer_count", p.buffer_count}, {"buffer_size", p.buffer_size.v},
                        {"max_in_cpu", p.max_in_cpu.v},   {"pin_memory", p.pin_memory}};
  if (p.nvme_path.empty()) j["offload_param"].erase("nvme_path");
  const auto& o = z.offload_optimizer;
  j["offload_optimizer"] = {{"device", Device(o.device)},
                            {"nvme_path", o.nvme_path},
                            {"buffer_count", o.buffer_count},
                            {"pin_memory", o.pin_memory},
                            {"pipeline_read", o.pipeline_read},
                            {"pipeline_write", o.pipeline_write},
                            {"ratio", o.ratio}};
  if (o.nvme_path.empty()) j["offload_optimizer"].erase("nvme_path");
  if (o.ratio == 1.0) j["offload_optimizer"].erase("ratio");  // partial offload is a newer release's key
  j["stage3_prefetch_bucket_size"] = z.stage3_prefetch_bucket_size.v;
  j["stage3_max_live_parameters"] = z.stage3_max_live_parameters.v;
  j["stage3_max_reuse_distance"] = z.stage3_max_reuse_distance.v;
  j["stage3_param_persistence_threshold"] = z.stage3_param_persistence_threshold.v;
  j["sub_group_size"] = z.sub_group_size.v;
  j["overlap_comm"] = z.overlap_comm;
  j["reduce_bucket_size"] = z.reduce_bucket_size.v;
  j["allgather_bucket_size"] = z.allgather_bucket_size.v;
  if (z.ZeroPlusPlus()) {  // keys a release before ZeRO++ does not know
    j["zero_hpz_partition_size"] = z.zero_hpz_partition_size;
    j["zero_quantized_weights"] = z.zero_quantized_weights;
    j["zero_quantized_gradients"] = z.zero_quantized_gradients;
  }
  return j;
}

}  // namespace

std::string DeepSpeedConfigJson(const Scenario& s) {
  Json j;
  j["train_micro_batch_size_per_gpu"] = s.training.micro_batch_size;
  j["gradient_accumulation_steps"] = s.training.gradient_accumulation_steps;
  j["fp16"] = {{"enabled", s.training.precision == Precision::kFp16}};
  j["bf16"] = {{"enabled", s.training.precision == Precision::kBf16}};
  if (s.training.activation_checkpointing)
    j["activation_checkpointing"] = {{"partition_activations", s.training.partition_activations},
                                     {"cpu_checkpointing", s.training.cpu_checkpointing},
                                     {"synchronize_checkpoint_boundary", s.training.synchronize_checkpoint_boundary}};
  j["optimizer"] = {{"type", "AdamW"}};
  j["zero_optimization"] = Zero(s.zero);
  j["aio"] = {{"block_size", s.aio.block_size.v},
              {"queue_depth", s.aio.queue_depth},
              {"intra_op_parallelism", s.aio.intra_op_parallelism},
              {"single_submit", s.aio.single_submit},
              {"overlap_events", s.aio.overlap_events}};
  return j.dump(2) + "\n";
}

}  // namespace strata::config
