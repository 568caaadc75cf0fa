// Measures this machine the way the simulator models it, for `strata
// calibrate`: the rates that turn plan ops into time.
//  - gpu.peak_flops: the workload's GEMM rate (Linear forward at the
//    scenario's largest module shape) on this host "device";
//  - gpu.hbm_bandwidth and cpu.memory_bandwidth: the fused Adam's bytes per
//    second (the simulator times optimizer steps as bytes over these);
//  - pcie.bandwidth (and nvlink): the copy engine;
//  - nvme.read_bandwidth / write_bandwidth: the configured engine and aio
//    knobs on files under the NVMe directory;
//  - network.bandwidth: MPI allgather when several ranks run.
#pragma once

#include <functional>
#include <string>

#include "strata/core/scenario.h"
#include "strata/core/status.h"
#include "strata/executor/env.h"

namespace strata::exec {

struct CalibrateOptions {
  std::string nvme_dir = "/tmp/strata_nvme";
  IoEngineKind engine = IoEngineKind::kLibaio;
  size_t nvme_bytes = size_t{256} << 20;
  int repeats = 3;  // the best of these, per measurement
  std::function<void(const std::string& what, double fraction)> progress;
};

// Returns `hw` with the measured rates filled in (capacities and topology
// are kept).
Result<HardwareSpec> Calibrate(const Scenario& s, const CalibrateOptions& o);

// The hardware section as YAML (loadable with LoadOptions::hardware_file).
std::string HardwareYaml(const HardwareSpec& hw, const std::string& comment);

}  // namespace strata::exec
