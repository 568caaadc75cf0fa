#include "strata/scheduler/critical_path.h"

#include <algorithm>
#include <unordered_map>

namespace strata {

CriticalPath AnalyzeCriticalPath(const Plan& plan, const Timeline& t, int rank) {
  CriticalPath r;
  // Spans of every rank: a receive's chain continues at its send, on the
  // rank at its position in the sending stage; a collective's at whichever
  // member of its group was ready last.
  auto key = [](int rk, OpId op) { return (static_cast<int64_t>(rk) << 32) | static_cast<uint32_t>(op); };
  std::unordered_map<int64_t, const TimelineOp*> span;
  span.reserve(t.ops.size());
  const TimelineOp* last = nullptr;
  for (const TimelineOp& op : t.ops) {
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
    auto take = [&](const TimelineOp* p) {
      if (p != nullptr && p->end_s <= cur->end_s && (pred == nullptr || p->end_s > pred->end_s)) pred = p;
    };
    const Op& o = plan.ops[cur->op];
    if (IsCollective(o.kind) && o.group >= 0 && static_cast<size_t>(o.group) < plan.groups.size()) {
      // It started when its last member was ready: the path goes on at that
      // member (those simulated), which with SimOptions::jitter or uneven
      // work need not be this rank.
      for (int member : plan.groups[static_cast<size_t>(o.group)].ranks) {
        const int rk = plan.StageOf(member) == o.stage ? member : plan.PeerRank(member, o.stage);
        for (OpId d : o.deps)
          if (auto it = span.find(key(rk, d)); it != span.end()) take(it->second);
        if (const OpId sp = stream_prev[cur->op]; sp >= 0)
          if (auto it = span.find(key(rk, sp)); it != span.end()) take(it->second);
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
  int best = 0;
  for (int c = 1; c < kWait; ++c)
    if (r.Charged(c) > r.Charged(best)) best = c;
  r.bottleneck = static_cast<TimeClass>(best);
  return r;
}

}  // namespace strata
