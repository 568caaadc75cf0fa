// strata tune -o DIR: the best point as a DeepSpeed config and a scenario,
// every point as CSV, and the front as a picture (tune.h; docs/tune.md).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "strata/config/deepspeed_writer.h"
#include "strata/config/scenario_writer.h"
#include "sweep.h"
#include "tune.h"

namespace strata::cli {

namespace {
// A CSV figure: empty where there is none (NaN, infinite days).
std::string Figure(double v) {
  if (!std::isfinite(v)) return "";
  std::ostringstream o;
  o.precision(10);
  o << v;
  return o.str();
}
}  // namespace

std::string FrontCsv(const TuneSpace& space, const TuneResult& r) {
  std::ostringstream o;
  o.precision(10);
  for (const Knob& k : space.knobs) o << CsvField(k.key) << ',';
  o << "verdict,why,objective,iteration_time_s,samples_per_s,tokens_per_s,peak_gpu_bytes,peak_cpu_bytes,"
       "nvme_written_bytes,nvme_drive_writes_per_day,nvme_days_to_rated_writes,bottleneck,on_front\n";
  const std::vector<int> front = ParetoFront(r.points);
  for (size_t i = 0; i < r.points.size(); ++i) {
    const Evaluated& e = r.points[i];
    for (const Knob& k : space.knobs) o << CsvField(e.setting.at(k.key)) << ',';
    o << (e.simulated ? "runs" : e.refused ? "refused" : e.fits ? "failed" : "does_not_fit") << ',' << CsvField(e.why);
    if (e.simulated)
      o << ',' << e.objective << ',' << e.summary.iteration_s << ',' << e.summary.samples_per_s << ','
        << e.summary.tokens_per_s << ',' << PeakOf(e, Tier::kGpu).v << ',' << PeakOf(e, Tier::kCpu).v << ','
        << e.nvme_written.v << ',' << Figure(e.summary.wear.drives > 0 ? e.summary.wear.dwpd : 0) << ','
        << Figure(e.summary.wear.rated() ? e.summary.wear.days : std::nan("")) << ','
        << TimeClassName(e.summary.path.bottleneck);
    else
      o << ",,,,,,,,,,";
    o << ',' << (std::find(front.begin(), front.end(), static_cast<int>(i)) != front.end() ? "true" : "false") << '\n';
  }
  return o.str();
}

LinePlot FrontPlot(const std::string& scenario, const TuneResult& r) {
  LinePlot plot;
  plot.title = "strata tune: " + scenario;
  plot.x_label = "peak GPU memory";
  plot.x_numeric = true;
  plot.x_unit = "B";
  plot.y_label = "iteration time";
  plot.y_unit = "s";
  auto point = [&](const Evaluated& e) {
    PlotPoint p;
    p.x = static_cast<double>(PeakOf(e, Tier::kGpu).v);
    p.has_y = true;
    p.y = e.summary.iteration_s;
    return p;
  };
  // Grey dots, then the front (on all four figures) as larger dots, then
  // the points no other is both faster than and smaller on the GPU than,
  // joined: the trade this picture shows. The best point on top.
  PlotSeries all{"evaluated", {}, 8, 0, false, 3.0};
  PlotSeries front{"Pareto front (time, GPU, CPU, NVMe written)", {}, 0, 0, false, 4.5};
  PlotSeries two_d{"time vs GPU memory front", {}, 0, 1, true, 0};
  PlotSeries best{"best", {}, 1, 0, false, 7.0};
  const std::vector<int> on_front = ParetoFront(r.points);
  std::vector<const Evaluated*> ran;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const Evaluated& e = r.points[i];
    if (!e.simulated) continue;
    ran.push_back(&e);
    const bool f = std::find(on_front.begin(), on_front.end(), static_cast<int>(i)) != on_front.end();
    (f ? front : all).points.push_back(point(e));
  }
  std::sort(ran.begin(), ran.end(), [](const Evaluated* a, const Evaluated* b) {
    return PeakOf(*a, Tier::kGpu).v != PeakOf(*b, Tier::kGpu).v ? PeakOf(*a, Tier::kGpu).v < PeakOf(*b, Tier::kGpu).v
                                                                : a->summary.iteration_s < b->summary.iteration_s;
  });
  double fastest = 0;
  for (const Evaluated* e : ran)
    if (two_d.points.empty() || e->summary.iteration_s < fastest) {
      two_d.points.push_back(point(*e));
      fastest = e->summary.iteration_s;
    }
  if (r.best >= 0 && r.points[static_cast<size_t>(r.best)].simulated)
    best.points.push_back(point(r.points[static_cast<size_t>(r.best)]));
  for (PlotSeries* s : {&all, &front, &best})
    std::sort(s->points.begin(), s->points.end(), [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; });
  for (PlotSeries* s : {&all, &two_d, &front, &best})
    if (!s->points.empty()) plot.series.push_back(std::move(*s));
  return plot;
}

Result<std::string> WriteTuneOutputs(const CommonArgs& a, const std::string& out_dir, const TuneSpace& space,
                                     const TuneResult& r) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status::IOError("-o " + out_dir + ": cannot create the directory: " + ec.message());
  STRATA_ASSIGN_OR_RETURN(auto ov, PointOverrides(space, r.points[static_cast<size_t>(r.best)].setting));
  STRATA_ASSIGN_OR_RETURN(auto best, Load(a, ov));
  const fs::path dir(out_dir);
  // A DeepSpeed config for DeepSpeed's schedule; FSDP2's settings stay in
  // the scenario's fsdp section.
  const bool deepspeed = best.framework == Framework::kDeepSpeed;
  std::string written = "written: ";
  if (deepspeed) {
    STRATA_RETURN_IF_ERROR(WriteFile((dir / "ds_config.json").string(), config::DeepSpeedConfigJson(best)));
    written += (dir / "ds_config.json").string() + ", ";
  }
  STRATA_ASSIGN_OR_RETURN(auto lo, LoadOptionsOf(a, ov));  // its deepspeed_config: replaced by ds_config.json
  STRATA_ASSIGN_OR_RETURN(auto yaml, config::ScenarioYaml(a.scenario, lo, deepspeed ? "ds_config.json" : ""));
  STRATA_RETURN_IF_ERROR(WriteFile((dir / "scenario.yaml").string(),
                                   "# strata tune's best point for " + a.scenario + " (docs/tune.md)\n" + yaml));
  STRATA_RETURN_IF_ERROR(WriteFile((dir / "front.csv").string(), FrontCsv(space, r)));
  written += (dir / "scenario.yaml").string() + " (strata simulate " + (dir / "scenario.yaml").string() +
             " gives the best point's figures), " + (dir / "front.csv").string();
  // The picture needs strata-plot (Qt): without it the rest still stands.
  if (Status st = DrawSweepPlot(FrontPlot(a.scenario, r), (dir / "front.png").string()); st.ok())
    written += ", " + (dir / "front.png").string();
  else
    std::cerr << "strata tune: warning: " << st.message() << "\n";
  return written + "\n";
}

}  // namespace strata::cli
