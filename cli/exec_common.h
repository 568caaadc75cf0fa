// Shared pieces of the commands that execute for real (run, validate,
// calibrate); private to the CLI, kept out of commands.h so that the other
// commands do not include the executor.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "strata/executor/runner.h"

namespace strata::cli {

// Arguments of the commands that run the plan (run, validate).
struct ExecArgs : CommonArgs {
  int steps = 3;
  std::string engine = "libaio", nvme_dir;
  bool sequential = false;
  int compute_threads = 1;
  int adam_threads = 0;  // --adam-threads (0: the backend's default)
  bool no_swap_checksums = false, keep_swap_files = false;
  std::string backend = "host";
  double collective_timeout = exec::RunOptions{}.collective_timeout_s;
  uint64_t seed = exec::RunOptions{}.seed;  // --seed
};

// --engine libaio|io_uring|sync.
void AddEngineOption(CLI::App* cmd, std::string& engine);
// --compute-threads: the host backend's threads for the model's large
// kernels (calibrate must use the run's).
void AddComputeThreadsOption(CLI::App* cmd, int& threads);
// --backend host|cuda|emulated (run, validate, calibrate).
void AddBackendOption(CLI::App* cmd, std::string& backend);
exec::BackendKind BackendKindOf(const std::string& backend);
// --engine, --nvme-dir (swap files), --sequential and --compute-threads of
// run and validate.
void AddExecOptions(CLI::App* cmd, ExecArgs& a);
// Under mpirun the ranks are the plan's world: overrides that plan for one
// node of world-size GPUs (none for a single rank).
std::vector<std::pair<std::string, std::string>> MpiWorldOverrides();
// The executor's options from the command line (steps, engine, nvme dir).
Result<exec::RunOptions> RunOptionsFrom(const ExecArgs& a);

}  // namespace strata::cli
