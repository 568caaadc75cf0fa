// Semantic checks of a scenario: values that parse but cannot be right.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/codec_profile.h"
#include "strata/core/release_profile.h"
#include "strata/core/scenario.h"

namespace strata {

std::string_view OffloadDeviceName(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::kNone:
      return "none";
    case OffloadDevice::kCpu:
      return "cpu";
    case OffloadDevice::kNvme:
      return "nvme";
  }
  return "?";
}

namespace {

class Checker {
 public:
  void AtLeast(const std::string& path, int64_t v, int64_t min) {
    if (v < min) Add(path, "must be at least " + std::to_string(min) + " (got " + std::to_string(v) + ")");
  }
  // v in [min, max]: above max is "at most" with the limit's reason.
  void Within(const std::string& path, int64_t v, int64_t min, int64_t max) {
    AtLeast(path, v, min);
    if (v > max)
      Add(path, "must be at most " + std::to_string(max) + " (got " + std::to_string(v) +
                    "; Strata's limit, docs/limits.md)");
  }
  // A finite rate or size in (0, max] (or [0, max] when zero_ok).
  // v in [min, max] (or 0 when zero_ok). The minimum keeps rates and times
  // out of the denormals, where the simulator's divisions overflow.
  void Rate(const std::string& path, double v, double max, bool zero_ok = false, double min = 0) {
    if (!(v > 0) && !(zero_ok && v == 0)) {
      Add(path, std::string(zero_ok ? "must not be negative" : "must be positive") + " (got " + Num(v) + ")");
    } else if (v != 0 && v < min) {
      Add(path, "must be at least " + Num(min) + " (got " + Num(v) + "; Strata's limit, docs/limits.md)");
    } else if (!(v <= max)) {
      Add(path, "must be at most " + Num(max) + " (got " + Num(v) + "; Strata's limit, docs/limits.md)");
    }
  }
  void Add(std::string path, std::string msg) { issues.push_back({std::move(path), std::move(msg)}); }
  std::vector<ScenarioIssue> issues;

  static std::string Num(double v) {
    if (!std::isfinite(v) || std::abs(v) >= 1e9) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v);
      return buf;
    }
    std::string s = std::to_string(v);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
};

// policy.compression's level within the codec's and its ratio in [0, 1]
// (0: the codec profile's).
void CheckCompression(const CompressionConfig& z, Checker& c) {
  const CodecProfile& p = ProfileOf(z.codec);
  c.Within("policy.compression_threads", z.threads, 1, limits::kCompressionThreads);
  if (z.codec == CodecKind::kNone) {
    if (z.level != 0) c.Add("policy.compression_level", "needs policy.compression (lz4 or zstd)");
    if (z.ratio != 0) c.Add("policy.compression_ratio", "needs policy.compression (lz4 or zstd)");
    return;
  }
  if (z.level != 0 && (z.level < p.min_level || z.level > p.max_level))
    c.Add("policy.compression_level", "must be within " + std::string(p.name) + "'s " + std::to_string(p.min_level) +
                                          ".." + std::to_string(p.max_level) + ", or 0 for its default (got " +
                                          std::to_string(z.level) + ")");
  if (!(z.ratio >= 0 && z.ratio <= 1))
    c.Add("policy.compression_ratio",
          "must be in (0, 1], or 0 for the codec's measured ratio (got " + Checker::Num(z.ratio) + ")");
}

// policy.stripe_paths: one directory per drive, each once, and something
// on NVMe to stripe.
void CheckStripes(const Scenario& s, Checker& c) {
  const auto& p = s.policy.stripe_paths;
  if (p.empty()) return;
  const int drives = std::max(1, s.hardware.nvme.drives);
  if (p.size() < 2)
    c.Add("policy.stripe_paths", "lists one directory: striping needs two or more (or none, for nvme_path)");
  else if (static_cast<int>(p.size()) != drives)
    c.Add("policy.stripe_paths", "lists " + std::to_string(p.size()) + " directories, but hardware.nvme.drives is " +
                                     std::to_string(drives) + ": one directory per drive (set hardware.nvme.drives)");
  auto same = [](const std::string& a, const std::string& b) {  // "/a/" and "/a/./" are "/a"
    auto norm = [](const std::string& x) {
      std::string n = std::filesystem::path(x).lexically_normal().string();
      while (n.size() > 1 && n.back() == '/') n.pop_back();
      return n;
    };
    return norm(a) == norm(b);
  };
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (same(p[i], p[j])) c.Add("policy.stripe_paths", "lists '" + p[i] + "' twice: one directory per drive");
  if (s.aio.block_size.v % 4096 != 0)
    c.Add("policy.stripe_paths", "stripes in aio.block_size units, which must then be a multiple of 4 KiB (got " +
                                     std::to_string(s.aio.block_size.v) + "): each unit starts a block of its drive");
  if (s.zero.offload_param.device != OffloadDevice::kNvme && s.zero.offload_optimizer.device != OffloadDevice::kNvme)
    c.Add("policy.stripe_paths", "stripes NVMe swap files, but neither offload_param nor offload_optimizer is on nvme");
}

// policy.delayed_update (ZeRO-Offload's DPU): the CPU optimizer step it
// moves off the critical path must exist, and be the flat partition's one
// step (stages 1-2: DeepSpeed's ZeRO-Offload, where the paper defines it).
void CheckDelayedUpdate(const Scenario& s, Checker& c) {
  const int n = s.policy.delayed_update_warmup;
  if (n < 0) return;
  const char* key = "policy.delayed_update";
  c.Within("policy.delayed_update.warmup_steps", n, 0, limits::kWarmupSteps);
  if (s.framework == Framework::kFsdp) {
    c.Add(key, "is ZeRO-Offload's (DeepSpeed stages 1-2); FSDP's CPU offload is not planned with it: drop the key");
  } else if (s.zero.offload_optimizer.device != OffloadDevice::kCpu) {
    c.Add(key, std::string("overlaps the CPU optimizer's step with the next forward and backward, but the optimizer ") +
                   (s.zero.offload_optimizer.device == OffloadDevice::kNvme ? "is on NVMe" : "is not offloaded") +
                   ": set zero_optimization.offload_optimizer.device: cpu, or drop the key");
  } else if (s.zero.stage != 1 && s.zero.stage != 2) {
    c.Add(key, "is planned for ZeRO stages 1-2 (ZeRO-Offload, where the paper defines it; stage " +
                   std::to_string(s.zero.stage) + " steps sub-group by sub-group): set zero_optimization.stage 2");
  } else if (s.parallelism.pipeline > 1) {
    c.Add(key, "is not planned with pipeline stages (parallelism.pipeline " + std::to_string(s.parallelism.pipeline) +
                   "): drop one or the other");
  }
}

// Parameters of a transformer, in double (no overflow), as BuildModelGraph
// counts them give or take the biases: for the limit only.
double ApproxParameters(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size), f = static_cast<double>(m.ffn());
  const double kv = m.num_heads > 0 ? h / m.num_heads * m.kv_heads() : h;
  const double mlp = (m.mlp == MlpKind::kSwiGlu ? 3 : 2) * h * f;
  const double per_layer = h * (h + 2 * kv) + h * h + (m.moe() ? m.num_experts * mlp + h * m.num_experts : mlp) + 4 * h;
  const double tables = static_cast<double>(m.vocab_size) * h * (m.tie_embeddings ? 1 : 2) +
                        (m.position == PositionKind::kLearned ? static_cast<double>(m.position_rows()) * h : 0);
  return m.layers * per_layer + tables;
}

void CheckModel(const ModelSpec& m, Checker& c) {
  if (m.kind == ModelKind::kMlp) {
    if (m.sizes.size() < 2) c.Add("model.sizes", "an MLP needs at least two sizes (input and output width)");
    if (static_cast<int64_t>(m.sizes.size()) > limits::kMlpLayers + 1)
      c.Add("model.sizes",
            "at most " + std::to_string(limits::kMlpLayers + 1) + " widths (Strata's limit, docs/limits.md)");
    for (size_t i = 0; i < m.sizes.size(); ++i) c.Within("model.sizes", m.sizes[i], 1, limits::kMlpWidth);
    return;
  }
  // TiledLinear's own bounds (in_splits in [1, in_features], out_splits in
  // [1, out_features]); Strata tiles GeLU MLPs only.
  c.AtLeast("model.tiled_linear.in_splits", m.tiled_in_splits, 1);
  c.AtLeast("model.tiled_linear.out_splits", m.tiled_out_splits, 1);
  if (m.tiled() && m.hidden_size > 0 && m.ffn() > 0) {
    c.Within("model.tiled_linear.in_splits", m.tiled_in_splits, 1, std::min(m.hidden_size, m.ffn()));
    c.Within("model.tiled_linear.out_splits", m.tiled_out_splits, 1, std::min(m.hidden_size, m.ffn()));
  }
  if (m.tiled() && (m.mlp != MlpKind::kGelu || m.moe()))
    c.Add("model.tiled_linear", "Strata tiles a GeLU MLP's fc1 and fc2 (GPT's); this model's MLP is not tiled yet");
  c.Within("model.layers", m.layers, 1, limits::kLayers);
  c.Within("model.hidden_size", m.hidden_size, 1, limits::kHiddenSize);
  c.Within("model.num_heads", m.num_heads, 1, limits::kHeads);
  if (m.num_heads > 0 && m.hidden_size > 0 && m.hidden_size % m.num_heads != 0)
    c.Add("model.num_heads", "hidden_size " + std::to_string(m.hidden_size) + " is not divisible by num_heads " +
                                 std::to_string(m.num_heads));
  c.Within("model.ffn_hidden_size", m.ffn_hidden_size, 0, limits::kFfnSize);
  c.Within("model.vocab_size", m.vocab_size, 1, limits::kVocab);
  c.Within("model.seq_length", m.seq_length, 1, limits::kSeqLength);
  c.Within("model.num_kv_heads", m.num_kv_heads, 0, limits::kHeads);
  if (m.num_kv_heads > 0 && m.num_heads > 0 && m.num_heads % m.num_kv_heads != 0)
    c.Add("model.num_kv_heads", "num_heads " + std::to_string(m.num_heads) + " is not a multiple of num_kv_heads " +
                                    std::to_string(m.num_kv_heads) +
                                    " (grouped-query attention shares K and V by groups)");
  c.Within("model.max_position_embeddings", m.max_position_embeddings, 0, limits::kPositions);
  if (m.position == PositionKind::kLearned && m.max_position_embeddings > 0 && m.seq_length > m.max_position_embeddings)
    c.Add("model.seq_length", "seq_length " + std::to_string(m.seq_length) + " exceeds the learned position table's " +
                                  std::to_string(m.max_position_embeddings) + " rows (max_position_embeddings)");
  c.Within("model.num_experts", m.num_experts, 0, limits::kExperts);
  c.AtLeast("model.experts_per_token", m.experts_per_token, 0);
  if (m.moe() && m.top_k() > m.num_experts)
    c.Add("model.experts_per_token", "experts_per_token " + std::to_string(m.top_k()) + " exceeds num_experts " +
                                         std::to_string(m.num_experts) + " (each token picks that many experts)");
  if (!m.moe() && m.experts_per_token > 0)
    c.Add("model.experts_per_token", "is set but num_experts is 0 (a dense MLP has no experts to pick)");
}

// Whole-model limits, once every key is in range: the parameter count and
// one layer's activations (computed in double), and the plan's size.
void CheckSize(const Scenario& s, Checker& c) {
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  double modules = 0;
  if (m.kind == ModelKind::kTransformer) {
    const double params = ApproxParameters(m);
    if (!(params <= limits::kParameters)) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "the model would have about %.3g parameters; Strata's limit is %.0e (docs/limits.md)", params,
                    limits::kParameters);
      c.Add("model.layers", buf);
    }
    const double sbh = static_cast<double>(m.seq_length) * t.micro_batch_size * static_cast<double>(m.hidden_size);
    const double act =
        sbh * 34 + 5.0 * m.num_heads * static_cast<double>(m.seq_length) * m.seq_length * t.micro_batch_size;
    if (!(act <= limits::kLayerActivationBytes)) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "one layer's activations for one micro batch would be about %.3g bytes; Strata's limit is %.0e "
                    "(lower seq_length or micro_batch_size)",
                    act, limits::kLayerActivationBytes);
      c.Add("model.seq_length", buf);
    }
    modules = 7.0 * m.layers + 3;
    // Per layer at most 12 dense tensors (attention, MLP, norms: weights
    // and biases); an MoE layer adds its router and each expert's 2 or 3
    // matrices (and their biases).
    const double per_expert = (m.mlp == MlpKind::kSwiGlu ? 3.0 : 2.0) * (m.bias ? 2 : 1);
    const double tensors = static_cast<double>(m.layers) * (12 + (m.moe() ? 1 + per_expert * m.num_experts : 0)) + 4;
    if (tensors > limits::kParameterTensors) {
      char buf[260];
      std::snprintf(buf, sizeof buf,
                    "the model would have about %.0f parameter tensors (layers x (12 + experts x %.0f)); Strata's "
                    "limit is %.0f (docs/limits.md): fewer layers or experts",
                    tensors, per_expert, limits::kParameterTensors);
      c.Add(m.moe() ? "model.num_experts" : "model.layers", buf);
    }
  } else {
    modules = static_cast<double>(m.sizes.size());
  }
  const double passes = modules * t.gradient_accumulation_steps * (t.activation_checkpointing ? 3 : 2);
  if (passes > limits::kModulePasses) {
    char buf[260];
    std::snprintf(buf, sizeof buf,
                  "the plan would hold about %.3g module passes (modules x micro batches x forward, backward and "
                  "recomputation); Strata's limit is %.0e: simulate fewer accumulation steps (time scales with them) "
                  "or fewer layers",
                  passes, limits::kModulePasses);
    c.Add("training.gradient_accumulation_steps", buf);
  }
}

void CheckHardware(const HardwareSpec& h, Checker& c) {
  // Rates (bytes or FLOP per second) and times (seconds) not zero are at
  // least these (docs/limits.md).
  constexpr double kMinRate = 1, kMinTime = 1e-12;
  using namespace limits;
  c.Within("hardware.nodes", h.nodes, 1, kNodes);
  c.Within("hardware.gpus_per_node", h.gpus_per_node, 1, kGpusPerNode);
  if (static_cast<int64_t>(h.nodes) * h.gpus_per_node > kWorldSize)
    c.Add("hardware.nodes",
          "nodes x gpus_per_node = " + std::to_string(static_cast<int64_t>(h.nodes) * h.gpus_per_node) +
              " GPUs; Strata's limit is " + std::to_string(kWorldSize) + " (docs/limits.md)");
  const double max_bytes = static_cast<double>(kMemoryBytes);
  c.Rate("hardware.gpu.memory", static_cast<double>(h.gpu.memory.v), max_bytes);
  // A GPU preset sets reserved_memory too; a smaller memory written beside
  // it keeps the preset's (a smaller GPU still has a CUDA context).
  if (h.gpu.memory.v > 0 && (h.gpu.reserved_memory.v < 0 || h.gpu.reserved_memory.v >= h.gpu.memory.v))
    c.Add("hardware.gpu.reserved_memory", "must be less than hardware.gpu.memory (" + FormatBytes(h.gpu.memory) +
                                              "; got " + FormatBytes(h.gpu.reserved_memory) +
                                              "; if a GPU preset set it, give reserved_memory beside memory)");
  c.Rate("hardware.gpu.peak_flops", h.gpu.peak_flops.flops_per_s, kFlops, false, kMinRate);
  c.Rate("hardware.gpu.hbm_bandwidth", h.gpu.hbm_bandwidth.bytes_per_s, kBandwidth, false, kMinRate);
  c.Rate("hardware.gpu.reduction_bandwidth", h.gpu.reduction_bandwidth.bytes_per_s, kBandwidth, true, kMinRate);
  if (!(h.gpu.efficiency > 0 && h.gpu.efficiency <= 1))
    c.Add("hardware.gpu.efficiency", "must be in (0, 1] (a fraction of peak_flops)");
  c.Within("hardware.gpu.sms", h.gpu.sms, 0, kSms);
  c.Within("hardware.gpu.tile_m", h.gpu.tile_m, 1, kTile);
  c.Within("hardware.gpu.tile_n", h.gpu.tile_n, 1, kTile);
  c.Rate("hardware.gpu.launch_latency", h.gpu.launch_latency.v, kLatency, true, kMinTime);
  c.Rate("hardware.cpu.adam_core_rate", h.cpu.adam_core_rate, kFlops, true, kMinRate);
  c.Rate("hardware.cpu.staging_bandwidth", h.cpu.staging_bandwidth.bytes_per_s, kBandwidth, true, kMinRate);
  c.Rate("hardware.cpu.page_fault_time", h.cpu.page_fault_time.v, kLatency, true, kMinTime);
  c.Within("hardware.pcie.gpus_per_switch", h.pcie.gpus_per_switch, 0, kGpusPerNode);
  c.Rate("hardware.pcie.switch_bandwidth", h.pcie.switch_bandwidth.bytes_per_s, kBandwidth, true, kMinRate);
  c.Rate("hardware.pcie.host_bandwidth", h.pcie.host_bandwidth.bytes_per_s, kBandwidth, true, kMinRate);
  if (h.pcie.gpus_per_switch > 0 && h.pcie.switch_bandwidth.bytes_per_s <= 0)
    c.Add("hardware.pcie.switch_bandwidth", "gpus_per_switch is set: give the switch uplink's bandwidth");
  c.Within("hardware.network.nics", h.network.nics, 1, kDevices);
  c.Within("hardware.nvme.drives", h.nvme.drives, 1, kDevices);
  c.Rate("hardware.cpu.memory", static_cast<double>(h.cpu.memory.v), max_bytes);
  c.Rate("hardware.cpu.memory_bandwidth", h.cpu.memory_bandwidth.bytes_per_s, kBandwidth, false, kMinRate);
  c.Within("hardware.cpu.cores", h.cpu.cores, 1, kCores);
  c.Rate("hardware.pcie.bandwidth", h.pcie.bandwidth.bytes_per_s, kBandwidth, false, kMinRate);
  c.Rate("hardware.nvlink.bandwidth", h.nvlink.bandwidth.bytes_per_s, kBandwidth, true, kMinRate);
  c.Rate("hardware.network.bandwidth", h.network.bandwidth.bytes_per_s, kBandwidth, false, kMinRate);
  c.Rate("hardware.nvme.capacity", static_cast<double>(h.nvme.capacity.v), max_bytes, /*zero_ok=*/true);
  c.Rate("hardware.nvme.read_bandwidth", h.nvme.read_bandwidth.bytes_per_s, kBandwidth, false, kMinRate);
  c.Rate("hardware.nvme.write_bandwidth", h.nvme.write_bandwidth.bytes_per_s, kBandwidth, false, kMinRate);
  c.Rate("hardware.nvme.readwrite_bandwidth", h.nvme.readwrite_bandwidth.bytes_per_s, kBandwidth, true, kMinRate);
  c.Rate("hardware.pcie.latency", h.pcie.latency.v, kLatency, true, kMinTime);
  c.Rate("hardware.nvlink.latency", h.nvlink.latency.v, kLatency, true, kMinTime);
  c.Rate("hardware.network.latency", h.network.latency.v, kLatency, true, kMinTime);
  c.Rate("hardware.nvme.latency", h.nvme.latency.v, kLatency, true, kMinTime);
}

// parallelism: Megatron's and DeepSpeed's rules for tensor and pipeline
// degrees (what they assert at initialisation), and what Strata plans.
void CheckParallelism(const Scenario& s, Checker& c) {
  const ParallelismSpec& p = s.parallelism;
  const ModelSpec& m = s.model;
  c.Within("parallelism.tensor", p.tensor, 1, limits::kWorldSize);
  c.Within("parallelism.pipeline", p.pipeline, 1, limits::kWorldSize);
  if (p.tensor < 1 || p.pipeline < 1) return;
  const int64_t world = static_cast<int64_t>(s.hardware.nodes) * s.hardware.gpus_per_node;
  const int64_t tp = p.tensor, pp = p.pipeline;
  if (world % (tp * pp) != 0)
    c.Add("parallelism.tensor", "tensor x pipeline = " + std::to_string(tp * pp) + " does not divide the world size " +
                                    std::to_string(world) + " (nodes x gpus_per_node)");
  if (p.sequence_parallel && tp == 1)
    c.Add("parallelism.sequence_parallel",
          "sequence parallelism splits the tensor-parallel region: it needs parallelism.tensor > 1");
  if (tp > 1) {
    if (m.kind == ModelKind::kMlp) {
      // Layers pair up as Megatron's MLP block: column-parallel (outputs
      // split), then row-parallel (inputs split); see BuildMlp.
      for (size_t l = 0; l + 2 < m.sizes.size(); l += 2)
        if (m.sizes[l + 1] % tp != 0)
          c.Add("model.sizes", "layer " + std::to_string(l) + "'s " + std::to_string(m.sizes[l + 1]) +
                                   " outputs are not divisible by parallelism.tensor " + std::to_string(tp) +
                                   " (a column-parallel layer splits its outputs)");
      if (p.sequence_parallel)
        c.Add("parallelism.sequence_parallel",
              "sequence parallelism splits a transformer's norms and dropout; the MLP has none");
    } else {
      if (m.num_heads > 0 && m.num_heads % tp != 0)
        c.Add("parallelism.tensor", "model.num_heads " + std::to_string(m.num_heads) + " is not divisible by tensor " +
                                        std::to_string(tp) + " (Megatron splits attention by heads)");
      if (m.num_kv_heads > 0 && m.num_kv_heads != m.num_heads && m.kv_heads() % tp != 0)
        c.Add("parallelism.tensor", "model.num_kv_heads " + std::to_string(m.kv_heads()) +
                                        " is not divisible by tensor " + std::to_string(tp) +
                                        " (Megatron's num_query_groups)");
      if (m.ffn() > 0 && m.ffn() % tp != 0)
        c.Add("parallelism.tensor",
              "model.ffn_hidden_size " + std::to_string(m.ffn()) + " is not divisible by tensor " + std::to_string(tp));
      if (m.moe())
        c.Add("parallelism.tensor", "tensor parallelism of a mixture of experts is not planned yet (issue #16)");
    }
  }
  if (pp > 1) {
    if (m.kind == ModelKind::kTransformer && m.layers > 0 && m.layers < pp)
      c.Add("parallelism.pipeline",
            "model.layers " + std::to_string(m.layers) + " is fewer than pipeline stages " + std::to_string(pp));
    if (m.kind == ModelKind::kMlp && static_cast<int64_t>(m.sizes.size()) - 1 < pp)
      c.Add("parallelism.pipeline", "the MLP's " + std::to_string(static_cast<int64_t>(m.sizes.size()) - 1) +
                                        " layers are fewer than pipeline stages " + std::to_string(pp));
    if (s.training.split_transformers)
      c.Add("training.split_transformers",
            "split_transformers with pipeline parallelism: Megatron-LM v1.1.5-ZeRO3's split has no pipeline");
    // deepspeed/runtime/pipe/engine.py PipelineEngine.__init__.
    if (s.zero.stage >= 2)
      c.Add("zero_optimization.stage",
            "ZeRO stage " + std::to_string(s.zero.stage) +
                " with pipeline parallelism: \"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\" "
                "(DeepSpeed's PipelineEngine allows stages 0 and 1: the pipeline interleaves micro batches, and "
                "reduces gradients once after the last)");
  }
}

// ZeRO++ under stage 3 (below it DeepSpeed never reads the keys): what
// DeepSpeed refuses, and what Strata does not plan yet.
void CheckZeroPlusPlus(const Scenario& s, Checker& c) {
  const ZeroConfig& z = s.zero;
  const int hpz = z.zero_hpz_partition_size;
  c.Within("zero_optimization.zero_hpz_partition_size", hpz, 0, limits::kWorldSize);
  if (hpz < 0 || z.stage != 3 || !z.ZeroPlusPlus()) return;
  const int64_t world = s.hardware.world_size();
  // utils/groups.py _create_zero_param_parallel_group: min(hpz, world)
  // ranks a group, then _ensure_divisibility.
  const int64_t group = std::min<int64_t>(hpz, world);
  if (group > 1 && world % group != 0)
    c.Add("zero_optimization.zero_hpz_partition_size",
          "DeepSpeed refuses this config: \"" + std::to_string(world) + " is not divisible by " +
              std::to_string(group) +
              "\" (utils/groups.py _create_zero_param_parallel_group: hpZ's groups are runs of consecutive ranks); "
              "use a divisor of the world size, such as hardware.gpus_per_node");
  if (hpz > 1 && s.policy.gpu_cache.v > 0)
    c.Add("zero_optimization.zero_hpz_partition_size",
          "hpZ with policy.gpu_cache is not modelled (a cached gathered copy is never released, so it would have "
          "no secondary partition): set one of them aside");
  if (s.parallelism.tensor > 1 || s.parallelism.pipeline > 1)
    c.Add(hpz > 1                    ? "zero_optimization.zero_hpz_partition_size"
          : z.zero_quantized_weights ? "zero_optimization.zero_quantized_weights"
                                     : "zero_optimization.zero_quantized_gradients",
          "ZeRO++ with tensor or pipeline parallelism is not modelled (DeepSpeed builds hpZ's and qgZ's groups "
          "from consecutive global ranks, for data parallelism alone)");
  if (hpz > 1 && z.offload_param.device != OffloadDevice::kNone)
    c.Add("zero_optimization.zero_hpz_partition_size",
          "hpZ with offload_param is not modelled (DeepSpeed keeps the secondary partition where the parameters "
          "are: pinned CPU memory, and for nvme a device PyTorch cannot allocate on)");
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
    c.Add("zero_optimization.offload_param.device", "offload_param (" + std::string(OffloadDeviceName(op.device)) +
                                                        ") requires zero_optimization.stage 3 (got stage " +
                                                        std::to_string(z.stage) + ")");
  if (oo.device == OffloadDevice::kCpu && z.stage == 0)
    c.Add("zero_optimization.offload_optimizer.device", "offload_optimizer requires zero_optimization.stage >= 1");
  if (oo.device == OffloadDevice::kNvme && z.stage != 3)
    c.Add("zero_optimization.offload_optimizer.device",
          "offload_optimizer to nvme requires zero_optimization.stage 3 (got stage " + std::to_string(z.stage) + ")");
  if (op.device == OffloadDevice::kNvme && s.hardware.nvme.capacity.v <= 0)
    c.Add("zero_optimization.offload_param.device", "offload_param.device is nvme but hardware.nvme.capacity is 0");
  if (oo.device == OffloadDevice::kNvme && s.hardware.nvme.capacity.v <= 0)
    c.Add("zero_optimization.offload_optimizer.device",
          "offload_optimizer.device is nvme but hardware.nvme.capacity is 0");
  using namespace limits;
  c.Within("zero_optimization.offload_param.buffer_count", op.buffer_count, 1, kBufferCount);
  c.Within("zero_optimization.offload_param.buffer_size", op.buffer_size.v, 1, kElements);
  c.Within("zero_optimization.offload_param.max_in_cpu", op.max_in_cpu.v, 0, kElements);
  // The swap pool is buffer_count buffers of buffer_size elements: the
  // product is bounded as one element count is (each factor in range, 4096
  // x 2^50 x 2 bytes wrapped past 2^63 to a negative size that "fit").
  if (op.buffer_count >= 1 && op.buffer_count <= kBufferCount && op.buffer_size.v >= 1 &&
      op.buffer_size.v <= kElements && op.buffer_count * op.buffer_size.v > kElements)
    c.Add("zero_optimization.offload_param.buffer_size",
          "buffer_count x buffer_size must be at most 2^50 elements (got " + std::to_string(op.buffer_count) + " x " +
              std::to_string(op.buffer_size.v) + "; Strata's limit, docs/limits.md)");
  c.Within("zero_optimization.offload_optimizer.buffer_count", oo.buffer_count, 1, kBufferCount);
  // DeepSpeed takes 0 for each (runtime/zero/config.py, Field(ge=0)): a
  // sub-group per parameter, every gradient reduced on its own.
  c.Within("zero_optimization.sub_group_size", z.sub_group_size.v, 0, kElements);
  c.Within("zero_optimization.reduce_bucket_size", z.reduce_bucket_size.v, 0, kElements);
  c.Within("zero_optimization.allgather_bucket_size", z.allgather_bucket_size.v, 0, kElements);
  // offload_config.py ratio: Field(1.0, ge=0.0, le=1.0); config.py
  // offload_ratio_check asserts stage 3 below 1.
  if (!(oo.ratio >= 0 && oo.ratio <= 1))
    c.Add("zero_optimization.offload_optimizer.ratio", "must be in [0, 1] (got " + Checker::Num(oo.ratio) + ")");
  else if (oo.ratio < 1 && z.stage != 3)
    c.Add("zero_optimization.offload_optimizer.ratio",
          "DeepSpeed refuses this config: \"Partial offloading only supported for ZeRO Stage 3.\" (got stage " +
              std::to_string(z.stage) +
              "; runtime/zero/config.py offload_ratio_check). Set zero_optimization.stage "
              "to 3 or leave ratio at 1");
  CheckZeroPlusPlus(s, c);
  c.Within("zero_optimization.stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size.v, 0, kElements);
  c.Within("zero_optimization.stage3_max_live_parameters", z.stage3_max_live_parameters.v, 0, kElements);
  c.Within("zero_optimization.stage3_max_reuse_distance", z.stage3_max_reuse_distance.v, 0, kElements);
  c.Within("zero_optimization.stage3_param_persistence_threshold", z.stage3_param_persistence_threshold.v, 0,
           kElements);
}

void CheckAio(const AioConfig& a, Checker& c) {
  // Bounded so that one run's io_setup (queue_depth x intra_op_parallelism
  // events) cannot take the machine's fs.aio-max-nr (65536 by default) and
  // break libaio for every other process.
  c.Within("aio.block_size", a.block_size.v, 512, limits::kAioBlockSize);
  if (a.block_size.v > 0 && a.block_size.v % 512 != 0)
    c.Add("aio.block_size",
          "must be a multiple of 512 bytes for O_DIRECT (got " + std::to_string(a.block_size.v) + ")");
  c.Within("aio.queue_depth", a.queue_depth, 1, limits::kAioQueueDepth);
  c.Within("aio.intra_op_parallelism", a.intra_op_parallelism, 1, limits::kAioParallelism);
  if (static_cast<int64_t>(a.queue_depth) * a.intra_op_parallelism > 16384)
    c.Add("aio.intra_op_parallelism",
          "queue_depth x intra_op_parallelism = " +
              std::to_string(static_cast<int64_t>(a.queue_depth) * a.intra_op_parallelism) +
              " AIO events; Strata's limit is 16384 (a quarter of fs.aio-max-nr's default)");
}

// Rules the planned DeepSpeed release's code asserts (its ReleaseProfile).
void CheckRelease(const Scenario& s, Checker& c) {
  const ReleaseProfile& r = ReleaseProfileFor(s.policy.deepspeed_stage3);
  const std::string release = std::string("policy.deepspeed_stage3 ") + r.name;
  // checkpointing.py configure() of v0.3.13-v0.3.16 (and the paper's a1e9753).
  if (r.cpu_checkpoints_need_partitioned_activations && s.training.cpu_checkpointing &&
      !s.training.partition_activations)
    c.Add("training.cpu_checkpointing",
          "cpu_checkpointing without partition_activations under " + release +
              ": \"CPU Checkpointing/Contiguous Checkpointing is only availble with partitioned activations\" "
              "(DeepSpeed v0.3.13-v0.3.16 checkpointing.py configure)");
  // stage3.py __init__ from PR #834 (v0.3.12) to v0.6.5; PR #2009 lifted it.
  if (r.param_offload_needs_optimizer_offload && s.zero.stage == 3 &&
      s.zero.offload_param.device != OffloadDevice::kNone && s.zero.offload_optimizer.device == OffloadDevice::kNone)
    c.Add("zero_optimization.offload_param.device",
          "offload_param without offload_optimizer under policy.deepspeed_stage3 before current: \"parameter "
          "offload is only available with optimizer state offload\" (DeepSpeed v0.3.12-v0.6.5 stage3.py; PR #2009 "
          "lifted it in v0.6.6)");
  // NVMe offload came with ZeRO-Infinity (PR #976, v0.3.15).
  if (!r.nvme_offload)
    for (const auto& [key, device] : {std::pair{"offload_param", s.zero.offload_param.device},
                                      std::pair{"offload_optimizer", s.zero.offload_optimizer.device}})
      if (device == OffloadDevice::kNvme)
        c.Add(std::string("zero_optimization.") + key + ".device",
              std::string(key) + ".device nvme under " + release +
                  ": ZeRO-3 Offload offloads to "
                  "CPU only (NVMe offload came with ZeRO-Infinity, DeepSpeed v0.3.15)");
}

}  // namespace

std::vector<ScenarioIssue> CheckHardwareSpec(const HardwareSpec& h) {
  Checker c;
  CheckHardware(h, c);
  return std::move(c.issues);
}

std::vector<ScenarioIssue> CheckScenario(const Scenario& s) {
  Checker c;
  CheckModel(s.model, c);
  if (s.training.split_transformers && s.model.kind != ModelKind::kTransformer)
    c.Add("training.split_transformers", "split_transformers splits transformer layers; this model is an MLP");
  CheckHardware(s.hardware, c);
  c.Within("training.micro_batch_size", s.training.micro_batch_size, 1, limits::kMicroBatch);
  c.Within("training.gradient_accumulation_steps", s.training.gradient_accumulation_steps, 1,
           limits::kAccumulationSteps);
  CheckZero(s, c);
  CheckParallelism(s, c);
  CheckAio(s.aio, c);
  c.Rate("policy.gpu_cache", static_cast<double>(s.policy.gpu_cache.v), static_cast<double>(limits::kMemoryBytes),
         true);
  c.Rate("policy.cpu_cache", static_cast<double>(s.policy.cpu_cache.v), static_cast<double>(limits::kMemoryBytes),
         true);
  c.Rate("policy.write_buffer", static_cast<double>(s.policy.write_buffer.v),
         static_cast<double>(limits::kAioBlockSize), true);
  CheckCompression(s.policy.compression, c);
  CheckStripes(s, c);
  CheckDelayedUpdate(s, c);
  CheckRelease(s, c);
  for (auto& issue : CheckFsdp(s)) c.Add(std::move(issue.path), std::move(issue.message));
  // Whole-model and plan limits only when every key is in range (their
  // products are then finite and meaningful).
  if (c.issues.empty()) CheckSize(s, c);
  return std::move(c.issues);
}

}  // namespace strata
