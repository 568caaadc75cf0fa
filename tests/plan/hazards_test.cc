// The validator's hazard tracker (plan/src/hazards.h) against the
// pairwise definition it replaces: on random access sequences over a small
// buffer, with random happens-before relations (a DAG's reachability), it
// finds a conflict exactly when some earlier overlapping access, one of the
// two a write, of a compatible rank, is not ordered before the new one -
// provided the earlier accesses were conflict-free among themselves (the
// tracker checks against the latest writer and the readers since, and
// relies on transitivity through them).
#include "../../plan/src/hazards.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace strata {
namespace {

struct Acc {
  OpId op;
  int64_t begin, end;
  bool write;
  int rank;
};

bool Conflicts(const Acc& a, const Acc& b) {
  return a.op != b.op && a.begin < b.end && b.begin < a.end && (a.write || b.write) &&
         !(a.rank >= 0 && b.rank >= 0 && a.rank != b.rank);
}

TEST(HazardTracker, FindsAConflictWheneverAPairwiseCheckWould) {
  std::mt19937 rng(11);
  int checked = 0, conflicts = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 12;
    // Reachability of a random DAG over ops 0..n-1 (edges go forward).
    std::vector<std::vector<char>> reach(n, std::vector<char>(n, 0));
    for (int i = 0; i < n; ++i) reach[i][i] = 1;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < j; ++i)
        if (rng() % 3 == 0)
          for (int k = 0; k <= i; ++k)
            if (reach[k][i]) reach[k][j] = 1;
    auto before = [&](OpId a, OpId b) { return reach[a][b] != 0; };
    HazardTracker t;
    std::vector<Acc> seen;
    for (OpId op = 0; op < n; ++op) {
      const int64_t b = rng() % 8, e = b + 1 + rng() % 4;
      const Acc a{op, b, e, rng() % 2 == 0, static_cast<int>(rng() % 3) - 1};
      bool want = false;
      for (const Acc& x : seen) want |= Conflicts(a, x) && !before(x.op, a.op);
      const bool got = !t.Access(a.op, a.begin, a.end, a.write, a.rank, before).empty();
      ++checked;
      if (want) {
        ++conflicts;
        EXPECT_TRUE(got) << "trial " << trial << " op " << op;
        break;  // past a conflict the tracker reports only the latest ones
      }
      EXPECT_FALSE(got) << "trial " << trial << " op " << op;
      seen.push_back(a);
    }
  }
  EXPECT_GT(conflicts, 50);  // the random cases exercise both answers
  EXPECT_GT(checked - conflicts, 1000);
}

TEST(HazardTracker, NamesTheBytesAndTheEarlierOp) {
  HazardTracker t;
  auto never = [](OpId a, OpId b) { return a == b; };
  EXPECT_TRUE(t.Access(0, 50, 150, true, -1, never).empty());
  const auto c = t.Access(1, 100, 200, false, -1, never);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].other, 0);
  EXPECT_TRUE(c[0].other_writes);
  EXPECT_EQ(c[0].lo, 100);
  EXPECT_EQ(c[0].hi, 150);
  // Another rank's memory: no conflict with a rank-1 write on rank 0's.
  HazardTracker r;
  EXPECT_TRUE(r.Access(0, 0, 10, true, 0, never).empty());
  EXPECT_TRUE(r.Access(1, 0, 10, true, 1, never).empty());
  EXPECT_EQ(r.Access(2, 0, 10, false, -1, never).size(), 2u);  // every rank's read meets both
}

}  // namespace
}  // namespace strata
