// Measures this machine the way the simulator models it, for `strata
// calibrate`: the rates that turn plan ops into time, measured on the
// scenario's own ops.
//
// The plan is executed with its ops one at a time (no overlap, no sharing
// between streams), and each op class's rate is its work over its time, on
// a step the optimizer applied (with fp16 the first steps are skipped for
// overflow while the loss scale comes down, and a skipped step does no Adam
// work; calibrate runs past them):
//  - gpu.peak_flops (efficiency 1): forward and backward FLOPs per second of
//    the workload's kernels on this backend, at the workload's shapes;
//  - pcie.bandwidth: H2D and D2H bytes per second (the copy engine);
//  - nvme.read_bandwidth / write_bandwidth: the plan's NVMe ops through the
//    configured engine and aio knobs;
//  - cpu.memory_bandwidth (and gpu.hbm_bandwidth): optimizer-step bytes per
//    second of the fused Adam (the simulator times steps as bytes / rate);
//  - nvlink (one node) or network (several) bandwidth: the ring's per-link
//    bytes of the plan's allgathers per second, under mpirun; what its
//    reduce-scatters and allreduces take beyond that is their reduction
//    (gpu.reduction_bandwidth: their bytes over that extra time).
// Classes the plan does not use are measured by micro-benchmarks (a 64 MiB
// copy, an 8M-parameter Adam step, 8 MiB NVMe requests over a 256 MiB file
// for about 0.5 s). Besides,
// nvme.readwrite_bandwidth is measured by reading one file and writing
// another at once: set when together they move less than 90% of the sum of
// the two directions alone, each measured the same way (one device shared by
// both), else 0.
//
// Under mpirun every rank runs the plan and measures its own ops (an op's
// time is the mean over the ranks of each rank's median), and the
// node-shared classes (NVMe, CPU optimizer) are scaled by the ranks of the
// node, which run theirs at the same time. Micro-benchmarks run on rank 0
// alone.
#pragma once

#include <functional>
#include <string>

#include "strata/core/scenario.h"
#include "strata/core/status.h"
#include "strata/executor/env.h"
#include "strata/executor/runner.h"
#include "strata/plan/plan.h"

namespace strata::exec {

struct CalibrateOptions {
  std::string nvme_dir = "/tmp/strata_nvme";
  IoEngineKind engine = IoEngineKind::kLibaio;
  size_t nvme_bytes = size_t{256} << 20;
  int repeats = 3;          // micro-benchmarks: the best of these (mixed NVMe: the median)
  int plan_repeats = 7;     // plan ops one at a time: the median per op of these runs
  int compute_threads = 1;  // as RunOptions' (the runs to be predicted use the same)
  // The backend the plan's ops run on. A device backend (cuda, emulated)
  // also measures its copies between page-locked CPU memory and the GPU
  // per direction (pcie.bandwidth: the lesser) and its fused Adam on GPU
  // memory (gpu.hbm_bandwidth), through the Backend interface
  // (calibrate_device.cc): the rates of classes the plan does not use (the
  // fits of the plan's own copies and GPU optimizer steps replace them, as
  // for the host's micro-benchmarks); its compute ops are its GEMMs and
  // kernels at the workload's shapes, its collectives NCCL's under mpirun.
  BackendKind backend = BackendKind::kHost;
  std::function<void(const std::string& what, double fraction)> progress;
};

// Returns the scenario's hardware with the measured rates filled in
// (capacities, nodes and GPUs are kept). One exception to the topology: with
// several ranks on one node, nvlink is set to the measured peer (MPI) rate,
// so the simulator routes the ring over it rather than through the copy
// engine's PCIe links, as the host backend does. REQUIRES: plan built from `s` for the
// running MPI world.
Result<HardwareSpec> Calibrate(const Scenario& s, const Plan& plan, const CalibrateOptions& o);

// The hardware section as YAML (loadable with LoadOptions::hardware_file).
std::string HardwareYaml(const HardwareSpec& hw, const std::string& comment);

}  // namespace strata::exec
