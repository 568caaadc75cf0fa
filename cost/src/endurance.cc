// NvmeWear (endurance.h): one node's NVMe writes, per drive, at a rate.
#include "strata/cost/endurance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "strata/plan/write_requests.h"

namespace strata {

double DefaultWriteAmplification(double bytes) {
  if (!(bytes > 0) || bytes >= kFullWriteBytes) return 1.0;
  // 4.5 at 4 KiB, log-linear in between: Intel rates its D5-P4320 for 4.5x
  // the writes when they are sequential rather than random 4 KiB
  // (docs/endurance.md, "Write amplification").
  return std::min(4.5, 1.0 + 0.7 * std::log2(kFullWriteBytes / bytes));
}

DriveWear NvmeWear(const Plan& plan, const NvmeSpec& nvme, double iteration_s) {
  DriveWear w;
  double bytes = 0, raw = 0, nand = 0;
  int64_t requests = 0, unbuffered = 0;
  const bool buffered = std::any_of(plan.ops.begin(), plan.ops.end(), [](const Op& op) { return op.coalesce; });
  const int ranks = std::min(plan.gpus_per_node, plan.world_size);
  for (int r = 0; r < ranks; ++r) {
    const WriteCount c = PlanWrites(plan, r, false, DefaultWriteAmplification);
    bytes += c.stored_bytes;  // compressed (Op::stored)
    raw += static_cast<double>(c.bytes);
    requests += c.requests;
    nand += c.weighted;
    if (buffered) unbuffered += PlanWrites(plan, r, true).requests;
  }
  if (bytes <= 0) return w;
  w.drives = std::max(1, nvme.drives);
  w.host_bytes = bytes / w.drives;
  w.raw_bytes = raw / w.drives;
  if (plan.run.striped) {
    // Striped (policy.stripe_paths): each drive's own bytes, the busiest
    // reported (the node's ranks share the drives).
    std::vector<double> dir(plan.run.nvme_dirs.size(), 0.0), dir_raw(dir.size(), 0.0);
    for (int r = 0; r < ranks; ++r) {
      const DirBytes b = DirWrites(plan, r);
      for (size_t d = 0; d < dir.size() && d < b.stored.size(); ++d) dir[d] += b.stored[d], dir_raw[d] += b.raw[d];
    }
    const size_t busiest = static_cast<size_t>(std::max_element(dir.begin(), dir.end()) - dir.begin());
    w.mean_host_bytes = w.host_bytes;
    w.host_bytes = dir[busiest];
    w.raw_bytes = dir_raw[busiest];
  }
  w.writes = (requests + w.drives - 1) / w.drives;
  w.mean_write_bytes = requests > 0 ? bytes / static_cast<double>(requests) : bytes;
  if (unbuffered > 0) w.unbuffered_writes = (unbuffered + w.drives - 1) / w.drives;
  // Each request amplified by its own size (a mean would hide a few small
  // writes among large ones), unless the scenario gives one factor.
  w.write_amplification = nvme.write_amplification > 0 ? nvme.write_amplification : nand / bytes;
  w.nand_bytes = w.host_bytes * w.write_amplification;
  w.rated_bytes = nvme.rated_bytes();
  w.warranty_days = nvme.warranty_years * 365.0;
  w.iteration_s = iteration_s;
  if (iteration_s > 0) {
    const double per_day = 86400.0 / iteration_s;
    const double capacity = static_cast<double>(nvme.drive_capacity().v);
    if (capacity > 0) w.dwpd = w.host_bytes * per_day / capacity;
    if (w.rated()) w.days = w.rated_bytes / (w.nand_bytes * per_day);
  }
  return w;
}

std::string WearText(const DriveWear& w) {
  if (w.drives == 0) return "no NVMe writes";
  char line[320];
  std::snprintf(line, sizeof line, "%.4g GiB written a drive an iteration (%lld writes of %.0f KiB, %.2fx in NAND)",
                w.host_bytes / (1024.0 * 1024 * 1024), static_cast<long long>(w.writes), w.mean_write_bytes / 1024,
                w.write_amplification);
  std::string out = line;
  if (w.mean_host_bytes > 0) {
    std::snprintf(line, sizeof line, " (the busiest of %d striped drives; %.4g GiB on average)", w.drives,
                  w.mean_host_bytes / (1024.0 * 1024 * 1024));
    out += line;
  }
  if (w.raw_bytes > w.host_bytes * 1.0005) {
    std::snprintf(line, sizeof line, " (compressed from %.4g GiB)", w.raw_bytes / (1024.0 * 1024 * 1024));
    out += line;
  }
  if (w.unbuffered_writes > 0) {
    std::snprintf(line, sizeof line, " (write buffering: %lld writes unbuffered)",
                  static_cast<long long>(w.unbuffered_writes));
    out += line;
  }
  if (w.iteration_s > 0) {
    std::snprintf(line, sizeof line, ", %.3g drive writes a day", w.dwpd);
    out += line;
    if (w.rated()) {
      std::snprintf(line, sizeof line, ", rated writes used up in %.0f days (warranty %.0f)", w.days, w.warranty_days);
      out += line;
    }
  }
  if (!w.rated()) out += " (drive not rated: give hardware.nvme.rated_dwpd or rated_tbw, or a model)";
  return out;
}

std::vector<std::string> WearLines(const DriveWear& w, const std::string& label, const std::string& rate) {
  if (w.drives == 0) return {};
  std::vector<std::string> lines = {"nvme wear (per drive" + label + "): " + WearText(w)};
  if (w.short_of_warranty()) {
    char line[200];
    std::snprintf(line, sizeof line, "%.0f days, under their %.3g-year warranty", w.days, w.warranty_days / 365);
    lines.push_back("warning [nvme_endurance]: " + rate + " the drives' rated writes last " + line +
                    " (docs/endurance.md)");
  }
  return lines;
}

std::vector<std::pair<std::string, double>> WearFields(const DriveWear& w) {
  const double nan = std::nan("");
  const bool rate = w.iteration_s > 0;
  return {{"nvme_drives", w.drives},
          {"nvme_host_bytes_per_drive", w.host_bytes},
          {"nvme_raw_bytes_per_drive", w.raw_bytes},
          {"nvme_writes_per_drive", static_cast<double>(w.writes)},
          {"nvme_mean_write_bytes", w.mean_write_bytes},
          {"nvme_write_amplification", w.drives > 0 ? w.write_amplification : nan},
          {"nvme_nand_bytes_per_drive", w.nand_bytes},
          {"nvme_drive_writes_per_day", rate && w.drives > 0 ? w.dwpd : nan},
          {"nvme_days_to_rated_writes", rate && w.rated() ? w.days : nan},
          {"nvme_warranty_days", w.rated() ? w.warranty_days : nan}};
}

}  // namespace strata
