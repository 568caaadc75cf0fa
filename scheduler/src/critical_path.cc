#include "strata/scheduler/critical_path.h"

#include <algorithm>
#include <unordered_map>

namespace strata {

CriticalPath AnalyzeCriticalPath(const Plan& plan, const Timeline& t, int rank) {
  CriticalPath r;
  std::unordered_map<OpId, const TimelineOp*> span;
  const TimelineOp* last = nullptr;
  for (const TimelineOp& op : t.ops) {
    if (op.rank != rank) continue;
    span[op.op] = &op;
    if (last == nullptr || op.end_s > last->end_s) last = &op;
  }
  constexpr int kWait = static_cast<int>(TimeClass::kIdle);
  if (last == nullptr) {
    r.seconds[kWait] = t.iteration_s;
    return r;
  }
  // The previous op of each op's stream, in plan order.
  std::vector<OpId> stream_prev(plan.ops.size(), -1);
  std::vector<OpId> tail(static_cast<size_t>(std::max(1, plan.pipeline)) * kNumStreams, -1);
  for (const Op& op : plan.ops) {
    const size_t key = static_cast<size_t>(op.stage) * kNumStreams + static_cast<size_t>(op.stream);
    stream_prev[op.id] = tail[key];
    tail[key] = op.id;
  }
  auto found = [&](OpId id) -> const TimelineOp* {
    auto it = span.find(id);
    return it == span.end() ? nullptr : it->second;
  };
  r.seconds[kWait] += std::max(0.0, t.iteration_s - last->end_s);
  for (const TimelineOp* cur = last; cur != nullptr;) {
    r.ops.push_back(cur->op);
    r.seconds[static_cast<int>(TimeClassOf(*cur))] += cur->end_s - cur->start_s;
    const TimelineOp* pred = nullptr;
    auto consider = [&](OpId id) {
      const TimelineOp* p = id >= 0 ? found(id) : nullptr;
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
