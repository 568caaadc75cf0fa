// The two chart widgets. Both paint from TimelineModel aggregations, one
// column per pixel, so painting costs O(width x rows + ops in view).
// Mouse wheel zooms around the cursor, dragging pans; both go through the
// shared TimeAxis.
#pragma once

#include <QWidget>
#include <memory>

#include "strata/gui/time_axis.h"
#include "strata/gui/timeline_model.h"

namespace strata::gui {

QColor KindColor(StateKind k);
QColor OpColor(OpKind k);
QString FormatSeconds(double s);

// Shared interaction: a chart area starting `left_` pixels from the left.
class TimeChart : public QWidget {
  Q_OBJECT
 public:
  TimeChart(std::shared_ptr<const TimelineModel> model, TimeAxis* axis, QWidget* parent);
  TimeAxis* axis() const { return axis_; }
  int plot_left() const { return left_; }
  int plot_width() const { return std::max(1, width() - left_ - right_); }
  int right_margin() const { return right_; }
  void SetRightMargin(int px) {
    right_ = px;
    update();
  }
  double TimeAtX(int x) const;
  int XAtTime(double t) const;
  // Hover text at a widget position ("" where there is nothing to say);
  // shown as a tooltip while the mouse moves without dragging.
  virtual QString TipAt(QPoint) const { return {}; }

 protected:
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void DrawTimeTicks(QPainter& p, int y);

  std::shared_ptr<const TimelineModel> model_;
  TimeAxis* axis_;
  int left_ = 120, right_ = 12;
  int drag_x_ = -1;
};

// A memory axis: its top, and round ticks in one unit (the one that suits
// the top; a step of 1, 2 or 5 x 10^k of it, about four ticks).
struct ByteScale {
  double top = 1, step = 1, unit = 1;
  const char* name = "B";
  QString Label(double bytes) const;  // "2 GiB"
};
ByteScale ScaleFor(double max_bytes);

// Stacked memory by state kind for one series, with the tier's capacity.
class MemoryChart : public TimeChart {
  Q_OBJECT
 public:
  MemoryChart(std::shared_ptr<const TimelineModel> model, TimeAxis* axis, Tier tier, QWidget* parent = nullptr);
  void SetSeries(int series);
  int series() const { return series_; }
  Tier tier() const { return tier_; }
  // The columns as last painted (for tests).
  const std::vector<MemoryColumn>& columns() const { return columns_; }
  QSize sizeHint() const override { return {900, 150}; }
  // The time, the total and each state kind's bytes of the column painted
  // there ("" outside the plot).
  QString TipAt(QPoint pos) const override;

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  Tier tier_;
  int series_ = -1;
  std::vector<MemoryColumn> columns_;
};

// One row per (rank, stream), ops as bars coloured by kind, each pixel
// column as tall as the share of its time the stream is busy; hover shows
// the op and, zoomed out, the column's busy share.
class GanttChart : public TimeChart {
  Q_OBJECT
 public:
  GanttChart(std::shared_ptr<const TimelineModel> model, TimeAxis* axis, QWidget* parent = nullptr);
  QSize sizeHint() const override;
  static constexpr int kRowHeight = 16;
  static constexpr int kTop = 4, kBottom = 22;
  // The op at a widget position ("" when no op is there).
  QString TipAt(QPoint pos) const override;
  // Rows of one rank only (collapsing the others), or of all (-1).
  void ShowRank(int rank);
  int shown_rank() const { return rank_; }
  // Indices into model rows() of the rows drawn, top to bottom.
  const std::vector<size_t>& visible_rows() const { return visible_; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  int rank_ = -1;
  std::vector<size_t> visible_;
};

}  // namespace strata::gui
