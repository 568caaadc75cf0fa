// Parsers of the scenario's sections (private to config). The zero and aio
// parsers are shared by the scenario YAML and DeepSpeed's JSON config.
#pragma once

#include "strata/core/scenario.h"
#include "yaml_reader.h"

namespace strata::config {

void ReadModel(Section& s, ModelSpec* out);
void ReadHardware(Section& s, HardwareSpec* out);
void ReadTraining(Section& s, TrainingSpec* out);
// Sets *overlap_comm_set when the key is given (its default depends on stage).
void ReadZero(Section& s, ZeroConfig* out, bool* overlap_comm_set);
void ReadAio(Section& s, AioConfig* out);
void ReadPolicy(Section& s, PolicyConfig* out);
void ReadParallelism(Section& s, ParallelismSpec* out);

}  // namespace strata::config
