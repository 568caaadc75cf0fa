// Semantic checks of a scenario: values that parse but cannot be right.
#include <string>
#include <vector>

#include "strata/core/scenario.h"

namespace strata {

std::string_view OffloadDeviceName(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::kNone: return "none";
    case OffloadDevice::kCpu: return "cpu";
    case OffloadDevice::kNvme: return "nvme";
  }
  return "?";
}

namespace {

class Checker {
 public:
  void Positive(const std::string& path, double v) {
    if (!(v > 0)) Add(path, "must be positive (got " + Num(v) + ")");
  }
  void AtLeast(const std::string& path, int64_t v, int64_t min) {
    if (v < min) Add(path, "must be at least " + std::to_string(min) + " (got " + std::to_string(v) + ")");
  }
  void Add(std::string path, std::string msg) { issues.push_back({std::move(path), std::move(msg)}); }
  std::vector<ScenarioIssue> issues;

 private:
  static std::string Num(double v) {
    std::string s = std::to_string(v);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
};

void CheckModel(const ModelSpec& m, Checker& c) {
  if (m.kind == ModelKind::kMlp) {
    if (m.sizes.size() < 2) c.Add("model.sizes", "an MLP needs at least two sizes (input and output width)");
    for (size_t i = 0; i < m.sizes.size(); ++i)
      c.AtLeast("model.sizes", m.sizes[i], 1);
    return;
  }
  c.AtLeast("model.layers", m.layers, 1);
  c.AtLeast("model.hidden_size", m.hidden_size, 1);
  c.AtLeast("model.num_heads", m.num_heads, 1);
  if (m.num_heads > 0 && m.hidden_size > 0 && m.hidden_size % m.num_heads != 0)
    c.Add("model.num_heads", "hidden_size " + std::to_string(m.hidden_size) +
                                 " is not divisible by num_heads " + std::to_string(m.num_heads));
  c.AtLeast("model.ffn_hidden_size", m.ffn_hidden_size, 0);
  c.AtLeast("model.vocab_size", m.vocab_size, 1);
  c.AtLeast("model.seq_length", m.seq_length, 1);
  c.AtLeast("model.num_kv_heads", m.num_kv_heads, 0);
  if (m.num_kv_heads > 0 && m.num_heads > 0 && m.num_heads % m.num_kv_heads != 0)
    c.Add("model.num_kv_heads", "num_heads " + std::to_string(m.num_heads) + " is not a multiple of num_kv_heads " +
                                    std::to_string(m.num_kv_heads) + " (grouped-query attention shares K and V by groups)");
  c.AtLeast("model.max_position_embeddings", m.max_position_embeddings, 0);
  c.AtLeast("model.num_experts", m.num_experts, 0);
  c.AtLeast("model.experts_per_token", m.experts_per_token, 0);
  if (m.moe() && m.top_k() > m.num_experts)
    c.Add("model.experts_per_token", "experts_per_token " + std::to_string(m.top_k()) + " exceeds num_experts " +
                                         std::to_string(m.num_experts) + " (each token picks that many experts)");
  if (!m.moe() && m.experts_per_token > 0)
    c.Add("model.experts_per_token", "is set but num_experts is 0 (a dense MLP has no experts to pick)");
  if (m.position == PositionKind::kLearned && m.max_position_embeddings > 0 && m.seq_length > m.max_position_embeddings)
    c.Add("model.seq_length", "seq_length " + std::to_string(m.seq_length) + " exceeds the learned position table's " +
                                  std::to_string(m.max_position_embeddings) + " rows (max_position_embeddings)");
}

void CheckHardware(const HardwareSpec& h, Checker& c) {
  c.AtLeast("hardware.nodes", h.nodes, 1);
  c.AtLeast("hardware.gpus_per_node", h.gpus_per_node, 1);
  c.Positive("hardware.gpu.memory", static_cast<double>(h.gpu.memory.v));
  c.Positive("hardware.gpu.peak_flops", h.gpu.peak_flops.flops_per_s);
  c.Positive("hardware.gpu.hbm_bandwidth", h.gpu.hbm_bandwidth.bytes_per_s);
  if (h.gpu.reduction_bandwidth.bytes_per_s < 0)
    c.Positive("hardware.gpu.reduction_bandwidth", h.gpu.reduction_bandwidth.bytes_per_s);
  if (!(h.gpu.efficiency > 0 && h.gpu.efficiency <= 1))
    c.Add("hardware.gpu.efficiency", "must be in (0, 1] (a fraction of peak_flops)");
  c.Positive("hardware.cpu.memory", static_cast<double>(h.cpu.memory.v));
  c.Positive("hardware.cpu.memory_bandwidth", h.cpu.memory_bandwidth.bytes_per_s);
  c.AtLeast("hardware.cpu.cores", h.cpu.cores, 1);
  c.Positive("hardware.pcie.bandwidth", h.pcie.bandwidth.bytes_per_s);
  if (h.nvlink.bandwidth.bytes_per_s < 0) c.Positive("hardware.nvlink.bandwidth", h.nvlink.bandwidth.bytes_per_s);
  c.Positive("hardware.network.bandwidth", h.network.bandwidth.bytes_per_s);
  if (h.nvme.capacity.v < 0) c.Positive("hardware.nvme.capacity", static_cast<double>(h.nvme.capacity.v));
  c.Positive("hardware.nvme.read_bandwidth", h.nvme.read_bandwidth.bytes_per_s);
  c.Positive("hardware.nvme.write_bandwidth", h.nvme.write_bandwidth.bytes_per_s);
  if (h.nvme.readwrite_bandwidth.bytes_per_s < 0)
    c.Positive("hardware.nvme.readwrite_bandwidth", h.nvme.readwrite_bandwidth.bytes_per_s);
}

void CheckZero(const Scenario& s, Checker& c) {
  const ZeroConfig& z = s.zero;
  if (z.stage < 0 || z.stage > 3) {
    c.Add("zero_optimization.stage", "ZeRO stage must be 0, 1, 2 or 3 (got " + std::to_string(z.stage) + ")");
    return;
  }
  const auto& op = z.offload_param;
  const auto& oo = z.offload_optimizer;
  if (op.device != OffloadDevice::kNone && z.stage != 3)
    c.Add("zero_optimization.offload_param.device",
          "offload_param (" + std::string(OffloadDeviceName(op.device)) +
              ") requires zero_optimization.stage 3 (got stage " + std::to_string(z.stage) + ")");
  if (oo.device == OffloadDevice::kCpu && z.stage == 0)
    c.Add("zero_optimization.offload_optimizer.device", "offload_optimizer requires zero_optimization.stage >= 1");
  if (oo.device == OffloadDevice::kNvme && z.stage != 3)
    c.Add("zero_optimization.offload_optimizer.device",
          "offload_optimizer to nvme requires zero_optimization.stage 3 (got stage " + std::to_string(z.stage) + ")");
  if (op.device == OffloadDevice::kNvme && s.hardware.nvme.capacity.v <= 0)
    c.Add("zero_optimization.offload_param.device", "offload_param.device is nvme but hardware.nvme.capacity is 0");
  if (oo.device == OffloadDevice::kNvme && s.hardware.nvme.capacity.v <= 0)
    c.Add("zero_optimization.offload_optimizer.device", "offload_optimizer.device is nvme but hardware.nvme.capacity is 0");
  c.AtLeast("zero_optimization.offload_param.buffer_count", op.buffer_count, 1);
  c.AtLeast("zero_optimization.offload_param.buffer_size", op.buffer_size.v, 1);
  c.AtLeast("zero_optimization.offload_optimizer.buffer_count", oo.buffer_count, 1);
  c.AtLeast("zero_optimization.sub_group_size", z.sub_group_size.v, 1);
  c.AtLeast("zero_optimization.reduce_bucket_size", z.reduce_bucket_size.v, 1);
  c.AtLeast("zero_optimization.allgather_bucket_size", z.allgather_bucket_size.v, 1);
  c.AtLeast("zero_optimization.stage3_max_live_parameters", z.stage3_max_live_parameters.v, 0);
}

void CheckAio(const AioConfig& a, Checker& c) {
  c.AtLeast("aio.block_size", a.block_size.v, 512);
  if (a.block_size.v > 0 && a.block_size.v % 512 != 0)
    c.Add("aio.block_size", "must be a multiple of 512 bytes for O_DIRECT (got " + std::to_string(a.block_size.v) + ")");
  c.AtLeast("aio.queue_depth", a.queue_depth, 1);
  c.AtLeast("aio.intra_op_parallelism", a.intra_op_parallelism, 1);
}

}  // namespace

std::vector<ScenarioIssue> CheckScenario(const Scenario& s) {
  Checker c;
  CheckModel(s.model, c);
  CheckHardware(s.hardware, c);
  c.AtLeast("training.micro_batch_size", s.training.micro_batch_size, 1);
  c.AtLeast("training.gradient_accumulation_steps", s.training.gradient_accumulation_steps, 1);
  CheckZero(s, c);
  CheckAio(s.aio, c);
  return std::move(c.issues);
}

}  // namespace strata
