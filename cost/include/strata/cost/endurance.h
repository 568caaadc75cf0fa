// SSD wear of a plan (docs/endurance.md): per drive of a node, the host
// bytes one iteration writes, the NAND bytes they become, the drive writes
// per day at an iteration rate, and the days until the drive's rated
// writes are used up. The plan's NVMe writes of one node's ranks are
// striped evenly over its drives (hardware.nvme.drives, RAID-0).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/plan/plan.h"

namespace strata {

struct DriveWear {
  int drives = 0;                  // per node; 0: the plan writes nothing to NVMe
  double host_bytes = 0;           // per drive and iteration
  // Before compression (policy.compression; host_bytes is after it).
  double raw_bytes = 0;
  // Striped (policy.stripe_paths): host_bytes is the busiest drive's, this
  // the mean over the drives; 0 otherwise (the node's writes spread evenly).
  double mean_host_bytes = 0;
  int64_t writes = 0;              // write requests per drive and iteration
  double mean_write_bytes = 0;     // of one request (write_requests.h: at most aio.block_size)
  // Under write buffering (policy.write_buffer): the requests the same
  // bytes would make unbuffered, a move at a time; 0 without it.
  int64_t unbuffered_writes = 0;
  double write_amplification = 1;  // hardware.nvme.write_amplification, or each request's by its size
  double nand_bytes = 0;           // host_bytes x write_amplification
  double iteration_s = 0;          // the rate it is read at (0: none given)
  double dwpd = 0;                 // host drive writes per day at that rate
  double rated_bytes = 0;          // one drive's rated writes over its warranty (0: not rated)
  double warranty_days = 0;
  double days = std::numeric_limits<double>::infinity();  // until rated_bytes of NAND writes
  bool rated() const { return rated_bytes > 0; }
  // Rated, written to, and worn out before its warranty ends.
  bool short_of_warranty() const { return rated() && iteration_s > 0 && days < warranty_days; }
};

// The write amplification of writes of `bytes` each when the scenario does
// not give one: 1 at or above kFullWriteBytes, rising as writes shrink
// (docs/endurance.md, "Write amplification").
double DefaultWriteAmplification(double bytes);
inline constexpr double kFullWriteBytes = 128.0 * 1024;

// The wear of one node's drives from `plan`'s NVMe writes, at one iteration
// every `iteration_s` seconds (0: bytes only, no rate).
DriveWear NvmeWear(const Plan& plan, const NvmeSpec& nvme, double iteration_s);

// "nvme: 218.0 GiB a drive an iteration (1.00 NAND), 20.4 drive writes a
// day, rated life 95 days of its 5-year warranty": one line for reports.
std::string WearText(const DriveWear& w);

// A report's lines of the wear (none without NVMe writes): "nvme wear
// (per drive<label>): <WearText>", then "warning [nvme_endurance]: ..."
// when, read `rate` ("at the simulated rate"), the drives' rated writes run
// out within their warranty.
std::vector<std::string> WearLines(const DriveWear& w, const std::string& label, const std::string& rate);

// The report's fields, in order, for JSON and CSV (sweep, tune): name and
// value; a rate-dependent field is NaN without a rate, a rating-dependent
// one without a rating (JSON null, CSV empty).
std::vector<std::pair<std::string, double>> WearFields(const DriveWear& w);

}  // namespace strata
