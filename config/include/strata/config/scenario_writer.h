// A scenario with settings written in, as a YAML file that loads on its own
// from any directory: what `strata tune -o DIR` writes as DIR/scenario.yaml.
#pragma once

#include <string>

#include "strata/config/scenario_loader.h"
#include "strata/core/status.h"

namespace strata::config {

// The scenario at `path` (a file or "builtin:NAME") with options.overrides
// applied to its YAML (as --set applies them), its model.hf_config made an
// absolute path, a --hardware file's section (options.hardware_file) in
// place of its own, and, when `deepspeed` is not empty, a `deepspeed:` key
// naming that file (relative to where the YAML is written) in place of its
// zero_optimization and aio sections, which the DeepSpeed config carries.
// options.deepspeed_config is not read: `deepspeed` replaces it.
Result<std::string> ScenarioYaml(const std::string& path, const LoadOptions& options, const std::string& deepspeed);

}  // namespace strata::config
