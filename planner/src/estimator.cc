#include "strata/planner/estimator.h"

#include <algorithm>
#include <cmath>

#include "strata/core/model.h"
#include "strata/planner/planner.h"

namespace strata {

Bytes ZeroModelStateBytes(Elements params, int stage, int dp) {
  const double P = static_cast<double>(params.v), N = dp;
  double b = 0;
  switch (stage) {
    case 0:
      b = 16 * P;
      break;
    case 1:
      b = 4 * P + 12 * P / N;
      break;
    case 2:
      b = 2 * P + 14 * P / N;
      break;
    default:
      b = 16 * P / N;
      break;
  }
  return Bytes(static_cast<int64_t>(std::llround(b)));
}

std::optional<DeepSpeedEstimate> DeepSpeedModelStates(const Scenario& s) {
  const int stage = s.zero.stage;
  if (stage < 2) return std::nullopt;                 // DeepSpeed has no estimator for stages 0-1
  auto built = BuildModelGraph(s.model, s.training);  // DeepSpeed's estimator knows no tensor parallelism
  if (!built.ok()) return std::nullopt;               // EstimateMemory reports the overflow
  const ModelGraph& g = *built;
  const double total = static_cast<double>(g.total_params.v);
  const double largest = static_cast<double>(g.largest_layer.v);
  const double gpn = s.hardware.gpus_per_node, nodes = s.hardware.nodes, gpus = gpn * nodes;
  const double factor = 1.5;  // additional_buffer_factor
  const bool cpu_offload = s.zero.offload_optimizer.device != OffloadDevice::kNone;
  DeepSpeedEstimate e;
  double gpu = 0, cpu = 0;
  if (stage == 2) {
    e.function = "estimate_zero2_model_states_mem_needs";
    e.options = std::string("offload_optimizer=") + (cpu_offload ? "cpu" : "none");
    // stage_1_and_2.py estimate_zero2_model_states_mem_needs as of DeepSpeed
    // PR 5099 (v0.14.3): 2P + 18P/N on the GPU without offload.
    if (cpu_offload) {
      gpu = 2 * total;
      cpu = total * std::max(4 * gpus, 16.0) * factor;
    } else {
      gpu = 2 * total + std::floor(18 * total / gpus);
      cpu = total * 4 * gpn * factor;
    }
  } else {
    e.function = "estimate_zero3_model_states_mem_needs";
    const bool params_offload = s.zero.offload_param.device != OffloadDevice::kNone;
    e.options = std::string("offload_param=") + (params_offload ? "cpu" : "none") +
                ", offload_optimizer=" + (cpu_offload ? "cpu" : "none") + ", zero_init=1";
    const double gpus_factor = 1.0 / nodes;
    const double largest_mem = 4 * largest;
    if (cpu_offload && params_offload) {
      gpu = largest_mem;
      cpu = total * 18 * gpus_factor * factor;
    } else if (cpu_offload) {
      gpu = largest_mem + std::floor(2 * total / gpus);
      cpu = total * 16 * gpus_factor * factor;
    } else {
      gpu = largest_mem + std::floor(18 * total / gpus);
      cpu = largest * 4 * gpn * factor;
    }
  }
  e.gpu_per_gpu = Bytes(static_cast<int64_t>(gpu));
  e.cpu_per_node = Bytes(static_cast<int64_t>(cpu));
  return e;
}

bool MemoryEstimate::feasible() const {
  if (!violations.empty()) return false;
  for (const auto& c : checks)
    if (c.severity == ConfigCheck::Severity::kError) return false;
  return true;
}

bool MemoryEstimate::deepspeed_refuses() const {
  for (const auto& c : checks)
    if (c.deepspeed_refuses) return true;
  return false;
}

namespace {

// Below this share of the GPU's capacity left at the peak, estimate warns
// (gpu_near_capacity).
constexpr int kGpuHeadroomPercent = 5;

void AddCheck(MemoryEstimate& e, const char* id, ConfigCheck::Severity sev, std::string msg) {
  e.checks.push_back({id, sev, std::move(msg)});
}

// Swap-buffer and pinned-memory checks DeepSpeed users otherwise meet at run time.
void ConfigChecks(const Scenario& s, const Plan& plan, MemoryEstimate& e) {
  const auto& op = s.zero.offload_param;
  // Strata's window (policy.prefetch: window) keeps the plan's
  // window_nvme_reads parameter reads from NVMe in flight, each in a swap
  // buffer. DeepSpeed's coordinator reads ahead only into free buffers;
  // running out is the planner's param_swap_buffers_exhausted.
  const int64_t depth = plan.cache.window_nvme_reads;
  if (depth > op.buffer_count)
    AddCheck(e, "too_few_buffers", ConfigCheck::Severity::kWarning,
             "stage3_prefetch_bucket_size (" + std::to_string(s.zero.stage3_prefetch_bucket_size.v) +
                 " elements) keeps up to " + std::to_string(depth) +
                 " parameter fetches from NVMe in flight, but offload_param.buffer_count is " +
                 std::to_string(op.buffer_count) + ": prefetches will wait for swap buffers");
  // Pinned host memory per node: every page-locked buffer (DeepSpeed pins
  // its swap pools and the CPU flat parameter buffer whatever pin_memory
  // says) at the CPU tier's peak.
  Bytes pinned;
  for (const auto& a : e.allocations)
    if (a.tier == Tier::kCpu && a.pinned) pinned += a.bytes * a.count;
  if (pinned > s.hardware.cpu.memory)
    AddCheck(e, "pinned_exceeds_cpu", ConfigCheck::Severity::kError,
             "pinned host memory per node (" + FormatBytes(pinned) + ": swap buffers and pinned states of " +
                 std::to_string(plan.gpus_per_node) + " ranks) exceeds hardware.cpu.memory (" +
                 FormatBytes(s.hardware.cpu.memory) + ")");
  // A GPU peak that fits with little to spare: what Strata does not count
  // (NCCL's buffers, cuBLAS workspaces, the caching allocator's
  // fragmentation) can take the rest, and PyTorch then frees its cache and
  // retries, a device synchronisation each time (DeepSpeed's stage 3 warns
  // of these "allocator cache flushes").
  const auto& gpu = e.tiers[static_cast<int>(Tier::kGpu)];
  if (gpu.fits() && gpu.peak.v > 0 &&
      static_cast<double>((gpu.capacity - gpu.peak).v) <
          static_cast<double>(gpu.capacity.v) * kGpuHeadroomPercent / 100)
    AddCheck(e, "gpu_near_capacity", ConfigCheck::Severity::kWarning,
             "GPU peak " + FormatBytes(gpu.peak) + " leaves " + FormatBytes(gpu.capacity - gpu.peak) + " of its " +
                 FormatBytes(gpu.capacity) + " (under " + std::to_string(kGpuHeadroomPercent) +
                 "%): NCCL's buffers, cuBLAS workspaces and the caching allocator's fragmentation are not counted, "
                 "so a real run may run out of memory or flush its allocator's cache here");
  const auto& nv = e.tiers[static_cast<int>(Tier::kNvme)];
  if (nv.peak > nv.capacity)
    AddCheck(e, "nvme_capacity_exceeded", ConfigCheck::Severity::kError,
             "NVMe needs " + FormatBytes(nv.peak) + " per node but hardware.nvme.capacity is " +
                 FormatBytes(nv.capacity) + " (over by " + FormatBytes(nv.peak - nv.capacity) + ")");
}

}  // namespace

// Every buffer of the plan: resident ones by name, transient ones summed by
// state kind at their tier's peak.
void ListAllocations(const Plan& plan, const ValidationReport& report, MemoryEstimate& e) {
  // Whose buffers make each tier's peak: per stage, how many ranks' worth
  // (one stage on the GPU; the peak node's ranks of each stage on the CPU
  // and NVMe: MemoryPeaks::ranks_at_peak).
  const OpId at = report.memory.peak_op[static_cast<int>(Tier::kGpu)];
  if (plan.pipeline > 1)
    e.peak_stage = at >= 0 && at < static_cast<OpId>(plan.ops.size()) ? plan.ops[static_cast<size_t>(at)].stage : 0;
  auto count = [&](Tier t, int stage) {
    const std::vector<int>& r = report.memory.ranks_at_peak[static_cast<int>(t)];
    if (r.empty()) return static_cast<int>(plan.NodeScale(t));  // no replay (a broken plan)
    return stage >= 0 && stage < static_cast<int>(r.size()) ? r[static_cast<size_t>(stage)] : 0;
  };
  Bytes resident[kNumTiers][kNumStateKinds];
  bool all_pinned[kNumTiers][kNumStateKinds];
  bool any_transient[kNumTiers][kNumStateKinds] = {};
  for (auto& row : all_pinned)
    for (bool& b : row) b = true;
  for (const Buffer& b : plan.buffers) {
    const int n = count(b.tier, b.stage);
    if (n == 0) continue;
    const int t = static_cast<int>(b.tier), k = static_cast<int>(b.kind);
    const bool pinned = b.tier == Tier::kCpu && b.pinned;
    if (b.resident) {
      resident[t][k] += b.bytes * n;
      e.allocations.push_back({b.name, b.tier, b.kind, b.bytes, pinned, true, n});
    } else {
      any_transient[t][k] = true;
      all_pinned[t][k] = all_pinned[t][k] && pinned;
    }
  }
  for (Tier tier : kAllTiers) {
    const int t = static_cast<int>(tier);
    for (int k = 0; k < kNumStateKinds; ++k) {
      const Bytes at_peak = report.memory.at_peak[t][k] - resident[t][k];
      if (!any_transient[t][k] || at_peak.v <= 0) continue;
      const auto kind = static_cast<StateKind>(k);
      e.allocations.push_back({"transient." + std::string(StateKindName(kind)), tier, kind, at_peak,
                               tier == Tier::kCpu && all_pinned[t][k], false, 1});
    }
  }
}

Result<MemoryEstimate> EstimateMemory(const Scenario& s, Plan* plan_out) {
  PlannerOptions po;
  po.strict = false;
  std::vector<PlannerCheck> fired;
  po.checks = &fired;
  STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s, po));
  const ValidationReport report = ValidatePlan(plan);
  MemoryEstimate e;
  e.scenario = s.name;
  e.world_size = plan.world_size;
  e.framework = s.framework;
  e.stage = s.framework == Framework::kFsdp ? 3 : s.zero.stage;
  e.total_params = plan.total_params;
  // DeepSpeed's largest_layer_params: the most parameters of one module.
  for (const auto& m : plan.modules) {
    Elements n;
    for (int gi : m.param_groups) n += plan.param_groups[gi].elements;
    e.largest_layer = std::max(e.largest_layer, n);
  }
  e.gpu_reserved = plan.gpu_reserved;
  for (Tier t : kAllTiers) {
    const int ti = static_cast<int>(t);
    TierEstimate& te = e.tiers[ti];
    te.capacity = plan.capacity[ti];
    te.peak = report.memory.peak[ti];
    for (int k = 0; k < kNumStateKinds; ++k) {
      const Bytes b = report.memory.at_peak[ti][k];
      switch (CategoryOf(static_cast<StateKind>(k))) {
        case StateCategory::kModelStates:
          te.model_states += b;
          break;
        case StateCategory::kActivations:
          te.activations += b;
          break;
        case StateCategory::kBuffers:
          te.buffers += b;
          break;
      }
    }
  }
  e.violations = report.violations;
  // The ZeRO paper's figure for a data-parallel rank's share of the model
  // (its 1 / (tensor x pipeline): Megatron splits the model, ZeRO the rest).
  e.data_parallel = plan.data_parallel();
  e.model_parallel = plan.world_size / std::max(1, e.data_parallel);
  e.layout = plan.LayoutText();
  e.zero_paper_gpu_model_states =
      ZeroModelStateBytes(Elements(CeilDiv(e.total_params.v, e.model_parallel)), e.stage, e.data_parallel);
  if (s.framework == Framework::kDeepSpeed) e.deepspeed = DeepSpeedModelStates(s);
  ListAllocations(plan, report, e);
  for (auto& c : fired) e.checks.push_back({c.id, ConfigCheck::Severity::kError, std::move(c.message), true});
  ConfigChecks(s, plan, e);
  if (plan_out != nullptr) *plan_out = std::move(plan);
  return e;
}

}  // namespace strata
