// Timing for calibration (private to executor/runtime/): a steady clock in
// seconds, and the best rate of a few runs of some work.
#pragma once

#include <algorithm>
#include <chrono>

namespace strata::exec {

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best rate of `work` units over `repeats` runs of fn.
template <typename F>
double BestRate(int repeats, double work, F&& fn) {
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = Now();
    fn();
    const double t = Now() - t0;
    if (t > 0) best = std::max(best, work / t);
  }
  return best;
}

}  // namespace strata::exec
