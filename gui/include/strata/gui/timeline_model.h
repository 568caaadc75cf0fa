// What the GUI draws, independent of Qt: a timeline indexed for drawing, and
// the per-pixel-column aggregation that keeps a million ops fast at any zoom.
//
// Aggregation contract: for a view [t0, t1) split into `columns` equal
// columns, column c covers [t0 + c*w, t0 + (c+1)*w).
//  - Memory: each column shows the state in effect during it with the
//    largest total (so peaks are never hidden), split by state kind.
//  - Gantt: each column of a row gives the op that covers most of it (-1 if
//    none; where a column holds more than 64 ops, among the first 64), which
//    colours it, and the fraction of the column's time the stream is busy
//    (exact, from prefix sums), which sets the bar's height: zoomed out, a
//    compute row 15% idle shows 15% of its height empty instead of a solid
//    bar.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/timeline/timeline.h"

namespace strata::gui {

struct GanttRow {
  int rank = 0;
  Stream stream = Stream::kCompute;
  std::vector<int> ops;             // indices into Timeline::ops, by start time (a stream runs one op at a time)
  std::vector<double> busy_before;  // busy_before[i]: summed durations of ops[0..i)
};

struct GanttColumn {
  int op = -1;      // the op covering most of the column, -1 if none
  double busy = 0;  // fraction of the column's time covered by ops, in [0, 1]
};

struct MemoryColumn {
  Bytes by_kind[kNumStateKinds];
  Bytes total;
  bool valid = false;
};

class TimelineModel {
 public:
  explicit TimelineModel(std::shared_ptr<const Timeline> t);

  const Timeline& timeline() const { return *t_; }
  std::shared_ptr<const Timeline> shared() const { return t_; }
  const std::vector<GanttRow>& rows() const { return rows_; }
  // Indices into Timeline::memory of the series of `tier`, by owner.
  std::vector<int> SeriesOf(Tier tier) const;
  double end_s() const { return t_->iteration_s; }

  std::vector<MemoryColumn> AggregateMemory(int series, double t0, double t1, int columns) const;
  std::vector<GanttColumn> AggregateGantt(const GanttRow& row, double t0, double t1, int columns) const;
  // Seconds of [a, b) during which `row`'s stream runs an op.
  double BusySeconds(const GanttRow& row, double a, double b) const;
  // The ranks that have ops, ascending.
  const std::vector<int>& ranks() const { return ranks_; }
  // When the timeline holds fewer ranks than the world (the simulator
  // simulates one node under SPMD symmetry), a sentence saying which are
  // drawn and that the others are identical; "" when all are there.
  std::string RanksNote() const;
  // The op of `row` running at time t, or -1.
  int OpAt(const GanttRow& row, double t) const;

 private:
  std::shared_ptr<const Timeline> t_;
  // Seconds before t during which `row`'s stream runs an op.
  double BusyBefore(const GanttRow& row, double t) const;

  std::vector<GanttRow> rows_;
  std::vector<int> ranks_;
};

}  // namespace strata::gui
