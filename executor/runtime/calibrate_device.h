// A device backend's own rates for `strata calibrate --backend cuda`
// (private to calibrate.cc): measured through the Backend interface only.
#pragma once

#include <functional>
#include <string>

#include "strata/core/scenario.h"
#include "strata/executor/calibrate.h"
#include "strata/executor/comm.h"

namespace strata::exec {

// On a one-rank communicator `self` (no collectives): pcie.bandwidth, the
// lesser of the H2D and D2H rates of 64 MiB copies between page-locked CPU
// memory and the GPU (the best of o.repeats, each direction alone), and
// gpu.hbm_bandwidth, the fused Adam's bytes (28 + the copy-out's per
// parameter, as the host's calibration counts them) per second over 8M parameters in GPU
// memory. `report` gets a line naming the figures.
Status DeviceMicroBenchmarks(const Scenario& s, const CalibrateOptions& o, Comm* self, HardwareSpec& hw,
                             const std::function<void(const std::string&)>& report);

}  // namespace strata::exec
