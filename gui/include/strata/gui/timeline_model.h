// What the GUI draws, independent of Qt: a timeline indexed for drawing, and
// the per-pixel-column aggregation that keeps a million ops fast at any zoom.
//
// Aggregation contract: for a view [t0, t1) split into `columns` equal
// columns, column c covers [t0 + c*w, t0 + (c+1)*w).
//  - Memory: each column shows the state in effect during it with the
//    largest total (so peaks are never hidden), split by state kind.
//  - Gantt: each column of a row shows the op that covers most of it (-1 if
//    none; where a column holds more than 64 ops, among the first 64); a run
//    of columns with the same op is one bar.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/scheduler/timeline.h"

namespace strata::gui {

struct GanttRow {
  int rank = 0;
  Stream stream = Stream::kCompute;
  std::vector<int> ops;  // indices into Timeline::ops, by start time (a stream runs one op at a time)
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
  std::vector<int> AggregateGantt(const GanttRow& row, double t0, double t1, int columns) const;
  // The op of `row` running at time t, or -1.
  int OpAt(const GanttRow& row, double t) const;

 private:
  std::shared_ptr<const Timeline> t_;
  std::vector<GanttRow> rows_;
};

}  // namespace strata::gui
