// What one plan op costs on the hardware's compute units alone (no
// sharing): the single definition the simulator's replay and the resource
// bound both charge (core/gpu_cost.h has the models).
#pragma once

#include "strata/core/scenario.h"
#include "strata/scheduler/plan.h"

namespace strata {

// Seconds of a GPU op (forward, backward or recomputation, or an optimizer
// step on the compute stream): a compute op is its module's kernels
// (PlanModule::fwd for kind forward, bwd for backward) under the GPU's
// compute model, or its FLOPs at peak x efficiency (flat model, or an op of
// no module); a GPU optimizer step its bytes at HBM bandwidth plus one
// launch. 0 for other kinds.
double OpGpuSeconds(const Plan& plan, const Op& op, const GpuSpec& gpu);

// A CPU optimizer step's work in bytes of the node's memory bandwidth
// (core/gpu_cost.h CpuAdamWorkBytes): its bytes, or more when the cores'
// vector math binds.
double OpCpuWorkBytes(const Op& op, const CpuSpec& cpu);

}  // namespace strata
