#include "strata/plan/fresh_bytes.h"

#include <algorithm>
#include <map>
#include <utility>

#include "strata/plan/op_regions.h"

namespace strata {
namespace {

// Disjoint, sorted, non-adjacent byte ranges [begin, end).
class Ranges {
 public:
  void Add(int64_t a, int64_t e) {
    if (a >= e) return;
    // The first range that ends at or after a, up to the first that starts past e.
    auto lo = std::lower_bound(r_.begin(), r_.end(), a, [](const auto& x, int64_t v) { return x.second < v; });
    auto hi = std::upper_bound(lo, r_.end(), e, [](int64_t v, const auto& x) { return v < x.first; });
    if (lo != hi) {
      a = std::min(a, lo->first);
      e = std::max(e, std::prev(hi)->second);
      lo = r_.erase(lo, hi);
    }
    r_.insert(lo, {a, e});
  }
  // The end of the range holding byte `at`, or `at` when none does.
  int64_t Reach(int64_t at) const {
    auto it = std::upper_bound(r_.begin(), r_.end(), at, [](int64_t v, const auto& x) { return v < x.first; });
    if (it == r_.begin()) return at;
    --it;
    return it->second > at ? it->second : at;
  }
  bool Touches(int64_t a, int64_t e) const {
    auto it = std::upper_bound(r_.begin(), r_.end(), a, [](int64_t v, const auto& x) { return v < x.second; });
    return it != r_.end() && it->first < e;
  }

 private:
  std::vector<std::pair<int64_t, int64_t>> r_;
};

// What each rank wrote of one buffer since its allocation (-1: every rank).
// Most buffers are written on every rank alone: those ranges sit inline,
// the few buffers that moves write rank by rank get a map.
struct Written {
  Ranges all;
  std::map<int, Ranges> by_rank;
  void Clear() {
    all = Ranges();
    by_rank.clear();
  }
  void Add(int rank, int64_t a, int64_t e) { (rank < 0 ? all : by_rank[rank]).Add(a, e); }
  // Whether [a, e) was written on `rank` (on every rank, for -1).
  bool Covers(int64_t a, int64_t e, int rank) const {
    const Ranges* own = rank >= 0 ? Find(rank) : nullptr;
    for (int64_t at = a; at < e;) {
      const int64_t next = std::max(all.Reach(at), own ? own->Reach(at) : at);
      if (next == at) return false;
      at = next;
    }
    return true;
  }
  bool AnyWritten(int64_t a, int64_t e) const {
    if (all.Touches(a, e)) return true;
    for (const auto& [r, ranges] : by_rank)
      if (ranges.Touches(a, e)) return true;
    return false;
  }
  const Ranges* Find(int rank) const {
    auto it = by_rank.find(rank);
    return it == by_rank.end() ? nullptr : &it->second;
  }
};

// Walks the ops in list order. With `stores`, decides each backward's
// Op::grads_store as it goes (into (*stores)[op]) instead of reading it.
std::vector<UnwrittenRead> Walk(const Plan& plan, std::vector<uint32_t>* stores) {
  const auto nb = static_cast<BufferId>(plan.buffers.size());
  std::vector<Written> written(plan.buffers.size());
  std::vector<UnwrittenRead> first(plan.buffers.size());
  auto tracked = [&](const Region& r) {
    return r.buffer >= 0 && r.buffer < nb && r.bytes.v > 0 && !plan.buffers[r.buffer].resident;
  };
  auto read = [&](const Op& op, const Region& r, const char* what, int rank) {
    if (!tracked(r) || first[r.buffer].op >= 0) return;
    if (!written[r.buffer].Covers(r.offset.v, r.end().v, rank))
      first[r.buffer] = {op.id, r.buffer, r.offset, r.bytes, what};
  };
  auto write = [&](const Region& r, int rank) {
    if (tracked(r)) written[r.buffer].Add(rank, r.offset.v, r.end().v);
  };
  for (const Op& op : plan.ops) {
    for (BufferId b : op.allocs)
      if (b >= 0 && b < nb) written[b].Clear();
    uint32_t store = op.grads_store;
    if (stores != nullptr) {
      store = 0;
      for (size_t k = 0; k < op.grads.size() && k < 32 && op.kind == OpKind::kBackward; ++k) {
        const Region& g = op.grads[k];
        if (!tracked(g) || written[g.buffer].AnyWritten(g.offset.v, g.end().v)) continue;
        store |= 1u << k;
        write(g, -1);  // a later region of this op on the same bytes adds
      }
      (*stores)[static_cast<size_t>(op.id)] = store;
    }
    // Reads first: an op reads what it is given before it writes.
    ForEachRegion(op, [&](const Region& r, const char* what, bool w, int rank) {
      if (!w) read(op, r, what, rank);
    });
    for (const Move& m : op.moves)
      if (m.accumulate) read(op, m.dst, "accumulating move destination", op.kind == OpKind::kAllGather ? -1 : m.rank);
    for (size_t k = 0; k < op.grads.size(); ++k)
      if (!StoresGrad(store, k)) read(op, op.grads[k], "gradient added to", -1);
    for (const Region* r : {&op.master, &op.exp_avg, &op.exp_avg_sq}) read(op, *r, "optimizer state", -1);
    ForEachRegion(op, [&](const Region& r, const char*, bool w, int rank) {
      if (w) write(r, rank);
    });
  }
  std::vector<UnwrittenRead> out;
  for (const UnwrittenRead& u : first)
    if (u.op >= 0) out.push_back(u);
  return out;
}

}  // namespace

std::vector<UnwrittenRead> FindUnwrittenReads(const Plan& plan) { return Walk(plan, nullptr); }

void MarkFreshBytes(Plan& plan) {
  std::vector<uint32_t> stores(plan.ops.size(), 0);
  const std::vector<UnwrittenRead> unwritten = Walk(plan, &stores);
  for (Op& op : plan.ops) op.grads_store = stores[static_cast<size_t>(op.id)];
  for (Buffer& b : plan.buffers) b.cleared = false;
  for (const UnwrittenRead& u : unwritten) plan.buffers[u.buffer].cleared = true;
}

}  // namespace strata
