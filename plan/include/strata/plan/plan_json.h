// JSON encoding of the plan (the on-disk contract read by the simulator,
// executor and GUI). Encoding is deterministic: the same plan gives the same
// bytes, so encode(decode(encode(p))) == encode(p).
//
// Format "strata.plan" version 1: an object with scenario, world_size, nodes,
// gpus_per_node, zero_stage, micro_steps, capacity_bytes {gpu, cpu, nvme},
// gpu_reserved_bytes (optional; absent when 0),
// model {total_params, model_flops, samples_per_iteration, tokens_per_sample},
// param_groups, modules, groups, buffers and ops arrays whose fields mirror
// plan.h; enums are written by name (OpKindName, StreamName, ...).
#pragma once

#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/plan/plan.h"

namespace strata {

std::string EncodePlan(const Plan& plan, bool pretty = false);
// Fails with InvalidArgument naming the first offending field.
Result<Plan> DecodePlan(std::string_view json);

}  // namespace strata
