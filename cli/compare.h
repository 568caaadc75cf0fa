// strata compare's second form (private to the CLI): the scenario as each
// framework of `list` ("deepspeed,fsdp") runs it, one row each
// (compare_frameworks.cc). Returns the exit code.
#pragma once

#include <string>

#include "commands.h"

namespace strata::cli {

int CompareFrameworks(const CommonArgs& a, const std::string& list, const sim::SimOptions& sim, int jobs);

}  // namespace strata::cli
