#include "strata/gui/charts.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <vector>

namespace strata::gui {

QColor KindColor(StateKind k) {
  static const QColor kColors[kNumStateKinds] = {
      QColor(0x4e, 0x79, 0xa7),  // param16
      QColor(0xf2, 0x8e, 0x2b),  // grad
      QColor(0x59, 0xa1, 0x4f),  // master32
      QColor(0x76, 0xb7, 0xb2),  // moments
      QColor(0xed, 0xc9, 0x48),  // activation
      QColor(0xb0, 0x7a, 0xa1),  // swap_buffer
      QColor(0x9c, 0x75, 0x5f),  // gather_buffer
      QColor(0xe1, 0x57, 0x59),  // comm_buffer
  };
  return kColors[static_cast<int>(k)];
}

QColor OpColor(OpKind k) {
  static const QColor kColors[kNumOpKinds] = {
      QColor(0x4e, 0x79, 0xa7), QColor(0x2f, 0x4b, 0x7c),                            // forward, backward
      QColor(0x59, 0xa1, 0x4f), QColor(0x8c, 0xd1, 0x7d),                            // h2d, d2h
      QColor(0xf2, 0x8e, 0x2b), QColor(0xff, 0xbe, 0x7d),                            // nvme read, write
      QColor(0xe1, 0x57, 0x59), QColor(0xff, 0x9d, 0x9a), QColor(0xb6, 0x99, 0x2d),  // collectives
      QColor(0xb0, 0x7a, 0xa1),                                                      // optimizer
      QColor(0x76, 0xb7, 0xb2), QColor(0x9c, 0xd6, 0xd1),                            // pipeline send, receive
      QColor(0x9d, 0x75, 0x5d),                                                      // host hooks
  };
  return kColors[static_cast<int>(k)];
}

// Below a nanosecond reads as 0 (an idle of 4e-14 s is rounding, not time).
QString FormatSeconds(double s) {
  return std::abs(s) < 1e-9 ? QString("0") : QString::fromStdString(FormatDuration(s));
}

static QString FormatBytesQ(Bytes b) { return QString::fromStdString(FormatBytes(b)); }

ByteScale ScaleFor(double max_bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  ByteScale s;
  int u = 0;
  while (max_bytes / s.unit >= 1024 && u < 5) s.unit *= 1024, ++u;
  s.name = kNames[u];
  const double raw = std::max(max_bytes / s.unit / 4, 1e-9);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  s.step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag * s.unit;
  s.top = std::ceil(max_bytes / s.step) * s.step;
  return s;
}

QString ByteScale::Label(double bytes) const { return QString::number(bytes / unit, 'g', 6) + " " + name; }

TimeChart::TimeChart(std::shared_ptr<const TimelineModel> model, TimeAxis* axis, QWidget* parent)
    : QWidget(parent), model_(std::move(model)), axis_(axis) {
  setMouseTracking(true);
  connect(axis_, &TimeAxis::Changed, this, qOverload<>(&QWidget::update));
}

double TimeChart::TimeAtX(int x) const {
  return axis_->t0() + (x - left_) * (axis_->t1() - axis_->t0()) / plot_width();
}

int TimeChart::XAtTime(double t) const {
  return left_ + static_cast<int>(std::lround((t - axis_->t0()) / (axis_->t1() - axis_->t0()) * plot_width()));
}

void TimeChart::wheelEvent(QWheelEvent* e) {
  const int dy = e->angleDelta().y();
  if (dy == 0) return;
  const double at = TimeAtX(static_cast<int>(e->position().x()));
  axis_->ZoomAt(at, std::pow(0.8, dy / 120.0));
  e->accept();
}

void TimeChart::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) drag_x_ = static_cast<int>(e->position().x());
  if (e->button() == Qt::RightButton) axis_->Reset();
}

void TimeChart::mouseMoveEvent(QMouseEvent* e) {
  if (drag_x_ < 0) {  // not dragging: the hover text
    const QString tip = TipAt(e->position().toPoint());
    if (tip.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(e->globalPosition().toPoint(), tip, this);
    return;
  }
  if (!(e->buttons() & Qt::LeftButton)) return;
  const int x = static_cast<int>(e->position().x());
  axis_->Pan((drag_x_ - x) * (axis_->t1() - axis_->t0()) / plot_width());
  drag_x_ = x;
}

void TimeChart::mouseReleaseEvent(QMouseEvent*) { drag_x_ = -1; }

void TimeChart::DrawTimeTicks(QPainter& p, int y) {
  const double span = axis_->t1() - axis_->t0();
  const double raw = span / 8;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  p.setPen(QColor(0x66, 0x66, 0x66));
  for (double t = std::ceil(axis_->t0() / step) * step; t <= axis_->t1(); t += step) {
    const int x = XAtTime(t);
    p.drawLine(x, y, x, y + 4);
    p.drawText(QRect(x - 50, y + 4, 100, 14), Qt::AlignHCenter | Qt::AlignTop, FormatSeconds(t));
  }
}

MemoryChart::MemoryChart(std::shared_ptr<const TimelineModel> model, TimeAxis* axis, Tier tier, QWidget* parent)
    : TimeChart(std::move(model), axis, parent), tier_(tier) {
  const auto s = model_->SeriesOf(tier);
  series_ = s.empty() ? -1 : s.front();
  setMinimumHeight(110);
}

void MemoryChart::SetSeries(int series) {
  series_ = series;
  update();
}

void MemoryChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  const int top = 16, bottom = height() - 20, w = plot_width();
  const Timeline& t = model_->timeline();
  const Bytes cap = t.capacity[static_cast<int>(tier_)];
  columns_ = model_->AggregateMemory(series_, axis_->t0(), axis_->t1(), w);
  Bytes peak = series_ >= 0 ? t.memory[series_].peak : Bytes(0);
  // Scale to the capacity when it is in the picture, else to the peak (a
  // 1 GiB line over 4 MiB of use would flatten everything).
  const bool cap_on_scale = cap.v > 0 && cap.v <= 3 * std::max<int64_t>(peak.v, 1);
  const ByteScale scale = ScaleFor(std::max(
      cap_on_scale ? static_cast<double>(std::max(peak.v, cap.v)) * 1.05 : static_cast<double>(peak.v) * 1.15, 1.0));
  const double ymax = scale.top;
  auto y_of = [&](double bytes) { return bottom - (bottom - top) * bytes / ymax; };
  // Horizontal grid at the round ticks below the top, each labelled with its
  // bytes in the axis' one unit.
  std::vector<double> ticks;
  for (double v = scale.step; v < ymax - scale.step / 2; v += scale.step) ticks.push_back(v);
  p.setPen(QColor(0xe4, 0xe4, 0xe4));
  for (double v : ticks) p.drawLine(QPointF(left_, y_of(v)), QPointF(left_ + w, y_of(v)));
  for (int c = 0; c < w; ++c) {
    const MemoryColumn& col = columns_[static_cast<size_t>(c)];
    if (!col.valid) continue;
    double acc = 0;
    for (int k = 0; k < kNumStateKinds; ++k) {
      const double v = static_cast<double>(col.by_kind[k].v);
      if (v <= 0) continue;
      const double y0 = y_of(acc), y1 = y_of(acc + v);
      p.fillRect(QRectF(left_ + c, y1, 1, y0 - y1), KindColor(static_cast<StateKind>(k)));
      acc += v;
    }
  }
  // Capacity line, or a note when it is far above.
  QPen pen(QColor(0xc0, 0x00, 0x00));
  pen.setStyle(Qt::DashLine);
  p.setPen(pen);
  if (cap_on_scale) {
    // The line, and its label just above it at the right (the ticks'
    // labels are at the left).
    const double y = y_of(static_cast<double>(cap.v));
    p.drawLine(QPointF(left_, y), QPointF(left_ + w, y));
    p.drawText(QRectF(left_ + 4, y - 15, w - 8, 14), Qt::AlignRight | Qt::AlignBottom, "capacity " + FormatBytesQ(cap));
  } else if (cap.v > 0) {
    p.drawText(QRect(left_ + 4, 0, w - 8, top), Qt::AlignRight | Qt::AlignVCenter,
               "capacity " + FormatBytesQ(cap) + " (above the scale)");
  }
  p.setPen(QColor(0x66, 0x66, 0x66));
  p.drawText(QRect(left_ + 4, top, 200, 14), Qt::AlignLeft | Qt::AlignVCenter, scale.Label(ymax));
  p.setPen(Qt::black);
  p.drawLine(left_, bottom, left_ + w, bottom);
  p.drawLine(left_, top, left_, bottom);
  const QString owner = series_ >= 0 ? QString::number(t.memory[series_].owner) : QString("-");
  const QString who = tier_ == Tier::kGpu ? "rank " + owner : "node " + owner;
  p.drawText(QRect(4, top, left_ - 8, 16), Qt::AlignLeft, QString(TierName(tier_).data()).toUpper() + " " + who);
  p.setPen(QColor(0x88, 0x88, 0x88));
  for (double v : ticks) {                  // the grid's labels, inside the plot just above their line
    if (y_of(v) - 14 < top + 14) continue;  // would overlap the top's label
    const QString label = scale.Label(v);
    const QRectF box(left_ + 2, y_of(v) - 14, p.fontMetrics().horizontalAdvance(label) + 4, 13);
    p.fillRect(box, QColor(255, 255, 255, 200));  // readable over the stacked colours
    p.drawText(box, Qt::AlignCenter, label);
  }
  p.setPen(QColor(0x44, 0x44, 0x44));
  p.drawText(QRect(4, top + 16, left_ - 8, 16), Qt::AlignLeft, "peak " + FormatBytesQ(peak));
  p.drawText(QRect(4, top + 32, left_ - 8, 16), Qt::AlignLeft, "cap " + FormatBytesQ(cap));
  DrawTimeTicks(p, bottom);
}

QString MemoryChart::TipAt(QPoint pos) const {
  const int c = pos.x() - left_;
  if (c < 0 || c >= static_cast<int>(columns_.size()) || !columns_[static_cast<size_t>(c)].valid) return {};
  const MemoryColumn& col = columns_[static_cast<size_t>(c)];
  QString tip =
      QString("<b>%1</b> at %2<br>total <b>%3</b>")
          .arg(QString(TierName(tier_).data()).toUpper(), FormatSeconds(TimeAtX(pos.x())), FormatBytesQ(col.total));
  for (int k = 0; k < kNumStateKinds; ++k)
    if (col.by_kind[k].v > 0)
      tip += QString("<br>%1: %2").arg(StateKindName(static_cast<StateKind>(k)).data(), FormatBytesQ(col.by_kind[k]));
  return tip;
}

GanttChart::GanttChart(std::shared_ptr<const TimelineModel> model, TimeAxis* axis, QWidget* parent)
    : TimeChart(std::move(model), axis, parent) {
  ShowRank(-1);
}

void GanttChart::ShowRank(int rank) {
  rank_ = rank;
  visible_.clear();
  const auto& rows = model_->rows();
  for (size_t r = 0; r < rows.size(); ++r)
    if (rank < 0 || rows[r].rank == rank) visible_.push_back(r);
  setMinimumHeight(sizeHint().height());
  updateGeometry();
  update();
}

QSize GanttChart::sizeHint() const { return {900, kTop + kBottom + kRowHeight * static_cast<int>(visible_.size())}; }

void GanttChart::paintEvent(QPaintEvent* e) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  const int w = plot_width();
  const auto& rows = model_->rows();
  const auto& ops = model_->timeline().ops;
  const QRect dirty = e->rect();
  const int bar = kRowHeight - 4;
  for (size_t v = 0; v < visible_.size(); ++v) {
    const GanttRow& row = rows[visible_[v]];
    const int y = kTop + static_cast<int>(v) * kRowHeight;
    if (y + kRowHeight < dirty.top() || y > dirty.bottom()) continue;
    if (v % 2 == 1) p.fillRect(left_, y, w, kRowHeight, QColor(0xf4, 0xf4, 0xf4));
    p.setPen(Qt::black);
    p.drawText(QRect(4, y, left_ - 8, kRowHeight), Qt::AlignLeft | Qt::AlignVCenter,
               QString("r%1 %2").arg(row.rank).arg(StreamName(row.stream).data()));
    const std::vector<GanttColumn> cols = model_->AggregateGantt(row, axis_->t0(), axis_->t1(), w);
    // A column's bar rises from the row's bottom to its busy share (at
    // least a pixel when anything runs); runs of equal columns are one rect.
    auto height = [&](const GanttColumn& c) {
      return c.op < 0 ? 0 : std::max(1, static_cast<int>(std::lround(c.busy * bar)));
    };
    for (int c = 0; c < w;) {
      const GanttColumn& col = cols[static_cast<size_t>(c)];
      const int h = height(col);
      int c1 = c + 1;
      while (c1 < w && cols[static_cast<size_t>(c1)].op == col.op && height(cols[static_cast<size_t>(c1)]) == h) ++c1;
      if (col.op >= 0) {
        p.fillRect(left_ + c, y + 2 + bar - h, c1 - c, h, OpColor(ops[static_cast<size_t>(col.op)].kind()));
        if (c1 - c > 60 && h == bar) {
          p.setPen(Qt::white);
          p.drawText(QRect(left_ + c + 2, y, c1 - c - 4, kRowHeight), Qt::AlignLeft | Qt::AlignVCenter,
                     QString::fromStdString(ops[static_cast<size_t>(col.op)].name()));
        }
      }
      c = c1;
    }
  }
  const int bottom = kTop + static_cast<int>(visible_.size()) * kRowHeight;
  p.setPen(Qt::black);
  p.drawLine(left_, bottom, left_ + w, bottom);
  DrawTimeTicks(p, bottom);
}

QString GanttChart::TipAt(QPoint pos) const {
  const int r = (pos.y() - kTop) / kRowHeight;
  if (pos.y() < kTop || r < 0 || r >= static_cast<int>(visible_.size()) || pos.x() < left_) return {};
  const auto& row = model_->rows()[visible_[static_cast<size_t>(r)]];
  // Within a pixel: the op covering the pixel's time range.
  const double t = TimeAtX(pos.x()), t1 = TimeAtX(pos.x() + 1);
  int op = model_->OpAt(row, t);
  if (op < 0) op = model_->AggregateGantt(row, t, t1, 1).front().op;
  if (op < 0) return {};
  const TimelineOp& o = model_->timeline().ops[static_cast<size_t>(op)];
  QString amount = o.flops() > 0 ? QString::number(o.flops(), 'g', 4) + " FLOP" : FormatBytesQ(o.bytes());
  QString tip = QString("<b>%1</b><br>%2 on %3, rank %4, layer %5<br>%6<br>start %7, end %8 (%9)")
                    .arg(QString::fromStdString(o.name()).toHtmlEscaped(), OpKindName(o.kind()).data(),
                         StreamName(o.stream()).data())
                    .arg(o.rank)
                    .arg(o.layer())
                    .arg(amount, FormatSeconds(o.start_s), FormatSeconds(o.end_s), FormatSeconds(o.end_s - o.start_s));
  // Zoomed out, a pixel spans several ops or idle gaps: say how busy it is.
  if (o.end_s - o.start_s < t1 - t)
    tip += QString("<br>this pixel (%1): %2% busy")
               .arg(FormatSeconds(t1 - t))
               .arg(100 * model_->BusySeconds(row, t, t1) / (t1 - t), 0, 'f', 0);
  return tip;
}

}  // namespace strata::gui
