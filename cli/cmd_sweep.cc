// strata sweep: the cross product of --set values, simulated in parallel,
// one CSV or JSON row per point (in a fixed order).
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "parallel.h"
#include "strata/core/version.h"
#include "strata/simulator/sim_report.h"
#include "sweep.h"
#include "wear_json.h"

namespace strata::cli {
namespace {

struct SweepArgs : CommonArgs {
  std::vector<std::string> values;  // --set KEY=V1,V2,...
  std::vector<std::string> zipped;  // --zip KEY=V1,V2,...: varied together
  int jobs = 0;
  std::vector<std::string> plot;  // OUT X Y
  std::vector<std::string> hue;
  sim::SimOptions sim;  // --jitter, --jitter-seed, --stall-rate, --stall-time
};

void RunPoint(const SweepArgs& a, Point& p) {
  auto r = LoadPlanSimulate(a, p.settings, a.sim);
  if (!r.ok()) {
    p.bad_input = r.status().ExitCode() == 2;
    p.error = r.status().message();
    return;
  }
  p.scenario_name = r->planned.scenario.name;
  p.feasible = r->planned.feasible;
  p.violations = r->planned.report.violations;
  p.summary = sim::Summarize(r->planned.plan, r->result);
}

// scenario and common (--deepspeed, --hardware; the simulator's --jitter,
// --jitter-seed and, when on, its stalls) are recorded in every row,
// with Strata's version, so that rows can be told apart later.
std::string Render(const std::vector<Point>& points, const std::vector<std::string>& keys, bool json,
                   const std::string& scenario, const std::vector<std::pair<std::string, std::string>>& common) {
  if (json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& p : points) {
      nlohmann::ordered_json r, set;
      nlohmann::ordered_json value;
      for (const auto& [k, v] : p.settings) {
        set[k] = v;
        const auto x = config::SetValueNumber(v);
        value[k] = x ? nlohmann::ordered_json(*x) : nlohmann::ordered_json();
      }
      r["set"] = set;
      r["set_value"] = value;  // in base units (bytes, bytes/s, FLOP/s, s), null for words
      r["scenario"] = scenario;
      r["strata_version"] = kStrataVersion;
      nlohmann::ordered_json fixed = nlohmann::ordered_json::object();
      for (const auto& [k, v] : common) fixed[k] = v;
      r["overrides"] = fixed;  // --deepspeed, --hardware, jitter, stalls: the same for every row
      if (!p.error.empty()) {
        r["error"] = p.error;
      } else {
        r["feasible"] = p.feasible;
        r["violations"] = nlohmann::ordered_json::parse(sim::ViolationsJson(p.violations));
        // An infeasible point would not run: no speed figures.
        const auto speed = [&](double v) { return p.feasible ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); };
        r["iteration_time_s"] = speed(p.summary.iteration_s);
        r["samples_per_s"] = speed(p.summary.samples_per_s);
        r["tflops_per_gpu"] = speed(p.summary.tflops_per_gpu);
        r["hardware_tflops_per_gpu"] = speed(p.summary.hardware_tflops_per_gpu);
        r["mfu"] = speed(p.summary.mfu);
        r["hfu"] = speed(p.summary.hfu);
        r["tokens_per_s"] = speed(p.summary.tokens_per_s);
        r["compute_only_s"] = p.summary.compute_s;  // how far from compute-bound (SimSummary)
        r["compute_fraction"] = speed(p.summary.ComputeFraction());
        r["stalls"] = speed(static_cast<double>(p.summary.stalls));  // --stall-rate: drawn on every rank
        r["stalled_s"] = speed(p.summary.stalled_s);
        r["bottleneck"] = TimeClassName(p.summary.path.bottleneck);
        nlohmann::ordered_json peak, exposed;
        for (Tier t : kAllTiers) peak[std::string(TierName(t))] = p.summary.peak[static_cast<int>(t)].v;
        for (int c = 0; c < kNumTimeClasses; ++c)
          exposed[std::string(TimeClassName(static_cast<TimeClass>(c)))] = p.summary.breakdown.seconds[c];
        r["peak_bytes"] = peak;
        r["exposed_time_s"] = exposed;
        r["nvme_wear"] = WearJson(p.summary.wear);
      }
      rows.push_back(r);
    }
    return rows.dump(2) + "\n";
  }
  std::ostringstream o;
  // Each key's column as given, then its value in base units (bytes,
  // bytes/s, FLOP/s, seconds; empty for words).
  for (const auto& k : keys) o << CsvField(k) << ',' << CsvField(k + "_value") << ',';
  const auto& columns = ResultColumns();
  o << "feasible,violation";
  for (const auto& c : columns) o << ',' << c.name;
  o << ",error,scenario,strata_version";
  for (const auto& [k, v] : common) o << ',' << CsvField(k);
  o << '\n';
  std::string tail = "," + CsvField(scenario) + "," + kStrataVersion;
  for (const auto& [k, v] : common) tail += "," + CsvField(v);
  o.precision(10);
  for (const auto& p : points) {
    for (const auto& [k, v] : p.settings) {
      o << CsvField(v) << ',';
      if (const auto x = config::SetValueNumber(v)) o << *x;
      o << ',';
    }
    if (!p.error.empty()) {
      o << std::string(2 + columns.size(), ',');  // feasible, violation and the results, empty
      o << CsvField(p.error) << tail << '\n';
      continue;
    }
    std::string violation;
    for (const Violation& v : p.violations) violation += (violation.empty() ? "" : "; ") + v.message;
    o << (p.feasible ? "true" : "false") << ',' << CsvField(violation);
    for (const auto& c : columns) {
      o << ',';
      if (c.text) {
        o << c.text(p.summary);
      } else if (p.feasible || !c.speed) {  // an infeasible point would not run: speed left blank
        const double v = c.get(p.summary);
        if (std::isnan(v))
          ;  // no such figure here (an unrated drive's days)
        else if (c.unit == "B")
          o << static_cast<int64_t>(v);  // whole bytes
        else
          o << v;
      }
    }
    o << ',' << tail << '\n';
  }
  return o.str();
}

}  // namespace

const std::vector<ResultColumn>& ResultColumns() {
  using S = sim::SimSummary;
  static const std::vector<ResultColumn> cols = [] {
    std::vector<ResultColumn> c = {
        {"iteration_time_s", "iteration time", "s", true, [](const S& s) { return s.iteration_s; }, {}},
        {"samples_per_s", "samples/s", "", true, [](const S& s) { return s.samples_per_s; }, {}},
        {"tflops_per_gpu", "TFLOPS per GPU (model FLOPs)", "", true, [](const S& s) { return s.tflops_per_gpu; }, {}},
        {"hardware_tflops_per_gpu",
         "TFLOPS per GPU (counting recomputation)",
         "",
         true,
         [](const S& s) { return s.hardware_tflops_per_gpu; },
         {}},
        {"mfu", "MFU (model FLOPs / peak)", "", true, [](const S& s) { return s.mfu; }, {}},
        {"hfu", "HFU (hardware FLOPs / peak)", "", true, [](const S& s) { return s.hfu; }, {}},
        {"tokens_per_s", "tokens/s", "", true, [](const S& s) { return s.tokens_per_s; }, {}},
        {"compute_only_s", "compute-only time", "s", false, [](const S& s) { return s.compute_s; }, {}},
        {"compute_fraction",
         "compute-only time / iteration time",
         "",
         true,
         [](const S& s) { return s.ComputeFraction(); },
         {}},
        {"bottleneck",
         "bottleneck",
         "",
         false,
         {},
         [](const S& s) { return std::string(TimeClassName(s.path.bottleneck)); }},
        // --stall-rate's draws over every rank (0 without stalls), and the
        // seconds they added (SimSummary::stalls, stalled_s).
        {"stalls", "stalls drawn (all ranks)", "", true, [](const S& s) { return static_cast<double>(s.stalls); }, {}},
        {"stalled_s", "seconds stalled (all ranks)", "s", true, [](const S& s) { return s.stalled_s; }, {}},
    };
    for (Tier t : kAllTiers) {
      const std::string n(TierName(t));
      c.push_back({"peak_" + n + "_bytes",
                   "peak " + n + " memory" + (t == Tier::kGpu ? " per GPU" : " per node"),
                   "B",
                   false,
                   [t](const S& s) { return static_cast<double>(s.peak[static_cast<int>(t)].v); },
                   {}});
    }
    for (int k = 0; k < kNumTimeClasses; ++k) {
      const std::string n(TimeClassName(static_cast<TimeClass>(k)));
      c.push_back({"exposed_" + n + "_s",
                   n + " time exposed (rank 0)",
                   "s",
                   false,
                   [k](const S& s) { return s.breakdown.seconds[k]; },
                   {}});
    }
    // NVMe wear per drive at the simulated rate (cost/endurance.h);
    // empty where a field needs a rating or the point writes nothing.
    const auto wear = WearFields(DriveWear{});
    for (size_t i = 0; i < wear.size(); ++i) {
      const std::string& n = wear[i].first;
      const bool bytes = n.find("bytes") != std::string::npos;
      c.push_back({n,
                   "NVMe " + n.substr(5),
                   bytes ? "B" : "",
                   false,
                   [i](const S& s) { return WearFields(s.wear)[i].second; },
                   {}});
    }
    return c;
  }();
  return cols;
}

Runner AddSweep(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd =
      app.add_subcommand("sweep", "Simulate the cross product of --set values (what-if study): one row per point");
  AddCommon(cmd, *a, "Write the rows to FILE (CSV, or JSON with --json) instead of stdout", /*with_set=*/false);
  cmd->add_option("--set", a->values,
                  "KEY=V1,V2,... a scenario key by dotted path and its values (repeatable); a value A:B:STEP or "
                  "A:B:*FACTOR is a range (2GB/s:32GB/s:2GB/s)");
  cmd->add_option("--zip", a->zipped,
                  "KEY=V1,V2,... keys varied together, value by value (repeatable; as many values each): one "
                  "dimension of the cross product, e.g. NVMe read and write bandwidth");
  cmd->add_option(
         "--plot", a->plot,
         "OUT X Y: also draw Y (a result column: iteration_time_s, samples_per_s, tflops_per_gpu, mfu, tokens_per_s, "
         "compute_fraction, peak_gpu_bytes, exposed_nvme_read_s, ...) against X (a swept key) to OUT "
         "(.png or .svg; its data in OUT's stem + .plot.json), with strata-plot (built with Qt)")
      ->expected(3);
  cmd->add_option("--hue", a->hue,
                  "With --plot: one line per value of this swept key (repeatable: one line per combination)");
  AddJitter(cmd, &a->sim);
  cmd->add_option("--jobs,-j", a->jobs, "Points simulated at once (default: the number of cores)")
      ->check(CLI::PositiveNumber);
  return [a]() {
    if (a->values.empty() && a->zipped.empty()) return Fail(Status::InvalidArgument("sweep needs --set or --zip"));
    // Dimensions of the cross product: each --set, and all --zip together;
    // a dimension's entries set one or more keys.
    using Entry = std::vector<std::pair<std::string, std::string>>;
    std::vector<std::vector<Entry>> dims;
    std::vector<std::string> keys;
    for (const auto& arg : a->values) {
      auto kv = config::ParseSetArgument(arg);
      if (!kv.ok()) return Fail(kv.status());
      keys.push_back(kv->first);
      std::vector<Entry> d;
      for (const auto& v : kv->second) d.push_back({{kv->first, v}});
      dims.push_back(std::move(d));
    }
    if (!a->zipped.empty()) {
      std::vector<Entry> d;
      for (const auto& arg : a->zipped) {
        auto kv = config::ParseSetArgument(arg);
        if (!kv.ok()) return Fail(kv.status());
        if (!d.empty() && d.size() != kv->second.size())
          return Fail(Status::InvalidArgument("--zip " + arg + ": " + std::to_string(kv->second.size()) +
                                              " values, but the first --zip has " + std::to_string(d.size())));
        if (d.empty()) d.resize(kv->second.size());
        for (size_t i = 0; i < d.size(); ++i) d[i].emplace_back(kv->first, kv->second[i]);
        keys.push_back(kv->first);
      }
      dims.push_back(std::move(d));
    }
    PlotRequest plot;
    if (!a->plot.empty()) {
      plot = {a->plot[0], a->plot[1], a->plot[2], a->hue};
      if (Status st = CheckPlotRequest(plot, keys); !st.ok()) return Fail(st);
    } else if (!a->hue.empty()) {
      return Fail(Status::InvalidArgument("--hue needs --plot OUT X Y"));
    }
    // Cross product; the first dimension varies slowest.
    std::vector<Point> points(1);
    for (const auto& d : dims) {
      std::vector<Point> next;
      for (const auto& p : points)
        for (const auto& e : d) {
          Point q = p;
          q.settings.insert(q.settings.end(), e.begin(), e.end());
          next.push_back(std::move(q));
        }
      points = std::move(next);
    }
    // A progress line on a terminal (stderr): points done of all.
    const bool tty = isatty(2) != 0;
    std::atomic<size_t> done{0};
    std::mutex progress;
    ParallelFor(points.size(), a->jobs > 0 ? a->jobs : DefaultJobs(), [&](size_t i) {
      RunPoint(*a, points[i]);
      const size_t n = ++done;
      if (!tty) return;
      std::lock_guard<std::mutex> l(progress);
      const size_t width = 30, filled = width * n / points.size();
      std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << n << "/"
                << points.size() << " points" << (n == points.size() ? "\n" : "") << std::flush;
    });
    const int rc = Emit(*a, Render(points, keys, a->json, a->scenario, Overrides(*a, JitterOverrides(a->sim))));
    if (rc != 0) return rc;
    if (!plot.out.empty()) {
      auto lp = BuildSweepPlot(plot, points);
      if (!lp.ok()) return Fail(lp.status());
      if (Status st = DrawSweepPlot(*lp, plot.out); !st.ok()) return Fail(st);
      std::cerr << "strata: plot written to " << plot.out << "\n";
    }
    // Exit 1 when a point failed or does not fit (as compare), 2 on bad input.
    int status = 0, infeasible = 0;
    for (const auto& p : points) {
      if (p.error.empty()) {
        if (!p.feasible) ++infeasible, status = std::max(status, 1);
        continue;
      }
      std::cerr << "strata: sweep point failed: " << p.error << "\n";
      status = std::max(status, p.bad_input ? 2 : 1);
    }
    if (infeasible > 0)
      std::cerr << "strata: " << infeasible << " of " << points.size() << " points do not fit (feasible false)\n";
    return status;
  };
}

}  // namespace strata::cli
