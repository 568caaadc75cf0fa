// A DeepSpeed JSON config read over a scenario (private to config).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "strata/core/scenario.h"
#include "yaml_reader.h"

namespace strata::config {

// Reads every key of the DeepSpeed config at `path` that Strata models,
// with DeepSpeed's own rules (deepspeed/runtime/config.py):
//  - train_batch_size, train_micro_batch_size_per_gpu and
//    gradient_accumulation_steps: any two give the third
//    (_set_batch_related_parameters), then DeepSpeed's _batch_assertion
//    (train = micro x accumulation x data-parallel world);
//  - fp16.enabled / bf16.enabled -> training.precision (both: DeepSpeed's
//    error; neither section: the scenario's precision stands);
//  - activation_checkpointing (present: the model checkpoints its layers;
//    cpu_checkpointing);
//  - optimizer.type (Adam and AdamW: what Strata models);
//  - zero_optimization and aio, which replace the scenario's sections.
// The Hugging Face Trainer's "auto" is filled from the scenario where it
// holds the value (integrations/deepspeed.py trainer_config_process and
// trainer_config_finalize: batch keys, fp16/bf16.enabled, and from the
// hidden size reduce_bucket_size = h^2, stage3_prefetch_bucket_size =
// 0.9 h^2, stage3_param_persistence_threshold = 10 h); other "auto" values
// of modelled keys are errors. Keys Strata does not model go to the sink's
// not-modelled list with the reason. Errors carry file:line:column.
//
// --set overrides win over the file: those under zero_optimization and aio
// are applied to the file's sections (when it has them), and training.* ones
// are read again after it (so a sweep of micro_batch_size or precision with
// --deepspeed varies what it says; DeepSpeed's train_batch_size is then
// micro x accumulation x world).
// `scenario_sections`: the scenario's own zero_optimization and aio (key,
// "file:line:col"), each said in a warning where the config replaces it.
void ApplyDeepSpeed(const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides,
                    Scenario* s, bool* overlap_comm_set, ErrorSink& sink,
                    const std::vector<std::pair<std::string, std::string>>& scenario_sections = {});

}  // namespace strata::config
