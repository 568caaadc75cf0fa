#include "strata/planner/eviction.h"

#include <gtest/gtest.h>

#include <random>

namespace strata {
namespace {

std::vector<Access> Trace(std::initializer_list<int> blocks) {
  std::vector<Access> t;
  for (int b : blocks) t.push_back({b, 1, 1});
  return t;
}

// Silberschatz, Operating System Concepts: reference string with 3 frames.
TEST(Eviction, TextbookReferenceString) {
  const auto t = Trace({7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1});
  EXPECT_EQ(ReplayTrace(t, 3, EvictionKind::kBelady).misses, 9);
  EXPECT_EQ(ReplayTrace(t, 3, EvictionKind::kLru).misses, 12);
  EXPECT_EQ(ReplayTrace(t, 3, EvictionKind::kFifo).misses, 15);
}

// Belady's anomaly: FIFO faults more with more frames.
TEST(Eviction, FifoAnomaly) {
  const auto t = Trace({1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5});
  EXPECT_EQ(ReplayTrace(t, 3, EvictionKind::kFifo).misses, 9);
  EXPECT_EQ(ReplayTrace(t, 4, EvictionKind::kFifo).misses, 10);
}

// A loop one block larger than the cache: LRU evicts exactly the block needed
// next, every time; FIFO does the same; Belady keeps most of the loop.
TEST(Eviction, CyclicPatternIsLruWorstCase) {
  std::vector<Access> t;
  for (int rep = 0; rep < 10; ++rep)
    for (int b = 0; b < 4; ++b) t.push_back({b, 1, 1});
  const auto lru = ReplayTrace(t, 3, EvictionKind::kLru);
  EXPECT_EQ(lru.misses, 40);
  EXPECT_EQ(ReplayTrace(t, 3, EvictionKind::kFifo).misses, lru.misses);
  const auto opt = ReplayTrace(t, 3, EvictionKind::kBelady);
  EXPECT_EQ(opt.misses, 4 + 12);  // compulsory, then one miss per 3 accesses
}

// A hot block between one-off blocks: LFU keeps it, recency-based ones lose it.
TEST(Eviction, FrequencySkewFavoursLfu) {
  const auto t = Trace({0, 0, 0, 1, 2, 0, 3, 4, 0, 5, 6, 0, 7, 8, 0});
  const auto lfu = ReplayTrace(t, 2, EvictionKind::kLfu);
  EXPECT_EQ(lfu.misses, 9);  // 0 once, then the 8 one-off blocks
  EXPECT_GT(ReplayTrace(t, 2, EvictionKind::kLru).misses, lfu.misses);
  EXPECT_GT(ReplayTrace(t, 2, EvictionKind::kFifo).misses, lfu.misses);
}

// MIN is optimal for equal-size blocks: never more traffic than any policy.
TEST(Eviction, BeladyNeverLosesOnEqualSizes) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    const int blocks = 3 + trial % 12;
    std::vector<Access> t;
    std::geometric_distribution<int> skew(0.3);
    for (int i = 0; i < 300; ++i)
      t.push_back({trial % 2 ? skew(rng) % blocks : static_cast<int>(rng() % blocks), 4, 1});
    for (int64_t cap : {4, 8, 16, 28}) {
      const int64_t opt = ReplayTrace(t, cap, EvictionKind::kBelady).bytes_fetched;
      for (EvictionKind k : kAllEvictions)
        EXPECT_LE(opt, ReplayTrace(t, cap, k).bytes_fetched) << EvictionName(k) << " trial " << trial << " cap " << cap;
    }
  }
}

TEST(Eviction, CostAwareEvictsCheapAndCleanBlocksFirst) {
  BlockCache cache(2, EvictionKind::kCostAware);
  BlockInfo cheap{1, 1.0, 0, false}, dear{1, 10.0, 0, false};
  ASSERT_TRUE(cache.Insert(1, cheap, 0, 100, nullptr));
  ASSERT_TRUE(cache.Insert(2, dear, 1, 100, nullptr));
  std::vector<int> victims;
  ASSERT_TRUE(cache.Insert(3, cheap, 2, 50, &victims));
  EXPECT_EQ(victims, std::vector<int>{1});  // same next use: the cheap one goes

  BlockCache c2(2, EvictionKind::kCostAware);
  BlockInfo dirty{1, 1.0, 5.0, true}, clean{1, 1.0, 5.0, false};
  ASSERT_TRUE(c2.Insert(1, dirty, 0, 100, nullptr));
  ASSERT_TRUE(c2.Insert(2, clean, 1, 100, nullptr));
  victims.clear();
  ASSERT_TRUE(c2.Insert(3, clean, 2, 50, &victims));
  EXPECT_EQ(victims, std::vector<int>{2});  // the clean one needs no write-back
  // Belady ignores cost: the farthest next use goes.
  BlockCache c3(2, EvictionKind::kBelady);
  ASSERT_TRUE(c3.Insert(1, cheap, 0, 80, nullptr));
  ASSERT_TRUE(c3.Insert(2, dear, 1, 90, nullptr));
  victims.clear();
  ASSERT_TRUE(c3.Insert(3, cheap, 2, 50, &victims));
  EXPECT_EQ(victims, std::vector<int>{2});
}

TEST(Eviction, PinnedBlocksStayAndOversizedBlocksAreRefused) {
  for (EvictionKind k : kAllEvictions) {
    BlockCache cache(3, k);
    ASSERT_TRUE(cache.Insert(1, {1, 1, 0, false}, 0, 10, nullptr));
    ASSERT_TRUE(cache.Insert(2, {1, 1, 0, false}, 1, 20, nullptr));
    ASSERT_TRUE(cache.Insert(3, {1, 1, 0, false}, 2, 30, nullptr));
    cache.Pin(1);
    cache.Pin(2);
    cache.Pin(3);
    EXPECT_FALSE(cache.Insert(4, {1, 1, 0, false}, 3, 40, nullptr)) << EvictionName(k);
    cache.Unpin(2);
    std::vector<int> victims;
    EXPECT_TRUE(cache.Insert(4, {1, 1, 0, false}, 3, 40, &victims));
    EXPECT_EQ(victims, std::vector<int>{2}) << EvictionName(k);
    EXPECT_FALSE(cache.Insert(5, {4, 1, 0, false}, 4, 50, nullptr));
    EXPECT_EQ(cache.used(), 3);
  }
}

TEST(Eviction, NamesRoundTrip) {
  for (EvictionKind k : kAllEvictions) EXPECT_EQ(ParseEviction(EvictionName(k)), k);
  EXPECT_FALSE(ParseEviction("arc").has_value());
}

}  // namespace
}  // namespace strata
