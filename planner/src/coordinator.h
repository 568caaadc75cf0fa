// What DeepSpeed's two parameter coordinators share (private to the
// planner; planner_coordinator.cc, planner_coordinator_v05.cc): the
// parameter swap buffers as partitioned_param_swapper.py hands them out
// (free ids, the last freed taken first), each group's NVMe read until its
// release, and the trace queue.
#pragma once

#include <vector>

#include "fetch_policy.h"

namespace strata::detail {

class Coordinator : public FetchPolicy {
 public:
  Coordinator(const ZeroConfig& z, int swap_buffers, int groups);
  bool ReadsPartitions() const override { return true; }
  FetchSite::Read ReadOf(int gi) const override { return reads_[gi]; }

 protected:
  // Reads group gi's partition for its use at pos into a free swap buffer,
  // issued after `issue`. With none free, fires param_swap_buffers_exhausted
  // (once; into *status in strict mode) and reads into a buffer of its own.
  OpId ReadPartition(FetchSite& site, int gi, int pos, OpId issue, Status* status);
  // Releases group gi after the compute at pos: its swap buffer (if any)
  // is free once that compute has run.
  void Release(FetchSite& site, int gi, int pos);
  bool HasRead(int gi) const { return reads_[gi].op >= 0; }
  size_t FreeBuffers() const { return free_.size(); }
  // Group h's partition is still only on NVMe: not gathered, not being read.
  bool OnlyOnNvme(const FetchSite& site, int h, const std::vector<bool>& gathered) const {
    return site.Group(h).home == Tier::kNvme && !gathered[h] && !HasRead(h);
  }
  // DeepSpeed's trace (partitioned_param_coordinator.py record_parameters):
  // per module use, its parameters in ds_id (creation) order.
  struct QueueEntry {
    int pos, group;
  };
  static std::vector<QueueEntry> TraceQueue(const FetchSite& site);

  const int64_t bucket_, max_live_, reuse_;  // elements
  const int swap_buffers_;
  std::vector<OpId> outstanding_;  // reads issued and not yet waited for

 private:
  std::vector<int> free_;               // free swap buffer ids
  std::vector<int> slot_of_;            // per group: the swap buffer of its read, -1 if none
  std::vector<FetchSite::Read> reads_;  // per group: its read, until released
  bool exhausted_ = false;
};

}  // namespace strata::detail
