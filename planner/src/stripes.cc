// BalanceStripes (stripes.h).
#include "stripes.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "strata/plan/write_requests.h"

namespace strata::detail {

void BalanceStripes(Plan& plan) {
  if (!plan.run.striped) return;
  const int drives = static_cast<int>(plan.run.nvme_dirs.size());
  const int64_t unit = plan.run.aio.block_size.v;
  // Each NVMe buffer's writes of one iteration on rank 0 (every rank's
  // alike), as (offset, bytes, stored ratio).
  struct Write {
    int64_t offset, bytes;
    double stored;
  };
  std::vector<std::vector<Write>> writes(plan.buffers.size());
  std::vector<double> total(plan.buffers.size(), 0.0);
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kNvmeWrite) continue;
    for (const Move& m : op.moves) {
      if (m.rank > 0) continue;
      writes[static_cast<size_t>(m.dst.buffer)].push_back({m.dst.offset.v, m.dst.bytes.v, op.stored});
      total[static_cast<size_t>(m.dst.buffer)] += static_cast<double>(m.dst.bytes.v) * op.stored;
    }
  }
  std::vector<size_t> order;
  for (const Buffer& b : plan.buffers)
    if (b.tier == Tier::kNvme) order.push_back(static_cast<size_t>(b.id));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return total[a] > total[b]; });
  std::vector<double> load(static_cast<size_t>(drives), 0.0);
  for (size_t b : order) {
    int best = 0;
    double best_peak = -1;
    std::vector<double> best_load;
    for (int start = 0; start < drives; ++start) {
      std::vector<double> l = load;
      for (const Write& w : writes[b]) AddStripeBytes(w.offset, w.bytes, unit, start, l, w.stored);
      // The lowest peak; among equal ones, the first unit on the least
      // loaded drive (buffers nothing writes spread too).
      const double peak = *std::max_element(l.begin(), l.end());
      if (best_peak < 0 || peak < best_peak ||
          (peak == best_peak && load[static_cast<size_t>(start)] < load[static_cast<size_t>(best)]))
        best = start, best_peak = peak, best_load = std::move(l);
    }
    plan.buffers[b].nvme_dir = best;
    load = std::move(best_load);
  }
}

}  // namespace strata::detail
