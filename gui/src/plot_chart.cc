#include "strata/gui/plot_chart.h"

#include <QPainter>
#include <QPainterPath>
#include <QSvgGenerator>
#include <algorithm>
#include <cmath>
#include <limits>

#include "strata/core/units.h"

namespace strata::gui {
namespace {

// "Nice" tick step for a span: 1, 2 or 5 times a power of ten, about n ticks.
double NiceStep(double span, int n) {
  const double raw = span / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

QString FormatY(double v, const std::string& unit) {
  if (unit == "s") return v == 0 ? QString("0") : QString::fromStdString(FormatDuration(v));
  if (unit == "B") return QString::fromStdString(FormatBytes(Bytes(static_cast<int64_t>(std::llround(v)))));
  return QString::number(v, 'g', 4);
}

}  // namespace

QColor SeriesColor(int i) {
  static const QColor kPalette[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0x59, 0xa1, 0x4f),
                                    QColor(0xb0, 0x7a, 0xa1), QColor(0x76, 0xb7, 0xb2), QColor(0xed, 0xc9, 0x48),
                                    QColor(0x9c, 0x75, 0x5f), QColor(0xff, 0x9d, 0xa7), QColor(0xba, 0xb0, 0xac),
                                    QColor(0x2f, 0x4b, 0x7c)};
  return kPalette[i % 10];
}

namespace {

// A series' pen: its colour (Series::color, else its index) and line style.
QColor ColorOf(const LinePlot& plot, size_t i) {
  const int c = plot.series[i].color;
  return SeriesColor(c >= 0 ? c : static_cast<int>(i));
}
Qt::PenStyle StyleOf(int dash) {
  static const Qt::PenStyle kStyles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine};
  return kStyles[std::clamp(dash, 0, 3)];
}

// The two marks, drawn the same in the plot and in its legend: a point
// that fits, and one that does not (a cross, in its series' colour).
void Dot(QPainter& p, QPointF at, const QColor& c, double radius = 3.5) {
  p.setPen(QPen(Qt::white, 1));
  p.setBrush(c);
  p.drawEllipse(at, radius, radius);
  p.setBrush(Qt::NoBrush);
}
void Cross(QPainter& p, QPointF at, const QColor& c) {
  p.setPen(QPen(c, 2));
  p.drawLine(at + QPointF(-4, -4), at + QPointF(4, 4));
  p.drawLine(at + QPointF(-4, 4), at + QPointF(4, -4));
}

// Where a plot's parts go in `area`, and how its values map there.
struct PlotFrame {
  QRect r;  // the data rectangle
  double x0 = 0, x1 = 1, ylo = 0, yhi = 1, ystep = 1;
  bool x_log = false;
  std::vector<std::pair<QString, int>> entries;  // legend: text, series index (-1: does not fit)
  int entry_w = 0, row_h = 0, per_row = 1, title_h = 0;
  double X(double x) const { return r.left() + ((x_log ? std::log(x) : x) - x0) / (x1 - x0) * r.width(); }
  double Y(double y) const { return r.bottom() - (y - ylo) / (yhi - ylo) * r.height(); }
};

PlotFrame FrameOf(const LinePlot& plot, QRect area, const QFontMetrics& fm) {
  PlotFrame f;
  f.x_log = plot.x_log;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y1 = 0, ymin = 0;
  bool any_infeasible = false;
  for (const auto& s : plot.series)
    for (const auto& pt : s.points) {
      const double x = plot.x_log ? std::log(pt.x) : pt.x;
      x0 = std::min(x0, x), x1 = std::max(x1, x);
      if (pt.has_y)
        y1 = std::max(y1, pt.y), ymin = std::min(ymin, pt.y);
      else
        any_infeasible = true;
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;
  if (x1 - x0 <= 0) x0 -= 1, x1 += 1;
  const double pad = (x1 - x0) * 0.04;
  f.x0 = x0 - pad, f.x1 = x1 + pad;
  if (y1 <= ymin) y1 = ymin + 1;
  f.ystep = NiceStep(y1 - ymin, 5);
  f.ylo = std::floor(ymin / f.ystep) * f.ystep, f.yhi = std::ceil(y1 * 1.02 / f.ystep) * f.ystep;
  // The legend goes below the x axis label, never over the data: the
  // series (when named) and the cross, in as many columns as fit.
  for (size_t i = 0; i < plot.series.size(); ++i)
    if (!plot.series[i].name.empty())
      f.entries.emplace_back(QString::fromStdString(plot.series[i].name), static_cast<int>(i));
  if (any_infeasible) f.entries.emplace_back("does not fit (no figure)", -1);
  for (const auto& e : f.entries) f.entry_w = std::max(f.entry_w, fm.horizontalAdvance(e.first) + 56);
  f.row_h = fm.height() + 4;
  f.per_row =
      f.entries.empty()
          ? 1
          : std::max(1, std::min<int>(static_cast<int>(f.entries.size()), (area.width() - 8) / std::max(f.entry_w, 1)));
  const int legend_rows = (static_cast<int>(f.entries.size()) + f.per_row - 1) / f.per_row;
  const int legend_h = f.entries.empty() ? 0 : legend_rows * f.row_h + 10;
  // Room for the y tick labels, the axis labels, the title and the legend.
  int tick_w = 0;
  for (double v = f.ylo; v <= f.yhi + f.ystep / 2; v += f.ystep)
    tick_w = std::max(tick_w, fm.horizontalAdvance(FormatY(v, plot.y_unit)));
  f.title_h = plot.title.empty() ? 8 : fm.height() + 14;
  f.r =
      QRect(area.left() + tick_w + fm.height() + 18, area.top() + f.title_h,
            area.width() - tick_w - fm.height() - 18 - 16, area.height() - f.title_h - 2 * fm.height() - 22 - legend_h);
  return f;
}

// Title, grid, ticks, axes and their labels.
void PaintAxes(QPainter& p, const LinePlot& plot, const PlotFrame& f, QRect area, const QFontMetrics& fm) {
  const QRect& r = f.r;
  p.setPen(Qt::black);
  QFont bold = p.font();
  const QFont font = p.font();
  bold.setBold(true);
  bold.setPointSizeF(10);
  p.setFont(bold);
  p.drawText(QRect(area.left(), area.top() + 4, area.width(), f.title_h - 4), Qt::AlignHCenter | Qt::AlignVCenter,
             QString::fromStdString(plot.title));
  p.setFont(font);
  for (double v = f.ylo; v <= f.yhi + f.ystep / 2; v += f.ystep) {
    const double y = f.Y(v);
    p.setPen(QPen(QColor(0xe6, 0xe6, 0xe6), 1));
    p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y));
    p.setPen(QColor(0x33, 0x33, 0x33));
    p.drawText(QRectF(area.left(), y - fm.height() / 2.0, r.left() - area.left() - 6, fm.height()),
               Qt::AlignRight | Qt::AlignVCenter, FormatY(std::abs(v) < f.ystep * 1e-9 ? 0 : v, plot.y_unit));
  }
  // X ticks at the swept values as given, thinned so that labels never
  // overlap; or, for numeric ticks, evenly spaced values with a grid.
  std::vector<std::pair<double, std::string>> ticks;
  if (plot.x_numeric && !plot.x_log) {
    // Bytes step in whole GiB (MiB, KiB) so that the labels read round.
    double scale = 1;
    if (plot.x_unit == "B")
      for (double u : {1024.0, 1048576.0, 1073741824.0})
        if (f.x1 - f.x0 >= 2 * u) scale = u;
    const double step = NiceStep((f.x1 - f.x0) / scale, 6) * scale;
    for (double v = std::ceil(f.x0 / step) * step; v <= f.x1; v += step) {
      const double at = std::abs(v) < step * 1e-9 ? 0 : v;
      ticks.emplace_back(at, FormatY(at, plot.x_unit).toStdString());
      p.setPen(QPen(QColor(0xe6, 0xe6, 0xe6), 1));
      p.drawLine(QPointF(f.X(at), r.top()), QPointF(f.X(at), r.bottom()));
    }
  } else {
    for (const auto& s : plot.series)
      for (const auto& pt : s.points)
        if (std::none_of(ticks.begin(), ticks.end(), [&](const auto& t) { return t.first == pt.x; }))
          ticks.emplace_back(pt.x, pt.label);
    std::sort(ticks.begin(), ticks.end());
  }
  double last_right = -1e9;
  p.setPen(QColor(0x33, 0x33, 0x33));
  for (const auto& [x, label] : ticks) {
    const QString text = QString::fromStdString(label);
    const double cx = f.X(x), half = fm.horizontalAdvance(text) / 2.0;
    p.drawLine(QPointF(cx, r.bottom()), QPointF(cx, r.bottom() + 4));
    if (cx - half < last_right + 8) continue;
    p.drawText(QRectF(cx - half - 2, r.bottom() + 5, 2 * half + 4, fm.height()), Qt::AlignCenter, text);
    last_right = cx + half;
  }
  p.setPen(QPen(Qt::black, 1));
  p.drawLine(r.bottomLeft(), r.bottomRight());
  p.drawLine(r.bottomLeft(), r.topLeft());
  p.drawText(QRect(r.left(), r.bottom() + fm.height() + 8, r.width(), fm.height() + 4), Qt::AlignHCenter,
             QString::fromStdString(plot.x_label) + (plot.x_log ? " (log scale)" : ""));
  p.save();
  p.translate(area.left() + 4, r.center().y());
  p.rotate(-90);
  p.drawText(QRect(-r.height() / 2, 0, r.height(), fm.height() + 2), Qt::AlignHCenter | Qt::AlignTop,
             QString::fromStdString(plot.y_label));
  p.restore();
}

// Lines: consecutive points that fit are joined; a point that does not fit
// breaks the line and is a cross on the x axis, in its series' colour,
// each series' cross a step apart so that one never hides another.
void PaintSeries(QPainter& p, const LinePlot& plot, const PlotFrame& f) {
  const double n = static_cast<double>(plot.series.size());
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const QColor c = ColorOf(plot, i);
    const auto& pts = plot.series[i].points;
    p.setPen(QPen(c, 2, StyleOf(plot.series[i].dash)));
    for (size_t j = 1; plot.series[i].lines && j < pts.size(); ++j)
      if (pts[j - 1].has_y && pts[j].has_y)
        p.drawLine(QPointF(f.X(pts[j - 1].x), f.Y(pts[j - 1].y)), QPointF(f.X(pts[j].x), f.Y(pts[j].y)));
    const double apart = 10 * (static_cast<double>(i) - (n - 1) / 2);
    for (const auto& pt : pts) {
      if (pt.has_y)
        Dot(p, QPointF(f.X(pt.x), f.Y(pt.y)), c, plot.series[i].dot);
      else
        Cross(p, QPointF(f.X(pt.x) + apart, f.r.bottom() - 6), c);
    }
  }
}

// Legend rows, centred under the x axis label.
void PaintLegend(QPainter& p, const LinePlot& plot, const PlotFrame& f, QRect area, const QFontMetrics& fm) {
  if (f.entries.empty()) return;
  const int legend_w = f.per_row * f.entry_w;
  // Centred under the plot, but never past the picture's edges.
  const int lx = std::max(area.left() + 4, std::min(f.r.center().x() - legend_w / 2, area.right() - legend_w - 4));
  const int ly = f.r.bottom() + 2 * fm.height() + 20;
  for (size_t k = 0; k < f.entries.size(); ++k) {
    const int x = lx + static_cast<int>(k % f.per_row) * f.entry_w;
    const int y = ly + static_cast<int>(k / f.per_row) * f.row_h + f.row_h / 2;
    const auto& [text, idx] = f.entries[k];
    if (idx >= 0) {
      const QColor c = ColorOf(plot, static_cast<size_t>(idx));
      const PlotSeries& s = plot.series[static_cast<size_t>(idx)];
      p.setPen(QPen(c, 2, StyleOf(s.dash)));
      if (s.lines) p.drawLine(x + 2, y, x + 40, y);  // long enough to show its line style
      Dot(p, QPointF(x + 21, y), c, s.dot);
    } else {
      Cross(p, QPointF(x + 21, y), QColor(0x55, 0x55, 0x55));
    }
    p.setPen(Qt::black);
    p.drawText(QRect(x + 46, y - f.row_h / 2, f.entry_w - 46, f.row_h), Qt::AlignLeft | Qt::AlignVCenter, text);
  }
}

}  // namespace

void PaintLinePlot(QPainter& p, const LinePlot& plot, QRect area) {
  p.setRenderHint(QPainter::Antialiasing, true);
  p.fillRect(area, Qt::white);
  QFont font = p.font();
  font.setPointSizeF(9);
  p.setFont(font);
  const QFontMetrics fm(font);
  const PlotFrame f = FrameOf(plot, area, fm);
  PaintAxes(p, plot, f, area, fm);
  PaintSeries(p, plot, f);
  PaintLegend(p, plot, f, area, fm);
}

QImage RenderLinePlot(const LinePlot& p, QSize size, double scale) {
  QImage img(size * scale, QImage::Format_ARGB32_Premultiplied);
  img.setDevicePixelRatio(scale);
  img.fill(Qt::white);
  QPainter painter(&img);
  PaintLinePlot(painter, p, QRect(QPoint(0, 0), size));
  painter.end();
  return img;
}

Status SaveLinePlot(const LinePlot& p, const std::string& path, QSize size) {
  const QString file = QString::fromStdString(path);
  if (file.endsWith(".svg", Qt::CaseInsensitive)) {
    QSvgGenerator gen;
    gen.setFileName(file);
    gen.setSize(size);
    gen.setViewBox(QRect(QPoint(0, 0), size));
    gen.setTitle(QString::fromStdString(p.title));
    QPainter painter;
    if (!painter.begin(&gen)) return Status::IOError("cannot write SVG '" + path + "'");
    PaintLinePlot(painter, p, QRect(QPoint(0, 0), size));
    painter.end();
    return Status::Ok();
  }
  if (!RenderLinePlot(p, size).save(file, "PNG")) return Status::IOError("cannot write PNG '" + path + "'");
  return Status::Ok();
}

}  // namespace strata::gui
