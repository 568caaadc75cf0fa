#include "strata/scheduler/critical_path.h"

#include <algorithm>
#include <unordered_map>

namespace strata {

CriticalPath AnalyzeCriticalPath(const Plan& plan, const Timeline& t, int rank) {
  CriticalPath r;
  // Spans of the rank, and with pipeline stages of the ranks at its position
  // in the other stages: a receive's chain continues at its send.
  const int per_stage = plan.RanksPerStage();
  auto key = [](int rk, OpId op) { return (static_cast<int64_t>(rk) << 32) | static_cast<uint32_t>(op); };
  std::unordered_map<int64_t, const TimelineOp*> span;
  const TimelineOp* last = nullptr;
  for (const TimelineOp& op : t.ops) {
    if (op.rank % per_stage != rank % per_stage) continue;
    span[key(op.rank, op.op)] = &op;
    if (op.rank == rank && (last == nullptr || op.end_s > last->end_s)) last = &op;
  }
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
    const int rk = stage == plan.ops[static_cast<size_t>(from->op)].stage ? from->rank : plan.PeerRank(from->rank, stage);
    auto it = span.find(key(rk, id));
    return it == span.end() ? nullptr : it->second;
  };
  r.seconds[kWait] += std::max(0.0, t.iteration_s - last->end_s);
  for (const TimelineOp* cur = last; cur != nullptr;) {
    r.ops.push_back(cur->op);
    r.seconds[static_cast<int>(TimeClassOf(*cur))] += cur->end_s - cur->start_s;
    const TimelineOp* pred = nullptr;
    auto consider = [&](OpId id) {
      const TimelineOp* p = id >= 0 ? found(id, cur) : nullptr;
      if (p != nullptr && p->end_s <= cur->end_s && (pred == nullptr || p->end_s > pred->end_s)) pred = p;
    };
    for (OpId d : plan.ops[cur->op].deps) consider(d);
    consider(stream_prev[cur->op]);
    const double wait = std::max(0.0, cur->start_s - (pred != nullptr ? pred->end_s : 0.0));
    r.seconds[kWait] += wait;
    if (pred != nullptr) r.waited[static_cast<int>(TimeClassOf(*cur))] += wait;  // not the start's
    cur = pred;
  }
  std::reverse(r.ops.begin(), r.ops.end());
  int best = 0;
  for (int c = 1; c < kWait; ++c)
    if (r.Charged(c) > r.Charged(best)) best = c;
  r.bottleneck = static_cast<TimeClass>(best);
  return r;
}

}  // namespace strata
