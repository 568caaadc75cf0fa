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

void PaintLinePlot(QPainter& p, const LinePlot& plot, QRect area) {
  p.setRenderHint(QPainter::Antialiasing, true);
  p.fillRect(area, Qt::white);
  QFont font = p.font();
  font.setPointSizeF(9);
  p.setFont(font);
  const QFontMetrics fm(font);
  // Data ranges.
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y1 = 0, ymin = 0;
  bool any_infeasible = false;
  auto xpos = [&](double x) { return plot.x_log ? std::log(x) : x; };
  for (const auto& s : plot.series)
    for (const auto& pt : s.points) {
      x0 = std::min(x0, xpos(pt.x));
      x1 = std::max(x1, xpos(pt.x));
      if (pt.has_y) {
        y1 = std::max(y1, pt.y);
        ymin = std::min(ymin, pt.y);
      } else {
        any_infeasible = true;
      }
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;
  if (x1 - x0 <= 0) x0 -= 1, x1 += 1;
  const double pad = (x1 - x0) * 0.04;
  x0 -= pad, x1 += pad;
  if (y1 <= ymin) y1 = ymin + 1;
  const double ystep = NiceStep(y1 - ymin, 5);
  const double ylo = std::floor(ymin / ystep) * ystep, yhi = std::ceil(y1 * 1.02 / ystep) * ystep;
  // The legend goes below the x axis label, never over the data: the
  // series (when named) and the cross, in as many columns as fit.
  std::vector<std::pair<QString, int>> entries;  // text, series index (-1: does not fit)
  for (size_t i = 0; i < plot.series.size(); ++i)
    if (!plot.series[i].name.empty())
      entries.emplace_back(QString::fromStdString(plot.series[i].name), static_cast<int>(i));
  if (any_infeasible) entries.emplace_back("does not fit (no figure)", -1);
  int entry_w = 0;
  for (const auto& e : entries) entry_w = std::max(entry_w, fm.horizontalAdvance(e.first) + 40);
  const int row_h = fm.height() + 4;
  const int per_row =
      entries.empty()
          ? 1
          : std::max(1, std::min<int>(static_cast<int>(entries.size()), (area.width() - 24) / std::max(entry_w, 1)));
  const int legend_rows = (static_cast<int>(entries.size()) + per_row - 1) / per_row;
  const int legend_h = entries.empty() ? 0 : legend_rows * row_h + 10;
  // Plot rectangle: room for the y tick labels, the axis labels, the title
  // and the legend.
  int tick_w = 0;
  for (double v = ylo; v <= yhi + ystep / 2; v += ystep)
    tick_w = std::max(tick_w, fm.horizontalAdvance(FormatY(v, plot.y_unit)));
  const int title_h = plot.title.empty() ? 8 : fm.height() + 14;
  const QRect r(area.left() + tick_w + fm.height() + 18, area.top() + title_h,
                area.width() - tick_w - fm.height() - 18 - 16,
                area.height() - title_h - 2 * fm.height() - 22 - legend_h);
  auto X = [&](double x) { return r.left() + (xpos(x) - x0) / (x1 - x0) * r.width(); };
  auto Y = [&](double y) { return r.bottom() - (y - ylo) / (yhi - ylo) * r.height(); };
  // Title.
  p.setPen(Qt::black);
  QFont bold = font;
  bold.setBold(true);
  bold.setPointSizeF(10);
  p.setFont(bold);
  p.drawText(QRect(area.left(), area.top() + 4, area.width(), title_h - 4), Qt::AlignHCenter | Qt::AlignVCenter,
             QString::fromStdString(plot.title));
  p.setFont(font);
  // Y grid, ticks and labels.
  for (double v = ylo; v <= yhi + ystep / 2; v += ystep) {
    const double y = Y(v);
    p.setPen(QPen(QColor(0xe6, 0xe6, 0xe6), 1));
    p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y));
    p.setPen(QColor(0x33, 0x33, 0x33));
    p.drawText(QRectF(area.left(), y - fm.height() / 2.0, r.left() - area.left() - 6, fm.height()),
               Qt::AlignRight | Qt::AlignVCenter, FormatY(std::abs(v) < ystep * 1e-9 ? 0 : v, plot.y_unit));
  }
  // X ticks at the swept values as given, thinned so that labels never overlap.
  std::vector<std::pair<double, std::string>> ticks;
  for (const auto& s : plot.series)
    for (const auto& pt : s.points)
      if (std::none_of(ticks.begin(), ticks.end(), [&](const auto& t) { return t.first == pt.x; }))
        ticks.emplace_back(pt.x, pt.label);
  std::sort(ticks.begin(), ticks.end());
  double last_right = -1e9;
  p.setPen(QColor(0x33, 0x33, 0x33));
  for (const auto& [x, label] : ticks) {
    const QString text = QString::fromStdString(label);
    const double cx = X(x), half = fm.horizontalAdvance(text) / 2.0;
    p.drawLine(QPointF(cx, r.bottom()), QPointF(cx, r.bottom() + 4));
    if (cx - half < last_right + 8) continue;
    p.drawText(QRectF(cx - half - 2, r.bottom() + 5, 2 * half + 4, fm.height()), Qt::AlignCenter, text);
    last_right = cx + half;
  }
  // Axes and their labels.
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
  // Lines: consecutive points that fit are joined; a point that does not fit
  // breaks the line and is a red cross on the x axis.
  // The two marks, drawn the same in the plot and in its legend.
  const QColor red(0xc6, 0x28, 0x28);
  const auto dot = [&p](QPointF at, const QColor& c) {
    p.setPen(QPen(Qt::white, 1));
    p.setBrush(c);
    p.drawEllipse(at, 3.5, 3.5);
    p.setBrush(Qt::NoBrush);
  };
  const auto cross = [&p, &red](QPointF at) {
    p.setPen(QPen(red, 2));
    p.drawLine(at + QPointF(-4, -4), at + QPointF(4, 4));
    p.drawLine(at + QPointF(-4, 4), at + QPointF(4, -4));
  };
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const QColor c = SeriesColor(static_cast<int>(i));
    const auto& pts = plot.series[i].points;
    p.setPen(QPen(c, 2));
    for (size_t j = 1; j < pts.size(); ++j)
      if (pts[j - 1].has_y && pts[j].has_y)
        p.drawLine(QPointF(X(pts[j - 1].x), Y(pts[j - 1].y)), QPointF(X(pts[j].x), Y(pts[j].y)));
    for (const auto& pt : pts) {
      if (pt.has_y)
        dot(QPointF(X(pt.x), Y(pt.y)), c);
      else
        cross(QPointF(X(pt.x), r.bottom() - 6));
    }
  }
  // Legend rows, centred under the x axis label.
  if (entries.empty()) return;
  const int legend_w = per_row * entry_w;
  const int lx = r.center().x() - legend_w / 2, ly = r.bottom() + 2 * fm.height() + 20;
  for (size_t k = 0; k < entries.size(); ++k) {
    const int x = lx + static_cast<int>(k % per_row) * entry_w;
    const int y = ly + static_cast<int>(k / per_row) * row_h + row_h / 2;
    const auto& [text, idx] = entries[k];
    if (idx >= 0) {
      p.setPen(QPen(SeriesColor(idx), 2));
      p.drawLine(x + 2, y, x + 24, y);
      dot(QPointF(x + 13, y), SeriesColor(idx));
    } else {
      cross(QPointF(x + 13, y));
    }
    p.setPen(Qt::black);
    p.drawText(QRect(x + 30, y - row_h / 2, entry_w - 30, row_h), Qt::AlignLeft | Qt::AlignVCenter, text);
  }
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
