#include "strata/cost/op_cost.h"

#include <algorithm>

#include "strata/core/codec_profile.h"

namespace strata {
namespace {

// Bytes of memory-bound GPU work at HBM bandwidth (0 without one).
double HbmSeconds(int64_t bytes, const GpuSpec& gpu) {
  const double hbm = gpu.hbm_bandwidth.bytes_per_s;
  return hbm > 0 ? static_cast<double>(bytes) / hbm : 0;
}

}  // namespace

double OpGpuSeconds(const Plan& plan, const Op& op, const GpuSpec& gpu) {
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kBackward: {
      const KernelWork* w = nullptr;
      if (op.module >= 0 && op.module < static_cast<int>(plan.modules.size())) {
        const PlanModule& m = plan.modules[static_cast<size_t>(op.module)];
        w = op.kind == OpKind::kForward ? &m.fwd : &m.bwd;
      }
      return ComputeSeconds(op.flops, w, gpu) + OpCopySeconds(op, gpu);
    }
    case OpKind::kOptimizerStep: {
      if (op.stream != Stream::kCompute) return 0;
      const double launch = gpu.compute_model == ComputeModel::kRoofline ? gpu.launch_latency.v : 0;
      return HbmSeconds(op.bytes.v, gpu) + launch;
    }
    default:
      return 0;
  }
}

double OpCopySeconds(const Op& op, const GpuSpec& gpu) { return HbmSeconds(op.copy_bytes.v, gpu); }

double CopyKernelSecondsOnRank(const Op& op, int rank, const GpuSpec& gpu) {
  const double s = OpCopySeconds(op, gpu);
  if (s <= 0 || !HasRankMoves(op)) return s;
  return op.bytes.v > 0 ? s * static_cast<double>(OpBytesOnRank(op, rank)) / static_cast<double>(op.bytes.v) : 0;
}

double CollectiveTailSeconds(const Op& op, const GpuSpec& gpu) {
  const double rate = gpu.reduction_bandwidth.bytes_per_s;
  double s = OpCopySeconds(op, gpu);
  if (rate > 0 && (op.kind == OpKind::kReduceScatter || op.kind == OpKind::kAllReduce))
    s += static_cast<double>(op.bytes.v) / rate;
  return s;
}

LinkSpec GroupLink(const CommGroup& group, const HardwareSpec& hw) {
  const int gpn = std::max(1, hw.gpus_per_node);
  if (group.ranks.back() / gpn != group.ranks.front() / gpn)
    return {Bandwidth{hw.node_network().bytes_per_s / std::min(group.stride(), gpn)}, hw.network.latency};
  return hw.nvlink.bandwidth.bytes_per_s > 0 ? hw.nvlink : static_cast<const LinkSpec&>(hw.pcie);
}

LinkSpec PeerLink(int from, int to, const HardwareSpec& hw) {
  const int gpn = std::max(1, hw.gpus_per_node);
  if (from / gpn != to / gpn) return {Bandwidth{hw.node_network().bytes_per_s / gpn}, hw.network.latency};
  return hw.nvlink.bandwidth.bytes_per_s > 0 ? hw.nvlink : static_cast<const LinkSpec&>(hw.pcie);
}

double FirstTouchSeconds(const Plan& plan, const Op& op, int rank, const CpuSpec& cpu) {
  if (cpu.page_fault_time.v <= 0) return 0;
  const int64_t b = FreshPageBytes(plan, op, rank);
  return static_cast<double>((b + kHostPageBytes - 1) / kHostPageBytes) * cpu.page_fault_time.v;
}

double CodecSeconds(const Plan& plan, const Op& op, int rank) {
  const CompressionConfig& c = plan.run.compression;
  if (c.codec == CodecKind::kNone || (op.kind != OpKind::kNvmeWrite && op.kind != OpKind::kNvmeRead)) return 0;
  const CodecProfile& p = ProfileOf(c.codec);
  const double rate = op.kind == OpKind::kNvmeWrite ? p.compress_bytes_per_s : p.decompress_bytes_per_s;
  return rate > 0 ? static_cast<double>(OpBytesOnRank(op, rank)) / (rate * std::max(1, c.threads)) : 0;
}

double OpCpuWorkBytes(const Op& op, const CpuSpec& cpu) {
  return CpuAdamWorkBytes(static_cast<double>(op.elements.v), static_cast<double>(op.bytes.v), cpu);
}

}  // namespace strata
