#include "strata/planner/eviction.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <list>
#include <set>
#include <tuple>

namespace strata {
namespace {

constexpr std::array<std::string_view, 5> kNames = {"lru", "lfu", "fifo", "belady", "cost_aware"};

// LRU and FIFO: a list from oldest to newest; LRU moves a block on every hit.
class ListPolicy : public EvictionPolicy {
 public:
  explicit ListPolicy(bool move_on_hit) : move_on_hit_(move_on_hit) {}
  void Insert(int b, const BlockInfo&, int64_t, int64_t) override { where_[b] = order_.insert(order_.end(), b); }
  void Touch(int b, int64_t, int64_t) override {
    if (move_on_hit_) order_.splice(order_.end(), order_, where_.at(b));
  }
  void Erase(int b) override {
    order_.erase(where_.at(b));
    where_.erase(b);
  }
  int Victim(int64_t, const std::unordered_map<int, bool>& pinned) override {
    for (int b : order_)
      if (!pinned.count(b)) return b;
    return -1;
  }

 private:
  bool move_on_hit_;
  std::list<int> order_;
  std::unordered_map<int, std::list<int>::iterator> where_;
};

// LFU: fewest accesses first, ties broken by least recent access.
class LfuPolicy : public EvictionPolicy {
 public:
  void Insert(int b, const BlockInfo&, int64_t now, int64_t) override { Put(b, {1, now, b}); }
  void Touch(int b, int64_t now, int64_t) override {
    Key k = key_.at(b);
    order_.erase(k);
    Put(b, {std::get<0>(k) + 1, now, b});
  }
  void Erase(int b) override {
    order_.erase(key_.at(b));
    key_.erase(b);
  }
  int Victim(int64_t, const std::unordered_map<int, bool>& pinned) override {
    for (const Key& k : order_)
      if (!pinned.count(std::get<2>(k))) return std::get<2>(k);
    return -1;
  }

 private:
  using Key = std::tuple<int64_t, int64_t, int>;  // count, last access, block
  void Put(int b, Key k) {
    key_[b] = k;
    order_.insert(k);
  }
  std::set<Key> order_;
  std::unordered_map<int, Key> key_;
};

// Belady (MIN): the block whose next use is farthest away (never used again
// first). Cost-aware: among the farthest few, the largest next-use distance
// x bytes / refetch cost (dirty blocks add their write-back cost).
class FuturePolicy : public EvictionPolicy {
 public:
  explicit FuturePolicy(bool cost_aware) : cost_aware_(cost_aware) {}
  void Insert(int b, const BlockInfo& info, int64_t, int64_t next) override {
    info_[b] = info;
    Put(b, next);
  }
  void Touch(int b, int64_t, int64_t next) override {
    order_.erase({next_.at(b), b});
    Put(b, next);
  }
  void Erase(int b) override {
    order_.erase({next_.at(b), b});
    next_.erase(b);
    info_.erase(b);
  }
  std::optional<int64_t> FarthestNextUse(const std::unordered_map<int, bool>& pinned) const override {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it)
      if (!pinned.count(it->second)) return it->first;
    return std::nullopt;
  }
  void Reschedule(int b, int64_t next) override {
    order_.erase({next_.at(b), b});
    Put(b, next);
  }
  int Victim(int64_t now, const std::unordered_map<int, bool>& pinned) override {
    constexpr int kCandidates = 8;
    int best = -1, seen = 0;
    double best_score = -std::numeric_limits<double>::infinity();
    for (auto it = order_.rbegin(); it != order_.rend() && seen < kCandidates; ++it) {
      const int b = it->second;
      if (pinned.count(b)) continue;
      if (!cost_aware_) return b;
      ++seen;
      const BlockInfo& in = info_.at(b);
      const double cost = in.refetch_cost + (in.dirty ? in.writeback_cost : 0.0);
      const double per_byte = static_cast<double>(in.bytes) / std::max(cost, 1e-30);
      // Never used again: evict first, clean and cheap ones before others.
      const double distance = it->first == kNever ? 1e300 : static_cast<double>(std::max<int64_t>(it->first - now, 0));
      const double score = it->first == kNever ? 1e300 + per_byte : distance * per_byte;
      if (score > best_score) {
        best_score = score;
        best = b;
      }
    }
    return best;
  }

 private:
  void Put(int b, int64_t next) {
    next_[b] = next;
    order_.insert({next, b});
  }
  bool cost_aware_;
  std::set<std::pair<int64_t, int>> order_;
  std::unordered_map<int, int64_t> next_;
  std::unordered_map<int, BlockInfo> info_;
};

}  // namespace

std::string_view EvictionName(EvictionKind k) { return kNames[static_cast<int>(k)]; }

std::optional<EvictionKind> ParseEviction(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<EvictionKind>(i);
  return std::nullopt;
}

std::unique_ptr<EvictionPolicy> MakeEvictionPolicy(EvictionKind kind) {
  switch (kind) {
    case EvictionKind::kLru:
      return std::make_unique<ListPolicy>(true);
    case EvictionKind::kFifo:
      return std::make_unique<ListPolicy>(false);
    case EvictionKind::kLfu:
      return std::make_unique<LfuPolicy>();
    case EvictionKind::kBelady:
      return std::make_unique<FuturePolicy>(false);
    case EvictionKind::kCostAware:
      return std::make_unique<FuturePolicy>(true);
  }
  return nullptr;
}

BlockCache::BlockCache(int64_t capacity, EvictionKind kind, bool bypass)
    : capacity_(capacity), bypass_(bypass), policy_(MakeEvictionPolicy(kind)) {}

void BlockCache::Touch(int block, int64_t now, int64_t next_use) { policy_->Touch(block, now, next_use); }

void BlockCache::Reschedule(int block, int64_t next_use) {
  if (Contains(block)) policy_->Reschedule(block, next_use);
}

void BlockCache::Pin(int block) {
  if (pinned_.emplace(block, true).second) pinned_bytes_ += blocks_.at(block).bytes;
}

void BlockCache::Unpin(int block) {
  if (pinned_.erase(block) != 0) pinned_bytes_ -= blocks_.at(block).bytes;
}

bool BlockCache::Insert(int block, const BlockInfo& info, int64_t now, int64_t next_use, std::vector<int>* victims) {
  if (info.bytes > capacity_ - pinned_bytes_) return false;
  if (bypass_ && used_ + info.bytes > capacity_) {
    const auto farthest = policy_->FarthestNextUse(pinned_);
    if (farthest && next_use >= *farthest) return false;  // needed later than anything it would displace
  }
  while (used_ + info.bytes > capacity_) {
    const int v = policy_->Victim(now, pinned_);
    if (v < 0) return false;  // unreachable: the unpinned bytes suffice
    Erase(v);
    ++evictions;
    if (victims) victims->push_back(v);
  }
  blocks_[block] = info;
  used_ += info.bytes;
  policy_->Insert(block, info, now, next_use);
  return true;
}

void BlockCache::Erase(int block) {
  auto it = blocks_.find(block);
  if (it == blocks_.end()) return;
  Unpin(block);
  used_ -= it->second.bytes;
  policy_->Erase(block);
  blocks_.erase(it);
}

std::vector<int64_t> NextUses(const std::vector<Access>& trace) {
  std::vector<int64_t> next(trace.size(), kNever);
  std::unordered_map<int, int64_t> last;
  for (int64_t i = static_cast<int64_t>(trace.size()) - 1; i >= 0; --i) {
    auto it = last.find(trace[i].block);
    if (it != last.end()) next[i] = it->second;
    last[trace[i].block] = i;
  }
  return next;
}

TraceResult ReplayTrace(const std::vector<Access>& trace, int64_t capacity, EvictionKind kind) {
  const std::vector<int64_t> next = NextUses(trace);
  BlockCache cache(capacity, kind);
  TraceResult r;
  for (int64_t i = 0; i < static_cast<int64_t>(trace.size()); ++i) {
    const Access& a = trace[i];
    if (cache.Contains(a.block)) {
      ++r.hits;
      cache.Touch(a.block, i, next[i]);
      continue;
    }
    ++r.misses;
    r.bytes_fetched += a.bytes;
    BlockInfo info;
    info.bytes = a.bytes;
    info.refetch_cost = a.refetch_cost;
    cache.Insert(a.block, info, i, next[i], nullptr);
  }
  r.evictions = cache.evictions;
  return r;
}

}  // namespace strata
