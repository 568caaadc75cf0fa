#include "strata/simulator/sim_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace strata::sim {

static nlohmann::ordered_json WearJson(const DriveWear& w) {
  if (w.drives == 0) return nullptr;
  nlohmann::ordered_json j;
  for (const auto& [name, v] : WearFields(w))
    j[name] = std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
  return j;
}

SimSummary Summarize(const Plan& plan, const SimResult& r) {
  const Timeline& t = r.timeline;
  SimSummary s;
  s.iteration_s = t.iteration_s;
  if (t.iteration_s > 0) {
    s.samples_per_s = static_cast<double>(t.samples_per_iteration) / t.iteration_s;
    s.tflops_per_gpu = t.model_flops / t.iteration_s / 1e12;
    s.tokens_per_s =
        static_cast<double>(plan.samples_per_iteration) * static_cast<double>(plan.tokens_per_sample) / t.iteration_s;
  }
  for (const Op& op : plan.ops)
    if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward) s.hardware_flops += op.flops;
  s.hardware_flops /= std::max(1, plan.pipeline);  // the plan holds every stage's ops: per rank, on average
  if (t.iteration_s > 0) s.hardware_tflops_per_gpu = s.hardware_flops / t.iteration_s / 1e12;
  if (r.peak_flops > 0) {
    s.mfu = s.tflops_per_gpu * 1e12 / r.peak_flops;
    s.hfu = s.hardware_tflops_per_gpu * 1e12 / r.peak_flops;
    s.gpu_efficiency = r.gpu_efficiency;
  }
  for (Tier tier : kAllTiers) s.peak[static_cast<int>(tier)] = t.Peak(tier);
  const int rank = r.ranks.empty() ? 0 : r.ranks.front();
  s.breakdown = AnalyzeTimeline(t, rank);
  s.path = AnalyzeCriticalPath(plan, t, rank);
  s.compute_s = s.breakdown.busy[static_cast<int>(TimeClass::kCompute)];
  s.activities = r.activities;
  s.domain_flows = r.domain_flows;
  s.max_domain_flows = r.max_domain_flows;
  s.stalls = r.stalls;
  s.stalled_s = r.stalled_s;
  s.simulated_ranks = static_cast<int>(r.ranks.size());
  s.layout = plan.LayoutText();
  s.wear = r.wear;
  if (plan.pipeline > 1) s.bubble = AnalyzePipeline(t);
  return s;
}

static std::string Fixed(double v, const char* fmt) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string SummaryText(const Timeline& t, const SimSummary& s, double wall_s,
                        const std::vector<Violation>& violations) {
  std::ostringstream o;
  const bool fits = violations.empty();
  if (!fits) {
    o << "DOES NOT FIT: " << t.scenario
      << " needs more memory than the hardware has; the schedule below would not run.\n";
    for (const Violation& v : violations) o << "  " << v.message << "\n";
    o << "\n";
  }
  const char* would_not = fits ? "" : "   (would not run)";
  o << "Simulated " << t.scenario << ": " << t.world_size << " GPU" << (t.world_size > 1 ? "s" : "") << " ("
    << (t.world_size > 1 && !s.layout.empty() ? s.layout + "; " : "") << s.simulated_ranks << " simulated, "
    << s.activities << " activities in " << Fixed(wall_s, "%.2f") << " s)\n\n";
  o << "iteration time    " << FormatDuration(s.iteration_s) << would_not << "\n";
  o << "throughput        " << Fixed(s.samples_per_s, "%.4g") << " samples/s" << would_not << "\n";
  // In the unit that suits the size (GFLOPS on a small model, not 0.0006 TFLOPS).
  auto rate = [](double tflops) { return FormatFlopRate(FlopRate{tflops * 1e12}); };
  o << "achieved          " << rate(s.tflops_per_gpu) << " per GPU" << would_not << "\n";
  o << "                  (model FLOPs: " << kModelFlopsFormula << ")\n";
  o << "                  " << rate(s.hardware_tflops_per_gpu) << " per GPU counting recomputation" << would_not
    << "\n";
  o << "MFU / HFU         " << Fixed(100 * s.mfu, "%.1f") << "% / " << Fixed(100 * s.hfu, "%.1f") << "% of peak_flops"
    << would_not << "\n";
  // The ceiling the compute model sets: MFU reads against it.
  o << "                  (the compute model runs a large GEMM at " << Fixed(100 * s.gpu_efficiency, "%.0f")
    << "% of peak_flops: hardware.gpu.efficiency)\n";
  o << "tokens            " << Fixed(s.tokens_per_s, "%.4g") << " tokens/s" << would_not << "\n";
  o << "compute alone     " << FormatDuration(s.compute_s) << " (" << Fixed(100 * s.ComputeFraction(), "%.1f")
    << "% of the iteration: how close to compute-bound)\n";
  if (s.stalls > 0)
    o << "stalls            " << s.stalls << " drawn on the " << s.simulated_ranks << " simulated ranks, "
      << FormatDuration(s.stalled_s) << " in all (rank 0's own count as its compute below, the others' as its idle)\n";
  if (t.pipeline > 1) {
    o << "pipeline bubble   " << Fixed(100 * s.bubble.fraction, "%.1f") << "% of the pipeline's "
      << FormatDuration(s.bubble.span_s) << " (first forward to last backward; stages";
    for (double b : s.bubble.bubble) o << " " << Fixed(100 * b, "%.1f") << "%";
    o << ")\n";
  }
  o << "\n";
  o << "where the time goes (rank 0; transfers count only when compute is idle):\n";
  for (int c = 0; c < kNumTimeClasses; ++c) {
    const double sec = s.breakdown.seconds[c];
    const double pct = s.iteration_s > 0 ? 100 * sec / s.iteration_s : 0;
    std::string name(TimeClassName(static_cast<TimeClass>(c)));
    name.resize(16, ' ');
    std::string d = FormatDuration(sec);
    if (d.size() < 11) d.insert(0, 11 - d.size(), ' ');
    o << "  " << name << d << "  " << Fixed(pct, "%5.1f") << "%   (busy " << FormatDuration(s.breakdown.busy[c])
      << ")\n";
  }
  o << "critical path (the chain of ops that sets the iteration's length):\n ";
  for (int c = 0; c < kNumTimeClasses; ++c)
    if (s.path.seconds[c] > 0)
      o << " "
        << (c == static_cast<int>(TimeClass::kIdle) ? std::string("wait")
                                                    : std::string(TimeClassName(static_cast<TimeClass>(c))))
        << " " << FormatDuration(s.path.seconds[c]);
  o << "\nbottleneck: " << TimeClassName(s.path.bottleneck)
    << " (most time on the critical path; most exposed: " << TimeClassName(s.breakdown.bottleneck)
    << ")\n\npeak memory:\n";
  for (Tier tier : kAllTiers) {
    const int ti = static_cast<int>(tier);
    o << "  " << TierName(tier) << (tier == Tier::kGpu ? " (per GPU)   " : " (per node)  ") << FormatBytes(s.peak[ti])
      << " of " << FormatBytes(t.capacity[ti]) << "\n";
  }
  const std::vector<std::string> wear = WearLines(s.wear, "", "at the simulated rate");
  if (!wear.empty()) o << "\n";
  for (const std::string& line : wear) o << line << "\n";
  return o.str();
}

static nlohmann::ordered_json ViolationJson(const Violation& v) {
  nlohmann::ordered_json j;
  j["kind"] = v.kind;
  j["message"] = v.message;
  if (v.kind == "capacity") {
    j["tier"] = TierName(v.tier);
    j["needed_bytes"] = v.needed.v;
    j["capacity_bytes"] = v.capacity.v;
  }
  return j;
}

static nlohmann::ordered_json ViolationList(const std::vector<Violation>& violations) {
  nlohmann::ordered_json vs = nlohmann::ordered_json::array();
  for (const Violation& v : violations) vs.push_back(ViolationJson(v));
  return vs;
}

std::string ViolationsJson(const std::vector<Violation>& violations) { return ViolationList(violations).dump(); }

std::string SummaryJson(const Timeline& t, const SimSummary& s, const std::vector<Violation>& violations) {
  nlohmann::ordered_json j;
  const bool fits = violations.empty();
  j["scenario"] = t.scenario;
  j["feasible"] = fits;
  j["violations"] = ViolationList(violations);
  j["world_size"] = t.world_size;
  j["simulated_ranks"] = s.simulated_ranks;
  j["layout"] = s.layout;
  // An infeasible plan would not run: no speed figures (its simulated
  // time is in critical_path_s and exposed_time_s for whoever wants it).
  j["iteration_time_s"] = fits ? nlohmann::ordered_json(s.iteration_s) : nlohmann::ordered_json();
  j["samples_per_s"] = fits ? nlohmann::ordered_json(s.samples_per_s) : nlohmann::ordered_json();
  j["tflops_per_gpu"] = fits ? nlohmann::ordered_json(s.tflops_per_gpu) : nlohmann::ordered_json();
  j["hardware_tflops_per_gpu"] = fits ? nlohmann::ordered_json(s.hardware_tflops_per_gpu) : nlohmann::ordered_json();
  j["mfu"] = fits ? nlohmann::ordered_json(s.mfu) : nlohmann::ordered_json();
  j["hfu"] = fits ? nlohmann::ordered_json(s.hfu) : nlohmann::ordered_json();
  j["gpu_efficiency"] = s.gpu_efficiency;
  j["tokens_per_s"] = fits ? nlohmann::ordered_json(s.tokens_per_s) : nlohmann::ordered_json();
  j["compute_only_s"] = s.compute_s;  // rank 0's compute busy time: the compute-bound iteration
  j["compute_fraction"] =
      fits && s.iteration_s > 0 ? nlohmann::ordered_json(s.ComputeFraction()) : nlohmann::ordered_json();
  j["model_flops_per_gpu"] = t.model_flops;
  j["model_flops_formula"] = kModelFlopsFormula;
  j["hardware_flops_per_gpu"] = s.hardware_flops;
  j["hardware_flops_formula"] = kHardwareFlopsFormula;
  nlohmann::ordered_json peak, cap, exposed, busy, path;
  for (Tier tier : kAllTiers) {
    peak[std::string(TierName(tier))] = s.peak[static_cast<int>(tier)].v;
    cap[std::string(TierName(tier))] = t.capacity[static_cast<int>(tier)].v;
  }
  for (int c = 0; c < kNumTimeClasses; ++c) {
    exposed[std::string(TimeClassName(static_cast<TimeClass>(c)))] = s.breakdown.seconds[c];
    busy[std::string(TimeClassName(static_cast<TimeClass>(c)))] = s.breakdown.busy[c];
    path[c == static_cast<int>(TimeClass::kIdle) ? std::string("wait")
                                                 : std::string(TimeClassName(static_cast<TimeClass>(c)))] =
        s.path.seconds[c];
  }
  j["peak_bytes"] = peak;
  j["nvme_wear"] = WearJson(s.wear);
  j["capacity_bytes"] = cap;
  j["exposed_time_s"] = exposed;
  j["busy_time_s"] = busy;
  j["critical_path_s"] = path;
  j["bottleneck"] = TimeClassName(s.path.bottleneck);
  j["most_exposed"] = TimeClassName(s.breakdown.bottleneck);
  j["activities"] = s.activities;
  j["domain_flows"] = s.domain_flows;
  j["max_domain_flows"] = s.max_domain_flows;
  j["stalls"] = s.stalls;
  j["stalled_s"] = s.stalled_s;
  if (t.pipeline > 1)
    j["pipeline"] = {{"stages", t.pipeline},
                     {"span_s", s.bubble.span_s},
                     {"bubble", s.bubble.fraction},
                     {"stage_bubble", s.bubble.bubble},
                     {"stage_compute_s", s.bubble.busy_s}};
  if (!t.strata_version.empty()) {  // what the result came from (Timeline's provenance)
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto& [k, v] : t.overrides) o[k] = v;
    j["provenance"] = {{"strata_version", t.strata_version}, {"scenario_path", t.scenario_path}, {"overrides", o}};
  }
  return j.dump(2) + "\n";
}

}  // namespace strata::sim
