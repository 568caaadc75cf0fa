// Draws a LinePlot (report/line_plot.h: sweep results) with QPainter, so
// it renders offscreen to PNG or SVG: one line per series with its points
// marked, y grid and ticks in the column's unit, x ticks at the swept
// values as given, a legend, and points that do not fit as red crosses on
// the x axis (they have no figure: the schedule would not run).
#pragma once

#include <QImage>
#include <QRect>
#include <QSize>
#include <string>

#include "strata/core/status.h"
#include "strata/report/line_plot.h"

class QPainter;

namespace strata::gui {

void PaintLinePlot(QPainter& painter, const LinePlot& p, QRect area);
// At `scale` device pixels per logical pixel (2: a sharp figure for a paper).
QImage RenderLinePlot(const LinePlot& p, QSize size, double scale = 2.0);
// PNG, or SVG when `path` ends in .svg; errors name the path.
Status SaveLinePlot(const LinePlot& p, const std::string& path, QSize size);

// The colour of series i (Tableau 10, as the timeline charts).
QColor SeriesColor(int i);

}  // namespace strata::gui
