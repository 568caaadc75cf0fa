// The simulator's child side (private): what runs in the forked child or in
// the strata-sim-worker helper, and the request that carries a simulation
// to the helper.
#pragma once

#include "strata/core/scenario.h"
#include "strata/core/status.h"
#include "strata/plan/plan.h"
#include "strata/simulator/simulator.h"

namespace strata::sim {

// Builds the platform, replays the plan and streams progress and the
// result to `fd` (frames read by Simulate), then exits.
[[noreturn]] void RunSimulationChild(const Plan& plan, const HardwareSpec& hw, const SimOptions& opt, int fd);

// The helper's request: the hardware and options' plain fields, and the
// plan's wire bytes (EncodePlanWire). WriteSimRequest never raises SIGPIPE
// (fd is a socket).
bool WriteSimRequest(int fd, const Plan& plan, const HardwareSpec& hw, const SimOptions& opt);
Status ReadSimRequest(int fd, Plan* plan, HardwareSpec* hw, SimOptions* opt);

}  // namespace strata::sim
