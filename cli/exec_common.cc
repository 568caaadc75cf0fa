#include "exec_common.h"

#include "strata/executor/comm.h"

namespace strata::cli {

void AddEngineOption(CLI::App* cmd, std::string& engine) {
  cmd->add_option("--engine", engine, "NVMe engine: libaio, io_uring or sync")
      ->check(CLI::IsMember({"libaio", "io_uring", "sync"}));
}

void AddComputeThreadsOption(CLI::App* cmd, int& threads) {
  cmd->add_option("--compute-threads", threads,
                  "Host backend: threads of the model's large kernels (0: every core this process may use)")
      ->check(CLI::Range(0, 256));
}

void AddBackendOption(CLI::App* cmd, std::string& backend) {
  cmd->add_option("--backend", backend,
                  "host (the GPU played by the CPU), cuda (the GPUs; a clear error where there is none), or "
                  "emulated (the host backend computing the model as cuda does, its kernels emulated by host loops: "
                  "the GPU path's logic checked without a GPU; slow)")
      ->check(CLI::IsMember({"host", "cuda", "emulated"}));
}
exec::BackendKind BackendKindOf(const std::string& backend) {
  return backend == "cuda"       ? exec::BackendKind::kCuda
         : backend == "emulated" ? exec::BackendKind::kEmulated
                                 : exec::BackendKind::kHost;
}

void AddExecOptions(CLI::App* cmd, ExecArgs& a) {
  AddEngineOption(cmd, a.engine);
  cmd->add_option("--nvme-dir", a.nvme_dir,
                  "Directory for every NVMe swap file (default: offload_param's nvme_path for parameters, "
                  "offload_optimizer's for optimizer states)");
  cmd->add_flag("--sequential", a.sequential,
                "Run the ops one at a time in plan order (no overlap; how calibrate measures)");
  AddComputeThreadsOption(cmd, a.compute_threads);
  cmd->add_option("--adam-threads", a.adam_threads,
                  "Threads of a CPU optimizer step (offload_optimizer cpu/nvme; 0: 1 on the host backend, every usable "
                  "core on cuda, as DeepSpeedCPUAdam; the weights are the same bits whatever the count)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-swap-checksums", a.no_swap_checksums,
                "Do not checksum NVMe swap writes (XXH3, checked on every read; docs/executor.md gives the cost)");
  AddBackendOption(cmd, a.backend);
  cmd->add_flag("--keep-swap-files", a.keep_swap_files,
                "Leave the swap files (NVME_DIR/strata-rankR.run-PID) after the run instead of removing them");
  cmd->add_option("--collective-timeout", a.collective_timeout,
                  "Seconds a rank waits in a collective or transfer before it ends the job, naming the op (under "
                  "mpirun; 0: forever; default 1800, torch.distributed's default process-group timeout)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--seed", a.seed,
                  "Seed of the training data and the initial weights: the same seed, plan and steps give the same "
                  "weights digest")
      ->capture_default_str();
}

std::vector<std::pair<std::string, std::string>> MpiWorldOverrides() {
  const int n = exec::Comm::World().size();
  if (n <= 1) return {};
  return {{"hardware.nodes", "1"}, {"hardware.gpus_per_node", std::to_string(n)}};
}

Result<exec::RunOptions> RunOptionsFrom(const ExecArgs& a) {
  STRATA_ASSIGN_OR_RETURN(auto engine, exec::ParseIoEngineKind(a.engine));
  exec::RunOptions o;
  o.steps = a.steps;
  o.engine = engine;
  o.nvme_dir = a.nvme_dir;
  o.parallel = !a.sequential;
  o.compute_threads = a.compute_threads;
  o.adam_threads = a.adam_threads;
  o.swap_checksums = !a.no_swap_checksums;
  o.keep_swap_files = a.keep_swap_files;
  o.backend_kind = BackendKindOf(a.backend);
  o.collective_timeout_s = a.collective_timeout;
  o.seed = a.seed;
  return o;
}

}  // namespace strata::cli
