// strata calibrate: measure this machine the way the simulator models it and
// write a hardware section (use it with --hardware FILE).
#include <iostream>
#include <memory>

#include "commands.h"
#include "exec_common.h"
#include "strata/executor/calibrate.h"
#include "strata/executor/comm.h"

namespace strata::cli {
namespace {

struct CalibrateArgs : CommonArgs {
  std::string engine = "libaio", nvme_dir, backend = "host";
  int compute_threads = 1;
};

}  // namespace

Runner AddCalibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand("calibrate",
                                 "Measure the scenario's compute, copy, NVMe, CPU Adam and MPI "
                                 "rates here (its plan's ops one at a time, plus micro-benchmarks); write a "
                                 "hardware section for --hardware");
  AddCommon(cmd, *a, "Write the hardware YAML to FILE instead of stdout");
  AddEngineOption(cmd, a->engine);
  cmd->add_option("--nvme-dir", a->nvme_dir, "Directory to measure NVMe in (default: the scenario's nvme_path)");
  AddComputeThreadsOption(cmd, a->compute_threads);
  AddBackendOption(cmd, a->backend);
  return [a]() {
    auto planned = LoadAndPlan(*a, MpiWorldOverrides());
    if (!planned.ok()) return Fail(planned.status());
    const Scenario* s = &planned->scenario;
    exec::CalibrateOptions o;
    auto engine = exec::ParseIoEngineKind(a->engine);
    if (!engine.ok()) return Fail(engine.status());
    o.engine = *engine;
    o.compute_threads = a->compute_threads;
    o.backend = BackendKindOf(a->backend);
    o.nvme_dir = !a->nvme_dir.empty()                           ? a->nvme_dir
                 : !s->zero.offload_param.nvme_path.empty()     ? s->zero.offload_param.nvme_path
                 : !s->zero.offload_optimizer.nvme_path.empty() ? s->zero.offload_optimizer.nvme_path
                                                                : "/tmp/strata_nvme";
    const bool root = exec::Comm::World().rank() == 0;
    o.progress = [root](const std::string& what, double f) {
      if (root) std::cerr << "calibrating: " << static_cast<int>(f * 100) << "% " << what << "\n";
    };
    auto hw = exec::Calibrate(*s, planned->plan, o);
    if (!hw.ok()) return Fail(hw.status());
    if (!root) return 0;
    return Emit(
        *a, exec::HardwareYaml(*hw, "measured by strata calibrate on this machine for scenario " + s->name +
                                        " (backend " + a->backend + ", engine " + a->engine + ", " + o.nvme_dir + ")"));
  };
}

}  // namespace strata::cli
