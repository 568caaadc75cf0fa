#include "strata/gui/timeline_model.h"

#include <algorithm>
#include <map>

namespace strata::gui {

TimelineModel::TimelineModel(std::shared_ptr<const Timeline> t) : t_(std::move(t)) {
  // One row per (rank, stream) that has ops, ordered by rank then stream.
  std::map<std::pair<int, int>, size_t> index;
  for (const TimelineOp& op : t_->ops) index.emplace(std::make_pair(op.rank, static_cast<int>(op.stream())), 0);
  for (auto& [key, slot] : index) {
    slot = rows_.size();
    rows_.push_back({key.first, static_cast<Stream>(key.second), {}});
  }
  for (size_t i = 0; i < t_->ops.size(); ++i) {
    const TimelineOp& op = t_->ops[i];
    rows_[index[{op.rank, static_cast<int>(op.stream())}]].ops.push_back(static_cast<int>(i));
  }
  for (auto& row : rows_) {
    std::stable_sort(row.ops.begin(), row.ops.end(),
                     [&](int a, int b) { return t_->ops[a].start_s < t_->ops[b].start_s; });
    row.busy_before.assign(1, 0.0);
    for (int op : row.ops)
      row.busy_before.push_back(row.busy_before.back() + std::max(0.0, t_->ops[op].end_s - t_->ops[op].start_s));
    if (ranks_.empty() || ranks_.back() != row.rank) ranks_.push_back(row.rank);  // rows are by rank
  }
}

double TimelineModel::BusyBefore(const GanttRow& row, double t) const {
  // Whole ops ending by t, plus the part of the one running at t (ops of
  // one stream do not overlap).
  const auto& ops = t_->ops;
  const auto it =
      std::lower_bound(row.ops.begin(), row.ops.end(), t, [&](int op, double x) { return ops[op].end_s <= x; });
  double v = row.busy_before[static_cast<size_t>(it - row.ops.begin())];
  if (it != row.ops.end() && ops[*it].start_s < t) v += t - ops[*it].start_s;
  return v;
}

double TimelineModel::BusySeconds(const GanttRow& row, double a, double b) const {
  return b > a ? BusyBefore(row, b) - BusyBefore(row, a) : 0.0;
}

std::string TimelineModel::RanksNote() const {
  const int world = t_->world_size, shown = static_cast<int>(ranks_.size());
  if (shown == 0 || shown >= world) return {};
  const int per_node = std::max(1, t_->gpus_per_node);
  const bool one_node =
      shown == per_node && ranks_.front() % per_node == 0 && ranks_.back() == ranks_.front() + shown - 1;
  if (one_node) {
    const int node = ranks_.front() / per_node, others = world / per_node - 1;
    return "node " + std::to_string(node) + " simulated (ranks " + std::to_string(ranks_.front()) + "-" +
           std::to_string(ranks_.back()) + " of " + std::to_string(world) + "); " + std::to_string(others) +
           " identical node" + (others == 1 ? "" : "s") + " not drawn (SPMD symmetry: the same schedule)";
  }
  return std::to_string(shown) + " of " + std::to_string(world) + " ranks in this timeline";
}

std::vector<int> TimelineModel::SeriesOf(Tier tier) const {
  std::vector<int> out;
  for (size_t i = 0; i < t_->memory.size(); ++i)
    if (t_->memory[i].tier == tier) out.push_back(static_cast<int>(i));
  return out;
}

std::vector<MemoryColumn> TimelineModel::AggregateMemory(int series, double t0, double t1, int columns) const {
  std::vector<MemoryColumn> out(static_cast<size_t>(std::max(columns, 0)));
  if (series < 0 || series >= static_cast<int>(t_->memory.size()) || columns <= 0 || t1 <= t0) return out;
  const auto& pts = t_->memory[series].points;
  if (pts.empty()) return out;
  const double w = (t1 - t0) / columns;
  // The point in effect at t0: the last one at or before it (or the first).
  auto it = std::upper_bound(pts.begin(), pts.end(), t0, [](double t, const MemoryPoint& p) { return t < p.t; });
  size_t i = it == pts.begin() ? 0 : static_cast<size_t>(it - pts.begin()) - 1;
  for (int c = 0; c < columns; ++c) {
    const double a = t0 + c * w, b = a + w;
    MemoryColumn& col = out[static_cast<size_t>(c)];
    if (a > t_->iteration_s) break;
    // Every point in effect during [a, b): the current one and those starting before b.
    size_t j = i;
    do {
      const MemoryPoint p = pts[j];  // a value: the series stores its points by column
      const Bytes tot = p.total();
      if (!col.valid || tot > col.total) {
        col.valid = true;
        col.total = tot;
        std::copy(std::begin(p.by_kind), std::end(p.by_kind), std::begin(col.by_kind));
      }
      ++j;
    } while (j < pts.size() && pts.time(j) < b);
    i = j - 1;
  }
  return out;
}

std::vector<GanttColumn> TimelineModel::AggregateGantt(const GanttRow& row, double t0, double t1, int columns) const {
  std::vector<GanttColumn> out(static_cast<size_t>(std::max(columns, 0)));
  if (columns <= 0 || t1 <= t0 || row.ops.empty()) return out;
  const double w = (t1 - t0) / columns;
  const auto& ops = t_->ops;
  // First op ending after t0 (ends are ordered like starts on one stream).
  auto it = std::lower_bound(row.ops.begin(), row.ops.end(), t0, [&](int op, double t) { return ops[op].end_s <= t; });
  std::vector<double> best(out.size(), 0.0);
  for (; it != row.ops.end(); ++it) {
    const TimelineOp& op = ops[*it];
    if (op.start_s >= t1) break;
    const double s = std::max(op.start_s, t0), e = std::min(op.end_s, t1);
    int c0 = static_cast<int>((s - t0) / w), c1 = static_cast<int>((e - t0) / w);
    c0 = std::clamp(c0, 0, columns - 1);
    c1 = std::clamp(c1, 0, columns - 1);
    if (c1 - c0 > 1) {
      // Fully covered columns in the middle.
      for (int c = c0 + 1; c < c1; ++c) {
        out[c].op = *it;
        best[c] = w;
      }
    }
    for (int c : {c0, c1}) {
      const double a = t0 + c * w;
      const double cover = std::min(e, a + w) - std::max(s, a);
      // Zero-length ops still show when nothing else is there.
      if (out[c].op < 0 || cover > best[c]) {
        out[c].op = *it;
        best[c] = std::max(cover, 0.0);
      }
    }
    // Dense rows: skip the ops that fall inside the column just filled.
    if (c1 == c0 && c0 + 1 < columns) {
      const double next = t0 + (c0 + 1) * w;
      auto jump = std::lower_bound(it, row.ops.end(), next, [&](int o, double t) { return ops[o].end_s <= t; });
      if (jump - it > 64) it = jump - 1;
    }
  }
  // Busy shares from the busy time before each column boundary, each
  // boundary looked up once (a column's end is the next one's start).
  double before = BusyBefore(row, t0);
  for (int c = 0; c < columns; ++c) {
    const double after = BusyBefore(row, t0 + (c + 1) * w);
    if (out[c].op >= 0) out[c].busy = std::clamp((after - before) / w, 0.0, 1.0);
    before = after;
  }
  return out;
}

int TimelineModel::OpAt(const GanttRow& row, double t) const {
  const auto& ops = t_->ops;
  auto it = std::lower_bound(row.ops.begin(), row.ops.end(), t, [&](int op, double x) { return ops[op].end_s < x; });
  if (it != row.ops.end() && ops[*it].start_s <= t && t <= ops[*it].end_s) return *it;
  return -1;
}

}  // namespace strata::gui
