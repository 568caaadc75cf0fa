// A DeepSpeed release as data: the stage-3 mechanisms that differ between
// the releases Strata plans (policy.deepspeed_stage3), each a named flag the
// planner and the scenario checks read, so no release is named in control
// flow. What each release changed, with its pull request and the source
// read, is one table in docs/fidelity.md ("DeepSpeed releases").
#pragma once

#include <cstdint>

#include "strata/core/scenario.h"

namespace strata {

struct ReleaseProfile {
  const char* name = "current";  // the policy.deepspeed_stage3 value
  // Fetches: v0.3.16-v0.5.10's PartitionedParameterCoordinator (a recorded
  // module trace, torch.cuda.synchronize() ending each fetch, release by
  // module reuse distance) instead of PR #1453's fetch queue (v0.6.0).
  bool module_trace_coordinator = false;
  // With module_trace_coordinator: the step ids line up with the recorded
  // trace, so prefetch and reuse work as written (v0.3.13, before PR #867's
  // reset hook; policy.aligned_trace turns it on).
  bool aligned_trace = false;
  // With module_trace_coordinator: fetch_sub_module formats each parameter's
  // norm into a discarded debug message (a norm kernel and a host wait; PR
  // #976 added it).
  bool debug_norms = false;
  // Allgathers and reduce-scatters through lists of per-rank views, which
  // the PyTorch of that stack copies through a flattened buffer (before
  // v0.6.0's coalesced collectives).
  bool list_collectives = false;
  // offload_optimizer with gradient_accumulation_steps 1: each reduced shard
  // widened to fp32 on the GPU and sent to the optimizer; no pinned CPU
  // gradient partition (before PR #1453).
  bool direct_fp32_gradients = false;
  // Optimizer on the GPU: the gradient partition lives from the backward's
  // first reduced gradient to the step, not the whole run (before PR #1453).
  bool scoped_gpu_gradient_partition = false;
  // NVMe parameters: the fp16 write-back buffer sized from the largest
  // sub-group's partitions, not its parameters' full numel (before PR #1453).
  bool writeback_sized_by_partitions = false;
  // NVMe parameters: each sub-group's fp16 write-back left in flight after
  // the step (v0.3.16 and a1e9753; PR #1076 in v0.4.0 made it blocking).
  bool async_fp16_writeback = false;
  // cpu_checkpointing: synchronous copies into pageable CPU memory on the
  // compute stream (before the activation offload engine, PR #8282).
  bool blocking_checkpoint_copies = false;
  // Offloaded optimizer: CPU Adam's pinned double buffer of this many fp32
  // elements twice (counted, never allocated; 0: none, since v0.15).
  int64_t cpu_adam_tile_elements = 0;
  // How the release reads a DeepSpeed config (docs/fidelity.md, rows
  // "Unknown keys of a DeepSpeed config" to "Refusals outside the ZeRO
  // section").
  // The config read key by key from dicts, before PR #2004's pydantic
  // models (v0.7.0): a key the release does not read is ignored, not
  // refused; cpu_offload and the plural cpu_offload_params, when present,
  // replace the offload_optimizer and offload_param sections (offloading to
  // the CPU when true), and the singular cpu_offload_param is not read.
  bool dict_config = false;
  // zero_optimization.cpu_offload_use_pin_memory pins the offloaded states
  // (v0.3.13 reads it; later releases only warn that it is deprecated).
  bool cpu_offload_use_pin_memory = false;
  // communication_data_type's name for bfloat16 ("bfp16" at v0.5.10), or
  // nullptr where the release does not read the key (v0.3.x).
  const char* bf16_communication_name = "bf16";
  // ZeRO-3's hooks on the host (policy.host_hooks; docs/fidelity.md
  // "ZeRO-3's hooks"): the host time of one module use (its pre- and post-
  // hooks and their autograd functions) and of each parameter it gathers
  // and releases (fetch, wait, release). Assumed from published profiles.
  double hook_module_seconds = 100e-6;
  double hook_param_seconds = 40e-6;
  // The host synchronizes the device before it gathers a module's
  // parameters (each allgather launch calls torch.cuda.synchronize(), so its
  // hook's host time cannot overlap the GPU's work).
  bool hook_waits_for_device = false;
  // Scenario rules the release's code asserts.
  bool cpu_checkpoints_need_partitioned_activations = false;  // checkpointing.py configure, v0.3.13-v0.3.16
  bool param_offload_needs_optimizer_offload = false;         // stage3.py until PR #2009 (v0.6.6)
  bool nvme_offload = true;                                   // false before ZeRO-Infinity (v0.3.15)
};

// The profile of one release, as shipped.
const ReleaseProfile& ReleaseProfileFor(DeepSpeedStage3 release);

// The profile a scenario plans: its release's, with aligned_trace turned on
// by policy.aligned_trace.
ReleaseProfile ReleaseProfileOf(const PolicyConfig& policy);

}  // namespace strata
