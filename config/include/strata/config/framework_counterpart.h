// A scenario as the other framework would run it: the closest DeepSpeed
// ZeRO configuration of an FSDP2 one and back, for side-by-side answers
// (strata compare --frameworks). The mapping is docs/fsdp.md's "Side by
// side" table; what has no counterpart is an InvalidArgument naming the
// key.
#pragma once

#include <string>

#include "strata/core/scenario.h"
#include "strata/core/status.h"

namespace strata::config {

// `s` under framework `to` (s itself when it already is); the model,
// hardware, batch and precision stay.
Result<Scenario> ScenarioAsFramework(const Scenario& s, Framework to);

// One line for a report's row: "ZeRO-3, offload param cpu optimizer cpu",
// "FSDP2 FULL_SHARD, CPU offload".
std::string FrameworkSummary(const Scenario& s);

}  // namespace strata::config
