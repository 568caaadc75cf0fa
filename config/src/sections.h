// Parsers of the scenario's sections (private to config). The zero and aio
// parsers are shared by the scenario YAML and DeepSpeed's JSON config.
#pragma once

#include "strata/core/release_profile.h"
#include "strata/core/scenario.h"
#include "yaml_reader.h"

namespace strata::config {

void ReadModel(Section& s, ModelSpec* out);
void ReadHardware(Section& s, HardwareSpec* out);
void ReadTraining(Section& s, TrainingSpec* out);
// Sets *overlap_comm_set when the key is given (its default depends on stage).
// `release` is the DeepSpeed release planned: how it reads the section.
void ReadZero(Section& s, ZeroConfig* out, bool* overlap_comm_set, const ReleaseProfile& release);
void ReadAio(Section& s, AioConfig* out);
// Reports the unknown keys of a section DeepSpeed reads as a pydantic model
// (zero_optimization and its offload sections, fp16, bf16): DeepSpeed
// refuses them too (runtime/config_utils.py DeepSpeedConfigModel,
// extra="forbid"), so they are errors; a release that read its config from
// dicts ignored them, so under its profile they are listed as not modelled.
void FinishDeepSpeedSection(Section& s, const ReleaseProfile& release);
void ReadPolicy(Section& s, PolicyConfig* out);
void ReadParallelism(Section& s, ParallelismSpec* out);
// framework: fsdp's section (fsdp_section.cc); gpus_per_node places
// HYBRID_SHARD's shard group within a node.
void ReadFsdp(Section& s, FsdpSpec* out, int gpus_per_node);

}  // namespace strata::config
