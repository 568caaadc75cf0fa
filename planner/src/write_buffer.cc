// BufferNvmeWrites (write_buffer.h).
#include "write_buffer.h"

#include <algorithm>
#include <vector>

namespace strata::detail {

namespace {

bool Small(const Op& op, int64_t below) {
  return std::all_of(op.moves.begin(), op.moves.end(), [&](const Move& m) { return m.dst.bytes.v < below; });
}

// Whether a move of `a` ends where one of `b` starts, or the reverse, in
// one buffer on one rank.
bool Meets(const Op& a, const Op& b) {
  for (const Move& x : a.moves)
    for (const Move& y : b.moves)
      if (x.dst.buffer == y.dst.buffer && (x.rank == y.rank || x.rank < 0 || y.rank < 0) &&
          (x.dst.end() == y.dst.offset || y.dst.end() == x.dst.offset))
        return true;
  return false;
}

template <typename T>
void Union(std::vector<T>& into, const std::vector<T>& from) {
  for (const T& v : from)
    if (std::find(into.begin(), into.end(), v) == into.end()) into.push_back(v);
}

// `small`'s moves and effects join `into`, listed later on the same stream.
void Merge(const Op& small, Op& into) {
  std::vector<Move> moves = small.moves;
  moves.insert(moves.end(), into.moves.begin(), into.moves.end());
  into.moves = std::move(moves);
  Union(into.deps, small.deps);
  std::erase(into.deps, small.id);
  Union(into.frees, small.frees);
  Union(into.reads, small.reads);
  Union(into.writes, small.writes);
  into.bytes += small.bytes;
  into.copy_bytes += small.copy_bytes;
}

// Drops the ops merged away (into[i] >= 0: where op i went) and renumbers
// the rest, pointing dependencies on a merged op at where it went.
void Compact(Plan& plan, const std::vector<OpId>& into) {
  const size_t n = plan.ops.size();
  std::vector<OpId> final_id(n, -1);
  OpId next = 0;
  for (size_t i = 0; i < n; ++i)
    if (into[i] < 0) final_id[i] = next++;
  auto resolve = [&](OpId id) {
    while (into[static_cast<size_t>(id)] >= 0) id = into[static_cast<size_t>(id)];
    return final_id[static_cast<size_t>(id)];
  };
  std::vector<Op> kept;
  kept.reserve(static_cast<size_t>(next));
  for (size_t i = 0; i < n; ++i) {
    if (into[i] >= 0) continue;
    Op op = std::move(plan.ops[i]);
    op.id = final_id[i];
    std::vector<OpId> deps;
    for (OpId d : op.deps)
      if (const OpId r = resolve(d); r != op.id && std::find(deps.begin(), deps.end(), r) == deps.end())
        deps.push_back(r);
    op.deps = std::move(deps);
    kept.push_back(std::move(op));
  }
  plan.ops = std::move(kept);
}

}  // namespace

int BufferNvmeWrites(Plan& plan, int64_t below) {
  const size_t n = plan.ops.size();
  std::vector<std::vector<OpId>> dependents(n);  // the ops listing each in deps, ascending
  for (const Op& op : plan.ops)
    for (OpId d : op.deps) dependents[static_cast<size_t>(d)].push_back(op.id);
  std::vector<OpId> into(n, -1);
  std::vector<OpId> pending(StreamSlots(plan), -1);  // a small write waiting, per stream
  int merged = 0;
  for (Op& op : plan.ops) {
    if (op.kind != OpKind::kNvmeWrite) continue;
    op.coalesce = true;
    OpId& p = pending[StreamSlot(op)];
    if (p >= 0) {
      const Op& small = plan.ops[static_cast<size_t>(p)];
      std::vector<OpId>& after = dependents[static_cast<size_t>(p)];
      if ((after.empty() || after.front() >= op.id) && small.allocs.empty() && Meets(small, op)) {
        Merge(small, op);
        // The merged write's dependents: both's (sorted again), not itself.
        std::vector<OpId>& mine = dependents[static_cast<size_t>(op.id)];
        for (OpId d : after)
          if (d != op.id) mine.push_back(d);
        std::sort(mine.begin(), mine.end());
        into[static_cast<size_t>(p)] = op.id;
        ++merged;
      }
    }
    p = Small(op, below) ? op.id : -1;
  }
  if (merged > 0) Compact(plan, into);
  return merged;
}

}  // namespace strata::detail
