// calibrate's fits (runtime/calibrate_fit.h): ops timed one at a time
// turned into the simulator's latency and rates.
#include "runtime/calibrate_fit.h"

#include <gtest/gtest.h>

namespace strata::exec {
namespace {

TEST(CalibrateFit, LatencyAndRateFromOpsOfDifferentSizes) {
  // 10 us plus bytes at 5 GB/s.
  Points p;
  for (double b : {1e6, 4e6, 16e6}) p.emplace_back(b, 10e-6 + b / 5e9);
  const double lat = LeastSquaresIntercept(p);
  EXPECT_NEAR(lat, 10e-6, 1e-9);
  const Fit f = RateGiven(p, lat);
  EXPECT_NEAR(f.rate, 5e9, 1e3);
  // One size only: no intercept, the rate keeps the total time.
  const Points same = {{1e6, 1e-3}, {1e6, 1e-3}};
  EXPECT_EQ(LeastSquaresIntercept(same), 0);
  EXPECT_NEAR(RateGiven(same, 0).rate, 1e9, 1e-3);
  // A latency longer than the ops themselves is rejected.
  EXPECT_EQ(RateGiven(same, 2e-3).latency, 0);
}

// A pageable copy: latency, staging, then the DMA at the pinned rate.
Points Staged(double staging_rate, double copy_rate, double latency) {
  Points p;
  for (double b : {8e6, 32e6}) p.emplace_back(b, latency + b / staging_rate + b / copy_rate);
  return p;
}

TEST(CalibrateFit, StagingRateIsWhatTheDmaLeaves) {
  // Staged at 6 GB/s where the node's memory would give 9 (18 GB/s over 2
  // bytes of traffic a byte): the per-copy limit binds and is returned.
  EXPECT_NEAR(StagingRate(Staged(6e9, 14e9, 20e-6), 14e9, 20e-6, 18e9), 6e9, 1e3);
  // Staged faster than the memory bound: the simulator's memory share
  // already gives at most that, so no limit.
  EXPECT_EQ(StagingRate(Staged(12e9, 14e9, 0), 14e9, 0, 18e9), 0);
  // Copies no slower than pinned ones leave nothing to stage: no limit.
  Points pinned_like = {{8e6, 8e6 / 14e9}, {32e6, 32e6 / 14e9}};
  EXPECT_EQ(StagingRate(pinned_like, 14e9, 0, 18e9), 0);
  // No ops, or no copy rate to take out: no limit.
  EXPECT_EQ(StagingRate({}, 14e9, 0, 18e9), 0);
  EXPECT_EQ(StagingRate(Staged(6e9, 14e9, 0), 0, 0, 18e9), 0);
  // No memory bandwidth to compare with: the measured rate.
  EXPECT_NEAR(StagingRate(Staged(6e9, 14e9, 0), 14e9, 0, 0), 6e9, 1e3);
}

}  // namespace
}  // namespace strata::exec
