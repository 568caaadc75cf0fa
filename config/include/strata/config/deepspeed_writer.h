// A scenario's training settings as a DeepSpeed JSON config: what `strata
// tune -o DIR` hands back for a launcher. Every key Strata reads from a
// DeepSpeed config (deepspeed_config.h) is written, so that loading the
// scenario with the config (`--deepspeed`) plans the same iteration.
#pragma once

#include <string>

#include "strata/core/scenario.h"

namespace strata::config {

// The batch (micro batch and accumulation: DeepSpeed derives
// train_batch_size from its data-parallel world), precision, activation
// checkpointing, the optimizer (AdamW: what Strata models), and the
// zero_optimization and aio sections in full. Pretty-printed JSON.
std::string DeepSpeedConfigJson(const Scenario& s);

}  // namespace strata::config
