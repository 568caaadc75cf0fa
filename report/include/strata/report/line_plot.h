// A line chart of sweep results as plain data: `strata sweep --plot`
// decides what to plot (which column against which key, one line per hue
// value) and writes this; strata-plot (gui/, Qt) draws it to PNG or SVG. The
// CLI stays free of Qt, the drawing stays with the other charts.
#pragma once

#include <string>
#include <vector>

#include "strata/core/status.h"

namespace strata {

struct PlotPoint {
  double x = 0;        // position: a number in base units, or a category's index
  std::string label;   // the value as given ("12GB/s"): the x tick's text
  bool has_y = false;  // false: the point does not fit (no speed figures)
  double y = 0;
};

struct PlotSeries {
  std::string name;               // "parameters on cpu"; "" for the only series
  std::vector<PlotPoint> points;  // ascending x
  // How it is drawn: a palette colour (-1: by its index) and a line style
  // (0 solid, 1 dashed, 2 dotted, 3 dash-dot), so that a second key can
  // vary the style while the first varies the colour.
  int color = -1;
  int dash = 0;
  // A scatter: the points alone, no line between them (strata tune's
  // front plot), each a dot of radius `dot` pixels.
  bool lines = true;
  double dot = 3.5;
};

struct LinePlot {
  std::string title, x_label, y_label;
  // How y values read on ticks: "s" (durations), "B" (bytes), or "" (plain
  // numbers; y_label carries the unit).
  std::string y_unit;
  bool x_log = false;  // a geometric sweep: a log x axis
  // X ticks: false, one at each point's x with its label (swept values as
  // given); true, evenly spaced numbers read in x_unit ("s", "B" or "").
  bool x_numeric = false;
  std::string x_unit;
  std::vector<PlotSeries> series;
  bool operator==(const LinePlot&) const;
};

// {"title", "x_label", "y_label", "y_unit", "x_log", "x_numeric",
// "x_unit", "series": [{"name", "color", "dash", "lines", "dot", "points":
// [{"x", "label", "y" (null: does not fit)}]}]}; the keys after x_log and
// dash may be left out (their defaults).
std::string LinePlotJson(const LinePlot& p);
// `what` names the text in errors (a file path).
Result<LinePlot> ParseLinePlotJson(const std::string& text, const std::string& what);

}  // namespace strata
