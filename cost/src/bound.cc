#include "strata/cost/bound.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "strata/cost/op_cost.h"
#include "strata/plan/write_requests.h"

namespace strata {
namespace {

double Over(double work, double rate) { return rate > 0 ? work / rate : 0; }

}  // namespace

Bandwidth PcieSharedRate(const HardwareSpec& hw) {
  double r = hw.pcie.bandwidth.bytes_per_s;
  if (hw.pcie.gpus_per_switch > 0 && hw.pcie.switch_bandwidth.bytes_per_s > 0)
    r = std::min(
        r, hw.pcie.switch_bandwidth.bytes_per_s / std::min(hw.pcie.gpus_per_switch, std::max(1, hw.gpus_per_node)));
  if (hw.pcie.host_bandwidth.bytes_per_s > 0)
    r = std::min(r, hw.pcie.host_bandwidth.bytes_per_s / std::max(1, hw.gpus_per_node));
  return {r};
}

namespace {

// One pipeline stage's resources (the whole plan without pipelining).
struct StageUse {
  double compute = 0, fwd = 0, bwd = 0, cpu_opt = 0, h2d = 0, d2h = 0, coll = 0, p2p = 0, host = 0;
  double nvme_r_bytes = 0, nvme_w_bytes = 0, nvme_r_ops = 0, nvme_w_ops = 0;
  double codec_r = 0, codec_w = 0;  // one rank's codec seconds (policy.compression), on its NVMe streams
  // Copies whose moves name ranks (stages 1-2): each rank's own bytes and
  // latencies, the busiest rank counted.
  std::vector<double> rank_h2d, rank_d2h;
};

}  // namespace

ResourceBound ComputeResourceBound(const Plan& plan, const HardwareSpec& hw) {
  const double node = std::max(1, hw.gpus_per_node);  // ranks sharing a node's NVMe, CPU and network
  // Every GPU of the node copies alike (SPMD): each gets its share of the
  // switch uplinks and the host's root ports.
  const double pcie = PcieSharedRate(hw).bytes_per_s;
  const int P = std::max(1, plan.pipeline);
  std::vector<StageUse> stages(static_cast<size_t>(P));
  for (const Op& op : plan.ops) {
    StageUse& u = stages[static_cast<size_t>(std::clamp(op.stage, 0, P - 1))];
    const double b = static_cast<double>(op.bytes.v);
    switch (op.kind) {
      case OpKind::kForward:
      case OpKind::kBackward: {
        const double t = OpGpuSeconds(plan, op, hw.gpu);
        u.compute += t;
        (op.kind == OpKind::kForward && op.phase == Phase::kForward ? u.fwd : u.bwd) += t;
        break;
      }
      case OpKind::kOptimizerStep:
        if (op.stream == Stream::kCompute)
          u.compute += OpGpuSeconds(plan, op, hw.gpu);
        else
          u.cpu_opt += Over(OpCpuWorkBytes(op, hw.cpu) * node, hw.cpu.memory_bandwidth.bytes_per_s);
        break;
      case OpKind::kCopyH2D:
      case OpKind::kCopyD2H: {
        // A pageable copy's staging pass: CPU memory work, like the
        // optimizer's (a memcpy reads and writes each byte), and on the
        // copy's own stream before its DMA, at most cpu.staging_bandwidth.
        // Its side kernels (Op::copy_bytes) follow the DMA on that stream,
        // and the host's first touch of fresh pages precedes it there.
        const bool pageable = IsPageableCopy(plan, op);
        const double stage = pageable ? hw.cpu.staging_bandwidth.bytes_per_s : 0;
        if (HasRankMoves(op)) {
          std::vector<double>& per = op.kind == OpKind::kCopyH2D ? u.rank_h2d : u.rank_d2h;
          per.resize(static_cast<size_t>(plan.data_parallel()), 0.0);
          for (int r = 0; r < plan.data_parallel(); ++r)
            if (const double br = static_cast<double>(OpBytesOnRank(op, r)); br > 0)
              per[static_cast<size_t>(r)] += Over(br, pcie) + Over(br, stage) + hw.pcie.latency.v +
                                             CopyKernelSecondsOnRank(op, r, hw.gpu) +
                                             FirstTouchSeconds(plan, op, r, hw.cpu);
        } else {
          (op.kind == OpKind::kCopyH2D ? u.h2d : u.d2h) += Over(b, pcie) + Over(b, stage) + hw.pcie.latency.v +
                                                           OpCopySeconds(op, hw.gpu) +
                                                           FirstTouchSeconds(plan, op, 0, hw.cpu);
        }
        if (pageable) u.cpu_opt += Over(kStagingTrafficPerByte * b * node, hw.cpu.memory_bandwidth.bytes_per_s);
        break;
      }
      case OpKind::kNvmeRead:
        u.nvme_r_bytes += b * op.stored * node, u.nvme_r_ops += 1;
        u.codec_r += CodecSeconds(plan, op, 0);
        break;
      case OpKind::kNvmeWrite:
        u.nvme_w_bytes += b * op.stored * node, u.nvme_w_ops += 1;
        u.codec_w += CodecSeconds(plan, op, 0);
        // Write buffering's gather into pinned memory (write_requests.h).
        if (op.coalesce)
          u.cpu_opt += Over(kStagingTrafficPerByte * node *
                                static_cast<double>(CountWrites(op, 0, plan.run.aio.block_size.v, true).staged_bytes),
                            hw.cpu.memory_bandwidth.bytes_per_s);
        break;
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce: {
        const CommGroup& g = plan.groups[static_cast<size_t>(op.group)];
        const int gn = g.size();
        if (gn <= 1 || op.bytes.v == 0) break;
        const LinkSpec link = GroupLink(g, hw);
        const double phases = op.kind == OpKind::kAllReduce ? 2 : 1;
        u.coll += Over(phases * (gn - 1) * b / gn, link.bandwidth.bytes_per_s) + link.latency.v;
        u.coll += CollectiveTailSeconds(op, hw.gpu);
        break;
      }
      case OpKind::kSend: {
        const int from = op.stage * plan.RanksPerStage();
        const LinkSpec link = PeerLink(from, plan.PeerRank(from, op.peer_stage), hw);
        u.p2p += Over(b, link.bandwidth.bytes_per_s) + link.latency.v;
        break;
      }
      case OpKind::kHook:  // the host thread's own time, one hook after another
        u.host += op.host_seconds;
        break;
      default:
        break;
    }
  }
  ResourceBound out;
  double pipeline = 0, fill = 0;  // fill: one micro batch through the stages before
  const double m = std::max(1, plan.micro_steps);
  std::vector<std::pair<const char*, double>> worst;
  auto keep = [&](const char* name, double s, bool used) {
    if (!used) return;
    for (auto& w : worst)
      if (std::string_view(w.first) == name) {
        w.second = std::max(w.second, s);
        return;
      }
    worst.push_back({name, s});
  };
  for (StageUse& u : stages) {
    if (!u.rank_h2d.empty()) u.h2d += *std::max_element(u.rank_h2d.begin(), u.rank_h2d.end());
    if (!u.rank_d2h.empty()) u.d2h += *std::max_element(u.rank_d2h.begin(), u.rank_d2h.end());
    // NVMe latency is per op of this rank: the node's ranks issue theirs side by side.
    const double rd = Over(u.nvme_r_bytes, hw.nvme.node_read().bytes_per_s);
    const double wr = Over(u.nvme_w_bytes, hw.nvme.node_write().bytes_per_s);
    const double lat_r = u.nvme_r_ops * hw.nvme.latency.v, lat_w = u.nvme_w_ops * hw.nvme.latency.v;
    keep("compute", u.compute, u.compute > 0);
    keep("cpu", u.cpu_opt, u.cpu_opt > 0);
    keep("h2d", u.h2d, u.h2d > 0);
    keep("d2h", u.d2h, u.d2h > 0);
    keep("nvme_read", rd + lat_r + u.codec_r, u.nvme_r_ops > 0);
    keep("nvme_write", wr + lat_w + u.codec_w, u.nvme_w_ops > 0);
    const double rw = hw.nvme.node_readwrite().bytes_per_s;
    if (rw > 0 && u.nvme_r_ops > 0 && u.nvme_w_ops > 0) {
      const double turns = rd + wr;
      const double together = std::max({rd, wr, (u.nvme_r_bytes + u.nvme_w_bytes) / rw});
      // Latency is each stream's (the simulator spends it apart from the
      // device), so the device's share is the transfers alone.
      keep("nvme", std::min(turns, together), true);
    }
    keep("collective", u.coll, u.coll > 0);
    keep("p2p", u.p2p, u.p2p > 0);
    keep("host", u.host, u.host > 0);
    // Stage s cannot start before one micro batch's forward has passed the
    // stages before it, nor finish before its last backward has passed them.
    pipeline = std::max(pipeline, fill + u.fwd + u.bwd);
    fill += (u.fwd + u.bwd) / m;
  }
  for (const auto& [name, s] : worst) out.resources.push_back({name, s});
  if (P > 1) out.resources.push_back({"pipeline", pipeline});
  for (const ResourceTime& r : out.resources)
    if (r.seconds > out.busiest.seconds) out.busiest = r;
  return out;
}

}  // namespace strata
