// The memory estimator: "does it fit?" Per GPU (gpu tier) and per node (cpu,
// nvme tiers): the peak bytes of the planned iteration split into model
// states, activations and buffers, against capacity; plus the ZeRO paper's
// analytic model-state figure, DeepSpeed's own estimator figure where it has
// one, and named pre-launch configuration checks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/core/status.h"
#include "strata/plan/validator.h"

namespace strata {

// Per-GPU bytes of model states with mixed-precision Adam: 2 (fp16 params) +
// 2 (fp16 grads) + 12 (fp32 params, momentum, variance) bytes per parameter,
// partitioned by ZeRO stage over `dp` ranks (Rajbhandari et al., SC'20, Fig. 1):
//   stage 0: 16P; 1: 4P + 12P/dp; 2: 2P + 14P/dp; 3: 16P/dp.
Bytes ZeroModelStateBytes(Elements params, int stage, int dp);

// DeepSpeed's estimate_zero2/3_model_states_mem_needs, reimplemented with its
// defaults (additional_buffer_factor 1.5, zero_init True).
struct DeepSpeedEstimate {
  std::string function;  // "estimate_zero3_model_states_mem_needs"
  std::string options;   // "offload_param=nvme, offload_optimizer=nvme, zero_init=1"
  Bytes gpu_per_gpu;
  Bytes cpu_per_node;
};
std::optional<DeepSpeedEstimate> DeepSpeedModelStates(const Scenario& s);

struct ConfigCheck {
  enum class Severity { kWarning, kError };
  // DeepSpeed's assertions (PlannerCheck ids: buffer_size_too_small,
  // param_buffer_count_zero, optimizer_buffer_count_too_small), and
  // too_few_buffers, pinned_exceeds_cpu, nvme_capacity_exceeded.
  std::string id;
  Severity severity = Severity::kWarning;
  std::string message;
  // DeepSpeed would refuse the configuration (an assertion at init or in
  // the first step: the PlannerCheck ids), as opposed to memory running out.
  bool deepspeed_refuses = false;
};

struct TierEstimate {
  Bytes capacity, peak, model_states, activations, buffers;
  bool fits() const { return peak <= capacity; }
};

// One allocation of the plan: a resident buffer (what DeepSpeed allocates at
// init, by the plan's name), or the transient buffers of one state kind at
// their tier's peak ("transient.activation"). `bytes` is one allocation's
// (one rank's); `count` how many a node holds (gpus_per_node for CPU and
// NVMe, 1 per GPU).
struct Allocation {
  std::string name;
  Tier tier = Tier::kGpu;
  StateKind kind = StateKind::kParam16;
  Bytes bytes;
  bool pinned = false;  // page-locked CPU memory
  bool resident = true;
  int count = 1;
};

struct MemoryEstimate {
  std::string scenario;
  Bytes gpu_reserved;  // taken out of the GPU's capacity (Plan::gpu_reserved)
  Elements total_params, largest_layer;
  int world_size = 1;
  int stage = 0;
  Framework framework = Framework::kDeepSpeed;  // FSDP2: stage 3, no DeepSpeed figure
  // 3D parallelism: ZeRO partitions over data_parallel ranks; each holds
  // 1 / model_parallel (tensor x pipeline) of the model.
  int data_parallel = 1, model_parallel = 1;
  std::string layout;  // Plan::LayoutText: "tensor 4 x data 128"
  // Pipeline stages: the stage whose rank holds the GPU peak (-1 without
  // pipeline stages). `allocations` lists, per tier, the buffers of the
  // stages at that tier's peak (MemoryPeaks::ranks_at_peak).
  int peak_stage = -1;
  TierEstimate tiers[kNumTiers];
  std::vector<Violation> violations;
  std::vector<ConfigCheck> checks;
  std::vector<Allocation> allocations;
  // Lines a caller adds (the CLI: the NVMe drives' wear), printed before
  // the verdict.
  std::vector<std::string> notes;
  Bytes zero_paper_gpu_model_states;
  std::optional<DeepSpeedEstimate> deepspeed;
  bool feasible() const;
  // Some check is one DeepSpeed would refuse the configuration by.
  bool deepspeed_refuses() const;
};

// Plans the scenario (leniently: a too-small swap buffer is a check, not a
// failure), replays its memory and runs the configuration checks.
// REQUIRES: CheckScenario(s) is empty. `plan`, when given, receives the
// plan the estimate replayed.
Result<MemoryEstimate> EstimateMemory(const Scenario& s, Plan* plan = nullptr);

}  // namespace strata
