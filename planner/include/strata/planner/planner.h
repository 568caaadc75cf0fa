// The planner: scenario -> plan of one training iteration (see plan.h).
//
// It models DeepSpeed ZeRO stages 0-3 with ZeRO-Offload/Infinity placement:
//  - fp16/bf16 parameters: replicated on GPU (stages 0-2); in stage 3
//    partitioned over the data-parallel ranks and kept on offload_param.device
//    (NVMe partitions beyond max_in_cpu elements; the first max_in_cpu elements
//    stay in CPU memory), fetched per module (NVMe read into a pinned swap
//    buffer of the buffer_count x buffer_size pool, H2D, allgather), prefetched
//    stage3_prefetch_bucket_size elements ahead, never more than
//    stage3_max_live_parameters gathered at once, kept between uses closer
//    than stage3_max_reuse_distance; groups below
//    stage3_param_persistence_threshold stay whole on every GPU.
//  - gradients: replicated and all-reduced (stage 0) or reduce-scattered
//    (stage 1) once per iteration in reduce_bucket_size chunks; in stages 2-3
//    reduce-scattered every micro step in buckets, without blocking compute
//    when overlap_comm, and moved to the optimizer's tier.
//  - fp32 master parameters and Adam moments: on offload_optimizer.device,
//    partitioned in stages >= 1; the step runs on the GPU (device none) or the
//    CPU, one op per sub_group_size tile; NVMe states are swapped through
//    buffer_count pinned buffers, honouring pipeline_read/pipeline_write.
//  - activations: kept per module, or one checkpoint per layer with
//    recomputation in backward; cpu_checkpointing moves checkpoints to CPU.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "strata/core/model.h"
#include "strata/core/scenario.h"
#include "strata/core/status.h"
#include "strata/plan/plan.h"

namespace strata {

// A DeepSpeed init or runtime assertion the configuration would hit
// (`id` names it: buffer_size_too_small, param_buffer_count_zero,
// optimizer_buffer_count_too_small, param_swap_buffers_exhausted), with
// DeepSpeed's message and the knob to change.
struct PlannerCheck {
  std::string id;
  std::string message;
};

struct PlannerOptions {
  // When false, a configuration DeepSpeed rejects is planned around (a swap
  // buffer widened, buffers added) instead of failing, so the estimator can
  // still measure memory; what fired is appended to `checks` if set.
  bool strict = true;
  std::vector<PlannerCheck>* checks = nullptr;
};

// REQUIRES: CheckScenario(scenario) is empty.
// Fails with InvalidArgument ("DeepSpeed would refuse this config [id]:
// message", exit 2: the configuration, not the memory, is wrong) in strict
// mode when DeepSpeed would reject the configuration at init or fail at run
// time (see PlannerCheck).
Result<Plan> BuildPlan(const Scenario& scenario, const PlannerOptions& options = {});

// The smallest offload_param.buffer_count with which the plan never runs out
// of parameter swap buffers (param_swap_buffers_exhausted), found by
// planning: DeepSpeed's coordinator reads ahead into whatever buffers are
// free, so the count needed is the schedule's, not a formula's. nullopt when
// the scenario does not run out, or still does at Strata's limit.
std::optional<int> NeededParamSwapBuffers(const Scenario& scenario);

}  // namespace strata
