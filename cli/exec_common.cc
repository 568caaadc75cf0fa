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

void AddExecOptions(CLI::App* cmd, ExecArgs& a) {
  AddEngineOption(cmd, a.engine);
  cmd->add_option("--nvme-dir", a.nvme_dir, "Directory for NVMe swap files (default: the scenario's nvme_path)");
  cmd->add_flag("--sequential", a.sequential, "Run the ops one at a time in plan order (no overlap; how calibrate measures)");
  AddComputeThreadsOption(cmd, a.compute_threads);
}

std::vector<std::pair<std::string, std::string>> MpiWorldOverrides() {
  const int n = exec::Comm::World().size();
  if (n <= 1) return {};
  return {{"hardware.nodes", "1"}, {"hardware.gpus_per_node", std::to_string(n)}};
}

Result<exec::RunOptions> RunOptionsFrom(const ExecArgs& a) {
  auto engine = exec::ParseIoEngineKind(a.engine);
  if (!engine.ok()) return engine.status();
  exec::RunOptions o;
  o.steps = a.steps;
  o.engine = *engine;
  o.nvme_dir = a.nvme_dir;
  o.parallel = !a.sequential;
  o.compute_threads = a.compute_threads;
  return o;
}

}  // namespace strata::cli
