// Runs a plan for real on a backend (backend.h). The host backend's
// device memory is host memory
// capped at the plan's GPU capacity (hardware.gpu.memory less
// reserved_memory), CPU memory capped at hardware.cpu.memory,
// NVMe buffers are preallocated files under nvme_path moved by the chosen
// engine; compute is the workload (an MLP on synthetic data, or a GPT on
// the bytes of a text) on the CPU, the optimizer the fused CPU Adam; ranks
// are MPI processes (world size 1 without mpirun).
//
// Each stream has a worker thread that runs its ops in list order once their
// dependencies are done, so transfers overlap compute as the plan allows;
// results do not depend on the interleaving (the plan orders every data
// dependency), and `parallel = false` runs ops one at a time in list order.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/executor/backend.h"
#include "strata/executor/env.h"
#include "strata/plan/plan.h"
#include "strata/timeline/timeline.h"

namespace strata::exec {

struct RunResult;

// The backend RunTraining makes when RunOptions::backend is null: the host
// backend, or the CUDA backend (NewCudaBackend: an error where there is no
// device or the build has none), or the host backend computing the model
// as the CUDA backend does, on host loops that emulate its kernels
// (devmodel/: the device model's logic checked without a GPU; slow).
enum class BackendKind { kHost, kCuda, kEmulated };

struct RunOptions {
  int steps = 1;
  IoEngineKind engine = IoEngineKind::kLibaio;
  Env* env = nullptr;          // default: PosixEnv()
  Backend* backend = nullptr;  // default: a backend of `backend_kind`, over the plan's data-parallel group
  BackendKind backend_kind = BackendKind::kHost;
  // The directory of every NVMe swap file, in place of the plan's
  // (RunSpec::nvme_dirs: offload_param's nvme_path for parameters,
  // offload_optimizer's for optimizer states); created if missing.
  std::string nvme_dir;
  uint64_t seed = 1234;  // data and initial weights
  // Threads of a CPU optimizer step (offload_optimizer cpu or nvme). 0: the
  // backend's default: 1 on the host backend (its streams already share
  // few cores), the cores this process may use on the CUDA backend (as
  // DeepSpeedCPUAdam's OpenMP loop takes them). The bits do not depend on it.
  int adam_threads = 0;
  int copy_threads = 2;  // copy-engine threads per large host copy
  // Threads of the model's large kernels (0: the cores this process may
  // use). 1 by default: on a machine with few cores the streams' threads
  // (copies, NVMe completions, the optimizer) already share them, and on
  // this 2-core VM two compute threads made the overlapped mlp-copy step no
  // faster while its compute alone ran twice as fast.
  int compute_threads = 1;
  bool parallel = true;  // one worker per stream
  // Checksums of every NVMe swap write, checked on every read (XXH3-64;
  // swap_checksums.h): a swap file changed under the run is an I/O error
  // naming it instead of training on its bytes. Its cost is measured in
  // docs/executor.md (bench/nvme_bench).
  bool swap_checksums = true;
  // RunResult::timeline is of the step with the median iteration time (the
  // first step, a warm-up, left out) instead of the last step; among the
  // steps the optimizer applied when there are any (a step skipped for fp16
  // overflow does no Adam work, so it is not a typical iteration). Under
  // mpirun a step's time is its slowest rank's, and every rank takes the
  // same step.
  bool median_timeline = false;
  // Called before each step, outside its clock (a benchmark measures the
  // device between steps with it); an error stops the run.
  std::function<Status(int step)> before_step;
  // Called after each step with the results so far (its loss is the last
  // of r.losses), outside its clock: `strata run` streams the losses with
  // it. An error stops the run.
  std::function<Status(int step, const RunResult& r)> after_step;
  // Leave the swap files (DIR/strata-rankR.run-PID in each swap directory)
  // after the run;
  // by default the run's directory is removed when it ends, whatever way.
  bool keep_swap_files = false;
  // Checkpoints (checkpoint.h; DeepSpeed's layout): every `save_every`
  // steps (0: never) into `checkpoint_dir`; with `resume_dir`, the run
  // starts from that directory's latest checkpoint and `steps` counts the
  // steps before it too, so it ends where an uninterrupted run would, with
  // the same weights.
  int save_every = 0;
  std::string checkpoint_dir, resume_dir;
  // Under mpirun, a rank that waits longer than this in a collective or a
  // transfer ends the job, naming itself and the op (Comm::SetTimeout;
  // 0: forever). torch.distributed's default_pg_timeout.
  double collective_timeout_s = 1800;
  // A run that saves into a directory holding checkpoints it does not
  // resume from is refused, unless `overwrite_checkpoints`: those are then
  // removed before the run starts.
  bool overwrite_checkpoints = false;
  // After each save keep the newest `keep_last` checkpoints (0: all, as
  // DeepSpeed's save_checkpoint does).
  int keep_last = 0;
  // Test failpoint: the n-th save (from 1) kills the process (SIGKILL)
  // after the rank files are written, before they are published.
  int kill_in_save = 0;
  // GPT workload: byte-level tokens of this text.
  std::string text_path = "/usr/share/common-licenses/GPL-3";
};

struct RunResult {
  // Per step from the first (with a resumed run's earlier steps, whose
  // step_time_s is 0).
  std::vector<double> losses;          // per step (mean over micro steps)
  std::vector<double> loss_scale;      // per step
  double iteration_time_s = 0;         // mean over the steps after the first (a warm-up); the step itself when only one
  std::vector<double> step_time_s;     // per step
  Bytes bytes_moved[kNumLinkClasses];  // per LinkClass, over all steps
  Bytes peak[kNumTiers];               // gpu per rank; cpu, nvme per node
  // The NVMe write requests the plan's write ops submitted, over all steps,
  // as the engine cuts them (aio.block_size; write_requests.h).
  int64_t nvme_write_requests = 0;
  // Under compression (policy.compression): the bytes the NVMe writes
  // gave the codec, and what went to the swap files for them, over the
  // run (0 without).
  uint64_t nvme_raw_written = 0, nvme_stored_written = 0;
  // Bytes read back from NVMe swap files whose checksum was checked, and
  // the rest (reads of part of a written region; swap_checksums.h).
  uint64_t swap_verified_bytes = 0, swap_unverified_bytes = 0;
  std::string weights_digest;  // SHA-256 of the fp32 master weights, group order
  int skipped_steps = 0;       // steps the optimizer skipped for fp16 overflow (delayed: of the pending gradients)
  // Per step: the optimizer did not update (fp16 overflow; under a delayed
  // update, also the warm-up's last step, which only keeps its gradients,
  // and a step whose pending gradients overflowed).
  std::vector<bool> step_skipped;
  // Overlap: a stream runs one op at a time, so no iteration is shorter than
  // its busiest stream (compute, or the bytes of one link class at the rate
  // that link achieved); when reads and writes share the NVMe device
  // (hardware.nvme.readwrite_bandwidth), nor than the device's busy time
  // (the union of both directions' spans). Mean over steps. The rates are
  // those achieved in the run, contention included: the bound at measured
  // rates is ComputeResourceBound (cost/bound.h) with a calibrated
  // hardware section, which `strata run` prints beside it.
  double busiest_as_run_s = 0;
  int first_step = 0;                    // steps before this run (from the resumed checkpoint)
  std::string resumed_from;              // that checkpoint's directory, or ""
  std::vector<std::string> checkpoints;  // directories saved, in order
  // Of the last step (see median_timeline). Under mpirun it holds every
  // rank's spans of that step, gathered (so every rank's result has them);
  // on one host at their offsets on the one clock, so the timeline shows how
  // far apart the ranks ran (Runner::GatherSpans).
  Timeline timeline;
  int timeline_step = 0;  // which step the timeline is of
};

// Runs `plan` as its run record says (Plan::run: the model, precision, aio
// and swap directories). REQUIRES: its world size is the MPI world's.
Result<RunResult> RunTraining(const Plan& plan, const RunOptions& options);

}  // namespace strata::exec
