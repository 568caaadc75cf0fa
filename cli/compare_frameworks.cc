// strata compare --frameworks: one scenario planned and simulated as
// DeepSpeed ZeRO and as PyTorch FSDP2 (config/framework_counterpart.h: the
// closest configuration of each), one row each.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "compare.h"
#include "parallel.h"
#include "strata/config/framework_counterpart.h"
#include "strata/planner/planner.h"
#include "strata/report/report.h"

namespace strata::cli {
namespace {

struct FrameworkRow {
  Framework framework;
  std::string name, setup;  // "deepspeed", "ZeRO-3, offload param cpu optimizer cpu"
  Status status;
  bool feasible = true;
  double iteration_s = 0;
  TimeBreakdown breakdown;  // rank 0's: compute, then each class's exposed time
  double Seconds(TimeClass c) const { return breakdown.seconds[static_cast<int>(c)]; }
  Bytes peak[kNumTiers];
  Bytes link[kNumLinkClasses];
};

Status Issues(const Scenario& s) {
  std::string msg;
  for (const ScenarioIssue& i : CheckScenario(s)) msg += (msg.empty() ? "" : "; ") + i.path + ": " + i.message;
  return msg.empty() ? Status::Ok() : Status::InvalidArgument(msg);
}

void RunFramework(const Scenario& base, const sim::SimOptions& sim, FrameworkRow& row) {
  auto s = config::ScenarioAsFramework(base, row.framework);
  if (!s.ok()) {
    row.status = s.status();
    return;
  }
  row.setup = config::FrameworkSummary(*s);
  if (Status st = Issues(*s); !st.ok()) {
    row.status = st;
    return;
  }
  auto planned = PlanScenario(std::move(*s));
  if (!planned.ok()) {
    row.status = planned.status();
    return;
  }
  row.feasible = planned->feasible;
  auto r = sim::Simulate(planned->plan, planned->scenario.hardware, sim);
  if (!r.ok()) {
    row.status = r.status();
    return;
  }
  const PlanSummary sum = SummarizePlan(planned->plan, planned->report);
  for (int c = 0; c < kNumLinkClasses; ++c) row.link[c] = sum.bytes_by_link[c];
  const Timeline& t = r->timeline;
  row.iteration_s = t.iteration_s;
  row.breakdown = AnalyzeTimeline(t);
  for (Tier tier : kAllTiers) row.peak[static_cast<int>(tier)] = t.Peak(tier);
}

Bytes LinkOf(const FrameworkRow& r, LinkClass c) { return r.link[static_cast<int>(c)]; }

std::string Json(const std::vector<FrameworkRow>& rows) {
  nlohmann::ordered_json j;
  for (const FrameworkRow& r : rows) {
    if (!r.status.ok()) {
      j[r.name] = {{"error", r.status.message()}};
      continue;
    }
    nlohmann::ordered_json peak, bytes, exposed;
    for (int c = 1; c < kNumTimeClasses; ++c)
      exposed[std::string(TimeClassName(static_cast<TimeClass>(c)))] = r.breakdown.seconds[c];
    for (Tier t : kAllTiers) peak[std::string(TierName(t))] = r.peak[static_cast<int>(t)].v;
    for (LinkClass c :
         {LinkClass::kH2D, LinkClass::kD2H, LinkClass::kNvmeRead, LinkClass::kNvmeWrite, LinkClass::kCollective})
      bytes[std::string(LinkClassName(c))] = LinkOf(r, c).v;
    j[r.name] = {{"setup", r.setup},
                 {"iteration_time_s", r.iteration_s},
                 {"compute_s", r.Seconds(TimeClass::kCompute)},
                 {"exposed_collective_s", r.Seconds(TimeClass::kCollective)},
                 {"exposed_s", exposed},
                 {"peak_bytes", peak},
                 {"bytes", bytes},
                 {"feasible", r.feasible}};
  }
  return j.dump(2) + "\n";
}

std::string Text(const std::vector<FrameworkRow>& rows) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-10s %13s %11s %12s %12s %12s %12s %12s %12s %12s %12s\n", "framework",
                "iteration_s", "exposed_s", "peak_gpu", "peak_cpu", "peak_nvme", "h2d", "d2h", "nvme_read",
                "nvme_write", "collective");
  o << line;
  for (const FrameworkRow& r : rows) {
    if (!r.status.ok()) {
      o << r.name << ": " << r.status.message() << "\n";
      continue;
    }
    std::snprintf(line, sizeof line, "%-10s %13.6g %11.4g %12s %12s %12s %12s %12s %12s %12s %12s%s\n", r.name.c_str(),
                  r.iteration_s, r.Seconds(TimeClass::kCollective), FormatBytes(r.peak[0]).c_str(),
                  FormatBytes(r.peak[1]).c_str(), FormatBytes(r.peak[2]).c_str(),
                  FormatBytes(LinkOf(r, LinkClass::kH2D)).c_str(), FormatBytes(LinkOf(r, LinkClass::kD2H)).c_str(),
                  FormatBytes(LinkOf(r, LinkClass::kNvmeRead)).c_str(),
                  FormatBytes(LinkOf(r, LinkClass::kNvmeWrite)).c_str(),
                  FormatBytes(LinkOf(r, LinkClass::kCollective)).c_str(), r.feasible ? "" : "  (does not fit)");
    o << line;
  }
  o << "\n";
  for (const FrameworkRow& r : rows)
    if (r.status.ok()) o << r.name << ": " << r.setup << "\n";
  o << "\nexposed_s: collective time while the GPU computes nothing (rank 0); bytes per rank; peaks per GPU\n"
       "and per node. Each framework runs the closest configuration of the other's (docs/fsdp.md, \"Side by "
       "side\").\n";
  return o.str();
}

}  // namespace

int CompareFrameworks(const CommonArgs& a, const std::string& list, const sim::SimOptions& sim, int jobs) {
  std::vector<FrameworkRow> rows;
  std::stringstream in(list);
  for (std::string f; std::getline(in, f, ',');) {
    if (f != "deepspeed" && f != "fsdp")
      return Fail(Status::InvalidArgument("--frameworks: unknown framework '" + f + "' (deepspeed, fsdp)"));
    rows.push_back({f == "fsdp" ? Framework::kFsdp : Framework::kDeepSpeed, f});
  }
  if (rows.empty()) return Fail(Status::InvalidArgument("--frameworks: no framework given"));
  auto base = Load(a);
  if (!base.ok()) return Fail(base.status());
  ParallelFor(rows.size(), jobs > 0 ? jobs : DefaultJobs(), [&](size_t i) { RunFramework(*base, sim, rows[i]); });
  int rc = 0;
  bool any = false;
  for (const FrameworkRow& r : rows) {
    if (!r.status.ok()) rc = std::max(rc, r.status.ExitCode());
    any = any || r.status.ok();
  }
  if (!any) return Fail(rows.front().status);
  if (const int out = Emit(a, a.json ? Json(rows) : Text(rows)); out != 0) return out;
  for (const FrameworkRow& r : rows)
    if (r.status.ok() && !r.feasible) rc = std::max(rc, 1);
  return rc;
}

}  // namespace strata::cli
