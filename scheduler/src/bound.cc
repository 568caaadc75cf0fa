#include "strata/scheduler/bound.h"

#include "strata/scheduler/op_cost.h"

#include <algorithm>
#include <vector>

namespace strata {
namespace {

double Over(double work, double rate) { return rate > 0 ? work / rate : 0; }

}  // namespace

Bandwidth PcieSharedRate(const HardwareSpec& hw) {
  double r = hw.pcie.bandwidth.bytes_per_s;
  if (hw.pcie.gpus_per_switch > 0 && hw.pcie.switch_bandwidth.bytes_per_s > 0)
    r = std::min(r, hw.pcie.switch_bandwidth.bytes_per_s / std::min(hw.pcie.gpus_per_switch, std::max(1, hw.gpus_per_node)));
  if (hw.pcie.host_bandwidth.bytes_per_s > 0) r = std::min(r, hw.pcie.host_bandwidth.bytes_per_s / std::max(1, hw.gpus_per_node));
  return {r};
}

ResourceBound ComputeResourceBound(const Plan& plan, const HardwareSpec& hw) {
  const double node = std::max(1, hw.gpus_per_node);  // ranks sharing a node's NVMe, CPU and network
  // Every GPU of the node copies alike (SPMD): each gets its share of the
  // switch uplinks and the host's root ports.
  const double pcie = PcieSharedRate(hw).bytes_per_s;
  double compute = 0, cpu_opt = 0, h2d = 0, d2h = 0, coll = 0;
  double nvme_r_bytes = 0, nvme_w_bytes = 0, nvme_r_ops = 0, nvme_w_ops = 0;
  // Copies whose moves name ranks (stages 1-2): each rank's own bytes and
  // latencies, the busiest rank counted.
  std::vector<double> rank_h2d, rank_d2h;
  for (const Op& op : plan.ops) {
    const double b = static_cast<double>(op.bytes.v);
    switch (op.kind) {
      case OpKind::kForward:
      case OpKind::kBackward:
        compute += OpGpuSeconds(plan, op, hw.gpu);
        break;
      case OpKind::kOptimizerStep:
        if (op.stream == Stream::kCompute) compute += OpGpuSeconds(plan, op, hw.gpu);
        else cpu_opt += Over(OpCpuWorkBytes(op, hw.cpu) * node, hw.cpu.memory_bandwidth.bytes_per_s);
        break;
      case OpKind::kCopyH2D:
      case OpKind::kCopyD2H:
        if (HasRankMoves(op)) {
          std::vector<double>& per = op.kind == OpKind::kCopyH2D ? rank_h2d : rank_d2h;
          per.resize(static_cast<size_t>(plan.data_parallel()), 0.0);
          for (int r = 0; r < plan.data_parallel(); ++r)
            if (const double br = static_cast<double>(OpBytesOnRank(op, r)); br > 0)
              per[static_cast<size_t>(r)] += Over(br, pcie) + hw.pcie.latency.v;
        } else {
          (op.kind == OpKind::kCopyH2D ? h2d : d2h) += Over(b, pcie) + hw.pcie.latency.v;
        }
        // A pageable copy's staging pass: CPU memory work, like the optimizer's.
        if (IsPageableCopy(plan, op)) cpu_opt += Over(b * node, hw.cpu.memory_bandwidth.bytes_per_s);
        break;
      case OpKind::kNvmeRead: nvme_r_bytes += b * node, nvme_r_ops += 1; break;
      case OpKind::kNvmeWrite: nvme_w_bytes += b * node, nvme_w_ops += 1; break;
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce: {
        const CommGroup& g = plan.groups[static_cast<size_t>(op.group)];
        const int gn = g.size();
        if (gn <= 1 || op.bytes.v == 0) break;
        const LinkSpec link = GroupLink(g, hw);
        const double phases = op.kind == OpKind::kAllReduce ? 2 : 1;
        coll += Over(phases * (gn - 1) * b / gn, link.bandwidth.bytes_per_s) + link.latency.v;
        if (op.kind != OpKind::kAllGather) coll += Over(b, hw.gpu.reduction_bandwidth.bytes_per_s);
        break;
      }
      default: break;
    }
  }
  if (!rank_h2d.empty()) h2d += *std::max_element(rank_h2d.begin(), rank_h2d.end());
  if (!rank_d2h.empty()) d2h += *std::max_element(rank_d2h.begin(), rank_d2h.end());
  // NVMe latency is per op of this rank: the node's ranks issue theirs side by side.
  const double rd = Over(nvme_r_bytes, hw.nvme.node_read().bytes_per_s);
  const double wr = Over(nvme_w_bytes, hw.nvme.node_write().bytes_per_s);
  const double lat_r = nvme_r_ops * hw.nvme.latency.v, lat_w = nvme_w_ops * hw.nvme.latency.v;
  ResourceBound out;
  auto add = [&](const char* name, double s, bool used) {
    if (used) out.resources.push_back({name, s});
  };
  add("compute", compute, compute > 0);
  add("cpu", cpu_opt, cpu_opt > 0);
  add("h2d", h2d, h2d > 0);
  add("d2h", d2h, d2h > 0);
  add("nvme_read", rd + lat_r, nvme_r_ops > 0);
  add("nvme_write", wr + lat_w, nvme_w_ops > 0);
  const double rw = hw.nvme.node_readwrite().bytes_per_s;
  if (rw > 0 && nvme_r_ops > 0 && nvme_w_ops > 0) {
    const double turns = rd + wr;
    const double together = std::max({rd, wr, (nvme_r_bytes + nvme_w_bytes) / rw});
    // Latency is each stream's (the simulator spends it apart from the
    // device), so the device's share is the transfers alone.
    add("nvme", std::min(turns, together), true);
  }
  add("collective", coll, coll > 0);
  for (const ResourceTime& r : out.resources)
    if (r.seconds > out.busiest.seconds) out.busiest = r;
  return out;
}

}  // namespace strata
