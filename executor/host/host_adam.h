// The optimizer step of DeviceStream::AdamStep on host memory (private to
// the executor's backends): what the host backend's stream does, and what
// the CUDA backend's CPU optimizer stream does (DeepSpeedCPUAdam's step on
// the CPU partition).
#pragma once

#include <vector>

#include "strata/executor/backend.h"

namespace strata::exec {

// A 16-bit gradient is widened into `widened` first (reused between calls);
// CpuAdamStep on `threads` threads (cpu_adam.h: the scalar reference's bits
// for any count); the new weights go to `out` in the precision (a copy of
// the master for fp32).
void HostAdamStep(const AdamArgs& a, const AdamStepConsts& c, int threads, std::vector<float>& widened);

}  // namespace strata::exec
