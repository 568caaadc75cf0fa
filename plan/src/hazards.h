// Data-hazard tracking for the plan validator (private to the scheduler):
// one buffer's accesses fed in a topological order of the ops, each checked
// only against what can conflict with it last: the bytes' latest writer,
// and, for a write, the readers since that write. Whatever came before
// those is ordered before them (checked when they came) and so, by
// transitivity, before the new access whenever they are. Checking every
// overlapping pair instead was quadratic: the swap buffers DeepSpeed reuses
// for every parameter fetch are accessed by thousands of ops (planning the
// 1T GPT at 2048 layers spent 64% of its 10 s there). A write on every
// rank drops what each rank recorded of those bytes (superseded), so
// every-rank accesses do not walk the ranks' records again and again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "strata/plan/plan.h"

namespace strata {

class HazardTracker {
 public:
  // before(a, b): op a happens before op b (or is b).
  using Before = std::function<bool(OpId, OpId)>;
  struct Conflict {
    OpId other;  // the earlier op the access is not ordered with
    bool other_writes;
    int64_t lo, hi;  // the bytes in conflict (their hull, if several runs)
  };

  // Records `op`'s access of bytes [begin, end), a write or a read, in the
  // memory of `rank` (or of every rank: -1), and returns the earlier
  // accesses it conflicts with: overlapping bytes, one of the two a write,
  // not ordered, the same rank or either on every rank. REQUIRES: accesses
  // come in a topological order of their ops.
  std::vector<Conflict> Access(OpId op, int64_t begin, int64_t end, bool write, int rank, const Before& before);

 private:
  struct Seg {
    int64_t end;
    OpId writer = -1;
    std::vector<OpId> readers;  // since the writer
  };
  using Segs = std::map<int64_t, Seg>;  // by start; disjoint
  static void Split(Segs& m, int64_t at);

  std::map<int, Segs> by_rank_;  // -1: accesses on every rank
};

}  // namespace strata
