#include "strata/timeline/critical_path.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace strata {

namespace {

// While the lookup table of every rank's spans (ranks x plan ops, 4 bytes
// each) fits in this many entries, 64 MiB, the path follows a collective to
// the rank that was ready last: every --all-nodes replay of the
// ZeRO-Infinity paper's 512 GPUs (3.5M entries for 0.5T). Beyond it (a
// replay of thousands of ranks of a large plan) it stays on the rank and
// its peers in other stages, and the table holds those alone.
constexpr size_t kFollowEntries = size_t{1} << 24;

}  // namespace

CriticalPath AnalyzeCriticalPath(const Plan& plan, const Timeline& t, int rank) {
  CriticalPath r;
  const int per_stage = plan.RanksPerStage();
  // The ranks whose spans the path may visit (t.ops is sorted by rank): all
  // of them when few; else the rank and its peers at its position in the
  // other stages (a receive's chain continues at its send).
  std::vector<int> ranks;
  for (const TimelineOp& op : t.ops)
    if (ranks.empty() || ranks.back() != op.rank) ranks.push_back(op.rank);
  const size_t nops = plan.ops.size();
  const bool follow = ranks.size() * nops <= kFollowEntries;
  if (!follow) std::erase_if(ranks, [&](int rk) { return rk % per_stage != rank % per_stage; });
  // span(rk, op): a dense index, ranks x plan ops, into t.ops.
  std::vector<int32_t> at(ranks.size() * nops, -1);
  auto slot = [&](int rk) -> int {
    const auto it = std::lower_bound(ranks.begin(), ranks.end(), rk);
    return it != ranks.end() && *it == rk ? static_cast<int>(it - ranks.begin()) : -1;
  };
  const TimelineOp* last = nullptr;
  for (size_t i = 0, s = 0; i < t.ops.size(); ++i) {
    const TimelineOp& op = t.ops[i];
    while (s < ranks.size() && ranks[s] < op.rank) ++s;
    if (s < ranks.size() && ranks[s] == op.rank) at[s * nops + static_cast<size_t>(op.op)] = static_cast<int32_t>(i);
    if (op.rank == rank && (last == nullptr || op.end_s > last->end_s)) last = &op;
  }
  auto span = [&](int rk, OpId id) -> const TimelineOp* {
    const int s = slot(rk);
    if (s < 0 || id < 0) return nullptr;
    const int32_t i = at[static_cast<size_t>(s) * nops + static_cast<size_t>(id)];
    return i < 0 ? nullptr : &t.ops[static_cast<size_t>(i)];
  };
  constexpr int kWait = static_cast<int>(TimeClass::kIdle);
  if (last == nullptr) {
    r.seconds[kWait] = t.iteration_s;
    return r;
  }
  // The previous op of each op's stream, in plan order.
  std::vector<OpId> stream_prev(plan.ops.size(), -1);
  std::vector<OpId> tail(StreamSlots(plan), -1);
  for (const Op& op : plan.ops) {
    stream_prev[op.id] = tail[StreamSlot(op)];
    tail[StreamSlot(op)] = op.id;
  }
  // The span of op `id` on the rank that runs it, seen from `from`'s rank.
  auto found = [&](OpId id, const TimelineOp* from) -> const TimelineOp* {
    const int stage = plan.ops[static_cast<size_t>(id)].stage;
    const int rk =
        stage == plan.ops[static_cast<size_t>(from->op)].stage ? from->rank : plan.PeerRank(from->rank, stage);
    return span(rk, id);
  };
  r.seconds[kWait] += std::max(0.0, t.iteration_s - last->end_s);
  for (const TimelineOp* cur = last; cur != nullptr;) {
    r.ops.push_back(cur->op);
    r.ranks.push_back(cur->rank);
    r.seconds[static_cast<int>(TimeClassOf(*cur))] += cur->end_s - cur->start_s;
    const TimelineOp* pred = nullptr;
    auto take = [&](const TimelineOp* p) {
      if (p != nullptr && p->end_s <= cur->end_s && (pred == nullptr || p->end_s > pred->end_s)) pred = p;
    };
    const Op& o = plan.ops[cur->op];
    if (follow && IsCollective(o.kind)) {
      // It started when every simulated rank of its stage was ready for it
      // (the replay's rule: simulator/src/replay.cc Ready): the path goes on
      // at the one ready last, which with SimOptions::jitter or uneven work
      // need not be this rank.
      for (int rk : ranks) {
        if (plan.StageOf(rk) != o.stage) continue;
        for (OpId d : o.deps) take(span(rk, d));
        take(span(rk, stream_prev[cur->op]));
      }
    }
    if (pred == nullptr) {
      for (OpId d : o.deps) take(d >= 0 ? found(d, cur) : nullptr);
      take(stream_prev[cur->op] >= 0 ? found(stream_prev[cur->op], cur) : nullptr);
    }
    const double wait = std::max(0.0, cur->start_s - (pred != nullptr ? pred->end_s : 0.0));
    r.seconds[kWait] += wait;
    if (pred != nullptr) r.waited[static_cast<int>(TimeClassOf(*cur))] += wait;  // not the start's
    cur = pred;
  }
  std::reverse(r.ops.begin(), r.ops.end());
  std::reverse(r.ranks.begin(), r.ranks.end());
  int best = 0;
  for (int c = 1; c < kWait; ++c)
    if (r.Charged(c) > r.Charged(best)) best = c;
  r.bottleneck = static_cast<TimeClass>(best);
  return r;
}

}  // namespace strata
