#include "strata/report/line_plot.h"

#include <nlohmann/json.hpp>

namespace strata {

bool LinePlot::operator==(const LinePlot& o) const {
  auto same_point = [](const PlotPoint& a, const PlotPoint& b) {
    return a.x == b.x && a.label == b.label && a.has_y == b.has_y && (!a.has_y || a.y == b.y);
  };
  if (title != o.title || x_label != o.x_label || y_label != o.y_label || y_unit != o.y_unit || x_log != o.x_log ||
      x_numeric != o.x_numeric || x_unit != o.x_unit || series.size() != o.series.size())
    return false;
  for (size_t i = 0; i < series.size(); ++i) {
    const auto &a = series[i], &b = o.series[i];
    if (a.name != b.name || a.color != b.color || a.dash != b.dash || a.lines != b.lines || a.dot != b.dot ||
        a.points.size() != b.points.size())
      return false;
    for (size_t j = 0; j < a.points.size(); ++j)
      if (!same_point(a.points[j], b.points[j])) return false;
  }
  return true;
}

std::string LinePlotJson(const LinePlot& p) {
  nlohmann::ordered_json j;
  j["title"] = p.title;
  j["x_label"] = p.x_label;
  j["y_label"] = p.y_label;
  j["y_unit"] = p.y_unit;
  j["x_log"] = p.x_log;
  j["x_numeric"] = p.x_numeric;
  j["x_unit"] = p.x_unit;
  j["series"] = nlohmann::ordered_json::array();
  for (const auto& s : p.series) {
    nlohmann::ordered_json js;
    js["name"] = s.name;
    js["color"] = s.color;
    js["dash"] = s.dash;
    js["lines"] = s.lines;
    js["dot"] = s.dot;
    js["points"] = nlohmann::ordered_json::array();
    for (const auto& pt : s.points) {
      nlohmann::ordered_json jp;
      jp["x"] = pt.x;
      jp["label"] = pt.label;
      jp["y"] = pt.has_y ? nlohmann::ordered_json(pt.y) : nlohmann::ordered_json();
      js["points"].push_back(jp);
    }
    j["series"].push_back(js);
  }
  return j.dump(1) + "\n";
}

Result<LinePlot> ParseLinePlotJson(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return Status::InvalidArgument(what + ": not JSON: " + e.what());
  }
  LinePlot p;
  try {
    p.title = j.value("title", "");
    p.x_label = j.value("x_label", "");
    p.y_label = j.value("y_label", "");
    p.y_unit = j.value("y_unit", "");
    p.x_log = j.value("x_log", false);
    p.x_numeric = j.value("x_numeric", false);
    p.x_unit = j.value("x_unit", "");
    if (!j.contains("series") || !j["series"].is_array())
      return Status::InvalidArgument(what + ": no \"series\" array (not a line plot)");
    for (const auto& js : j["series"]) {
      PlotSeries s;
      s.name = js.value("name", "");
      s.color = js.value("color", -1);
      s.dash = js.value("dash", 0);
      s.lines = js.value("lines", true);
      s.dot = js.value("dot", 3.5);
      if (s.color < -1 || s.dash < 0 || s.dash > 3 || !(s.dot >= 0 && s.dot <= 50))
        return Status::InvalidArgument(what +
                                       ": a series' \"color\" must be -1 or more, \"dash\" 0-3 and \"dot\" 0-50");
      for (const auto& jp : js.at("points")) {
        PlotPoint pt;
        pt.x = jp.at("x").get<double>();
        pt.label = jp.value("label", "");
        pt.has_y = jp.contains("y") && !jp["y"].is_null();
        if (pt.has_y) pt.y = jp["y"].get<double>();
        s.points.push_back(std::move(pt));
      }
      p.series.push_back(std::move(s));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(what + ": " + e.what());
  }
  if (p.x_log)
    for (const auto& s : p.series)
      for (const auto& pt : s.points)
        if (!(pt.x > 0)) return Status::InvalidArgument(what + ": x_log with x " + std::to_string(pt.x) + " <= 0");
  return p;
}

}  // namespace strata
