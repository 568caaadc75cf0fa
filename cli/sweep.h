// The sweep's points and its plot (private to the CLI): cmd_sweep.cc runs
// the points, sweep_plot.cc turns them into a LinePlot and has strata-plot
// draw it.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "strata/core/status.h"
#include "strata/plan/validator.h"
#include "strata/report/line_plot.h"
#include "strata/simulator/sim_report.h"

namespace strata::cli {

struct Point {
  std::vector<std::pair<std::string, std::string>> settings;  // (key, value as given), in key order
  std::string scenario_name;                                  // the scenario's name: (or its file's stem)
  bool bad_input = false;
  std::string error;
  bool feasible = true;
  std::vector<Violation> violations;  // capacity violations when not feasible
  sim::SimSummary summary;
};

// The result columns of a sweep's CSV, in order, after feasible and
// violation: numbers (`get`, in base units; `unit` "s", "B" or "") and the
// bottleneck's name (`text`). A speed column is blank when the point does
// not fit; the plot can show any number column.
struct ResultColumn {
  std::string name, label, unit;
  bool speed = false;
  std::function<double(const sim::SimSummary&)> get;
  std::function<std::string(const sim::SimSummary&)> text;
};
const std::vector<ResultColumn>& ResultColumns();

// `--plot OUT X Y [--hue KEY]...`: Y (a result column) against X (a swept
// key), one line per value (or combination of values) of the hue keys.
struct PlotRequest {
  std::string out, x, y;
  std::vector<std::string> hue;
};

// The result columns a plot can show (the sweep's CSV names).
std::vector<std::string> PlotColumns();
// Checks the names before the sweep runs: X and HUE among `keys`, Y a column.
Status CheckPlotRequest(const PlotRequest& r, const std::vector<std::string>& keys);
// The plot of the points (skipping failed ones). Fails, naming the keys,
// when another key varies so that one line would have two points at one X.
Result<LinePlot> BuildSweepPlot(const PlotRequest& r, const std::vector<Point>& points);
// Writes the plot's data to OUT's stem + ".plot.json" and runs strata-plot
// (beside this executable, in the build tree's gui/, or on PATH) on it.
Status DrawSweepPlot(const LinePlot& plot, const std::string& out);

}  // namespace strata::cli
