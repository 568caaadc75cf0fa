#include "strata/scheduler/op_cost.h"

namespace strata {

double OpGpuSeconds(const Plan& plan, const Op& op, const GpuSpec& gpu) {
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kBackward: {
      const KernelWork* w = nullptr;
      if (op.module >= 0 && op.module < static_cast<int>(plan.modules.size())) {
        const PlanModule& m = plan.modules[static_cast<size_t>(op.module)];
        w = op.kind == OpKind::kForward ? &m.fwd : &m.bwd;
      }
      return ComputeSeconds(op.flops, w, gpu);
    }
    case OpKind::kOptimizerStep: {
      if (op.stream != Stream::kCompute) return 0;
      const double hbm = gpu.hbm_bandwidth.bytes_per_s;
      const double launch = gpu.compute_model == ComputeModel::kRoofline ? gpu.launch_latency.v : 0;
      return (hbm > 0 ? static_cast<double>(op.bytes.v) / hbm : 0) + launch;
    }
    default: return 0;
  }
}

double OpCpuWorkBytes(const Op& op, const CpuSpec& cpu) {
  return CpuAdamWorkBytes(static_cast<double>(op.elements.v), static_cast<double>(op.bytes.v), cpu);
}

}  // namespace strata
