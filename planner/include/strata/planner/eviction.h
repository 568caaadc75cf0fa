// Eviction policies and the block cache the planner keeps in front of slower
// tiers: gathered parameters on the GPU (refetched from CPU or NVMe) and
// NVMe-homed partitions in pinned CPU memory.
//
// Training's access order is known at plan time, so the cache is told each
// block's next use (an index into the access trace; kNever when there is
// none). LRU, LFU and FIFO ignore it; Belady evicts the block used farthest
// in the future; cost-aware weighs that distance by bytes and by the cost of
// refetching the block (plus writing it back when dirty), so clean blocks
// that are cheap to refetch go first.
//
// Every operation is O(log n) in the number of cached blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "strata/core/scenario.h"

namespace strata {

std::string_view EvictionName(EvictionKind k);
std::optional<EvictionKind> ParseEviction(std::string_view name);
inline constexpr EvictionKind kAllEvictions[] = {EvictionKind::kLru, EvictionKind::kLfu, EvictionKind::kFifo,
                                                 EvictionKind::kBelady, EvictionKind::kCostAware};

inline constexpr int64_t kNever = INT64_MAX;

struct BlockInfo {
  int64_t bytes = 0;
  double refetch_cost = 1;    // seconds (or any unit) to bring the block back
  double writeback_cost = 0;  // extra cost of evicting it while dirty
  bool dirty = false;
};

// A policy orders the cached blocks for eviction. `pinned` says which blocks
// are in use and may not be chosen (few: at most the prefetch window).
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual void Insert(int block, const BlockInfo& info, int64_t now, int64_t next_use) = 0;
  virtual void Touch(int block, int64_t now, int64_t next_use) = 0;  // a hit
  virtual void Erase(int block) = 0;
  // The block's next use changed without an access (policies that look ahead).
  virtual void Reschedule(int /*block*/, int64_t /*next_use*/) {}
  // Returns the victim (the caller erases it), or -1 when every block is pinned.
  virtual int Victim(int64_t now, const std::unordered_map<int, bool>& pinned) = 0;
  // Look-ahead policies: the latest next use among unpinned blocks.
  virtual std::optional<int64_t> FarthestNextUse(const std::unordered_map<int, bool>& /*pinned*/) const {
    return std::nullopt;
  }
};
std::unique_ptr<EvictionPolicy> MakeEvictionPolicy(EvictionKind kind);

// A cache of `capacity` bytes. Blocks may be pinned (in use: not evictable).
// With `bypass`, look-ahead policies refuse a block needed later than every
// block it would displace (MIN with bypass); otherwise every insertion that
// fits is made (demand paging).
class BlockCache {
 public:
  BlockCache(int64_t capacity, EvictionKind kind, bool bypass = false);

  bool Contains(int block) const { return blocks_.count(block) != 0; }
  // A hit: records the access.
  void Touch(int block, int64_t now, int64_t next_use);
  // Tells look-ahead policies when a cached block is next needed (e.g. a
  // partition whose GPU copy was just used from another cache).
  void Reschedule(int block, int64_t next_use);
  // Pinned blocks are not evicted until unpinned.
  void Pin(int block);
  void Unpin(int block);
  // Inserts a block (unpinned), evicting as needed; evicted blocks are
  // appended to `victims`. Returns false, changing nothing, when it cannot
  // fit even after evicting every unpinned block, or is bypassed.
  bool Insert(int block, const BlockInfo& info, int64_t now, int64_t next_use, std::vector<int>* victims);
  void Erase(int block);

  int64_t capacity() const { return capacity_; }
  int64_t used() const { return used_; }
  int64_t evictions = 0;

 private:
  int64_t capacity_;
  bool bypass_;
  int64_t used_ = 0;
  int64_t pinned_bytes_ = 0;
  std::unordered_map<int, BlockInfo> blocks_;
  std::unordered_map<int, bool> pinned_;
  std::unique_ptr<EvictionPolicy> policy_;
};

// Replays a trace of block accesses through a cache (each miss fetches and
// inserts the block): the reference model for tests and benchmarks.
struct Access {
  int block = 0;
  int64_t bytes = 1;
  double refetch_cost = 1;
};
struct TraceResult {
  int64_t hits = 0, misses = 0, evictions = 0;
  int64_t bytes_fetched = 0;
};
TraceResult ReplayTrace(const std::vector<Access>& trace, int64_t capacity, EvictionKind kind);
// Next-use index of a trace: next[i] = the next position accessing the same
// block, kNever if none. O(n).
std::vector<int64_t> NextUses(const std::vector<Access>& trace);

}  // namespace strata
