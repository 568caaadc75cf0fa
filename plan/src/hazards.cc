#include "hazards.h"

#include <algorithm>

namespace strata {

// Splits the segment containing `at` (if any) so that one starts there.
void HazardTracker::Split(Segs& m, int64_t at) {
  auto it = m.upper_bound(at);
  if (it == m.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Seg tail = it->second;
  it->second.end = at;
  m.emplace(at, std::move(tail));
}

std::vector<HazardTracker::Conflict> HazardTracker::Access(OpId op, int64_t begin, int64_t end, bool write, int rank,
                                                           const Before& before) {
  std::vector<Conflict> out;
  auto conflict = [&](OpId other, bool other_writes, int64_t lo, int64_t hi) {
    if (other == op || before(other, op)) return;
    for (Conflict& c : out)
      if (c.other == other && c.other_writes == other_writes) {
        c.lo = std::min(c.lo, lo);
        c.hi = std::max(c.hi, hi);
        return;
      }
    out.push_back({other, other_writes, lo, hi});
  };
  auto check = [&](const Segs& segs) {
    auto it = segs.upper_bound(begin);
    if (it != segs.begin() && std::prev(it)->second.end > begin) --it;
    for (; it != segs.end() && it->first < end; ++it) {
      const int64_t lo = std::max(begin, it->first), hi = std::min(end, it->second.end);
      if (lo >= hi) continue;
      if (it->second.writer >= 0) conflict(it->second.writer, true, lo, hi);
      if (write)
        for (OpId reader : it->second.readers) conflict(reader, false, lo, hi);
    }
  };
  // Check: a rank's access meets its own rank's and every rank's (two
  // look-ups, not a walk over the ranks: that walk made validation
  // quadratic in the world size); an access on every rank meets all.
  if (rank >= 0) {
    for (int r : {-1, rank})
      if (auto it = by_rank_.find(r); it != by_rank_.end()) check(it->second);
  } else {
    for (const auto& [r, segs] : by_rank_) check(segs);
  }
  // A write on every rank supersedes each rank's own record of those
  // bytes: it was checked against them just now, so a later access is
  // ordered after them whenever it is after this write (and conflicts with
  // this write otherwise). Dropping them keeps the next every-rank access
  // from walking them again.
  if (rank < 0 && write) {
    for (auto it = by_rank_.begin(); it != by_rank_.end();) {
      if (it->first < 0) {
        ++it;
        continue;
      }
      Segs& own = it->second;
      Split(own, begin);
      Split(own, end);
      own.erase(own.lower_bound(begin), own.lower_bound(end));
      it = own.empty() ? by_rank_.erase(it) : std::next(it);
    }
  }
  // Record, in this rank's segments: cover [begin, end), filling gaps.
  Segs& m = by_rank_[rank];
  Split(m, begin);
  Split(m, end);
  int64_t at = begin;
  auto it = m.lower_bound(begin);
  while (at < end) {
    if (it == m.end() || it->first > at) {  // a gap up to the next segment
      const int64_t gap_end = it == m.end() ? end : std::min(end, it->first);
      it = m.emplace_hint(it, at, Seg{gap_end, -1, {}});
    }
    Seg& s = it->second;
    if (write) {
      s.writer = op;
      s.readers.clear();
    } else if (s.readers.empty() || s.readers.back() != op) {
      s.readers.push_back(op);
    }
    at = s.end;
    ++it;
  }
  return out;
}

}  // namespace strata
