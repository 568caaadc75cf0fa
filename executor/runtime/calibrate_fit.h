// How calibrate turns the plan's ops, timed one at a time, into the
// simulator's rates (private to executor/runtime/; pure functions, tested in
// tests/executor/calibrate_fit_test.cc).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "strata/cost/op_cost.h"

namespace strata::exec {

// (work, seconds) of each op of a class.
using Points = std::vector<std::pair<double, double>>;

// A class's ops as a fixed latency plus bytes over a rate: the least-squares
// intercept when the ops have different sizes and it comes out positive,
// else 0. The rate then keeps the class's total time: n * latency +
// bytes / rate = seconds.
struct Fit {
  double latency = 0, rate = 0;
};

inline double LeastSquaresIntercept(const Points& p) {
  if (p.size() < 2) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : p) sx += x, sy += y, sxx += x * x, sxy += x * y;
  const double n = static_cast<double>(p.size()), den = n * sxx - sx * sx;
  if (den <= 1e-9 * n * sxx) return 0;  // one size only
  const double slope = (n * sxy - sx * sy) / den;
  return slope > 0 ? std::max(0.0, (sy - slope * sx) / n) : 0;
}

inline Fit RateGiven(const Points& p, double latency) {
  double bytes = 0, secs = 0;
  for (auto [x, y] : p) bytes += x, secs += y;
  const double transfer = secs - latency * static_cast<double>(p.size());
  if (bytes <= 0 || transfer <= 0) return {0, secs > 0 ? bytes / secs : 0};
  return {latency, bytes / transfer};
}

// cpu.staging_bandwidth from pageable copies (bytes, seconds) that each
// stage their bytes and then move them as a pinned copy does: the
// simulator runs a pageable copy as its latency, a staging pass, then the
// DMA at `copy_rate` (the pinned copies' fitted rate), so what is left of
// each op after the latency and the DMA is its staging. The staging pass
// is also bound by the node's memory (kStagingTrafficPerByte bytes of
// traffic a byte at `memory_bandwidth`), so a per-copy limit is returned
// only where it is the tighter one; 0 (no limit) where the staging ran at
// least that fast, or where nothing is left of the ops once the DMA is
// taken out.
inline double StagingRate(const Points& staged, double copy_rate, double copy_latency, double memory_bandwidth) {
  if (staged.empty() || copy_rate <= 0) return 0;
  double bytes = 0, secs = 0;
  for (auto [x, y] : staged) bytes += x, secs += y - copy_latency - x / copy_rate;
  if (bytes <= 0 || secs <= 0) return 0;
  const double rate = bytes / secs;
  const double memory_bound = memory_bandwidth > 0 ? memory_bandwidth / kStagingTrafficPerByte : 0;
  return memory_bound <= 0 || rate < memory_bound ? rate : 0;
}

}  // namespace strata::exec
