#include "strata/core/gpu_cost.h"

#include <algorithm>
#include <cmath>

namespace strata {

double GemmShapeEfficiency(const Gemm& g, const GpuSpec& gpu) {
  if (gpu.sms <= 0 || g.m <= 0 || g.n <= 0 || g.batch <= 0) return 1.0;
  const int64_t tm = std::max(1, gpu.tile_m), tn = std::max(1, gpu.tile_n);
  const double tiles =
      static_cast<double>(CeilDiv(g.m, tm)) * static_cast<double>(CeilDiv(g.n, tn)) * static_cast<double>(g.batch);
  const double waves = std::ceil(tiles / gpu.sms);
  const double useful = static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.batch);
  return useful / (waves * gpu.sms * static_cast<double>(tm) * static_cast<double>(tn));
}

double GemmSeconds(const Gemm& g, int elem_bytes, const GpuSpec& gpu) {
  const double rate = gpu.peak_flops.flops_per_s * gpu.efficiency * GemmShapeEfficiency(g, gpu);
  const double compute = rate > 0 ? g.flops() / rate : 0;
  const double hbm = gpu.hbm_bandwidth.bytes_per_s;
  const double memory = hbm > 0 ? g.bytes(elem_bytes) / hbm : 0;
  return std::max(compute, memory);
}

double KernelSeconds(const KernelWork& w, const GpuSpec& gpu) {
  double s = 0;
  for (const Gemm& g : w.gemms) s += GemmSeconds(g, w.elem_bytes, gpu);
  if (gpu.hbm_bandwidth.bytes_per_s > 0) s += w.mem_bytes / gpu.hbm_bandwidth.bytes_per_s;
  return s + w.launches * gpu.launch_latency.v;
}

double ComputeSeconds(double flops, const KernelWork* w, const GpuSpec& gpu) {
  if (gpu.compute_model == ComputeModel::kRoofline && w != nullptr && !w->empty()) return KernelSeconds(*w, gpu);
  const double rate = gpu.peak_flops.flops_per_s * gpu.efficiency;
  return rate > 0 ? flops / rate : 0;
}

double CpuAdamSeconds(double elements, double bytes, const CpuSpec& cpu) {
  const double bw = cpu.memory_bandwidth.bytes_per_s;
  return bw > 0 ? CpuAdamWorkBytes(elements, bytes, cpu) / bw : 0;
}

double CpuAdamWorkBytes(double elements, double bytes, const CpuSpec& cpu) {
  const double core_rate = static_cast<double>(std::max(1, cpu.cores)) * cpu.adam_core_rate;
  if (core_rate <= 0) return bytes;
  return std::max(bytes, elements / core_rate * cpu.memory_bandwidth.bytes_per_s);
}

}  // namespace strata
