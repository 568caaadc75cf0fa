// strata estimate, strata plan.
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "strata/cost/bound.h"
#include "strata/cost/endurance.h"
#include "strata/plan/plan_json.h"
#include "strata/plan/validator.h"
#include "strata/planner/estimator.h"
#include "strata/planner/planner.h"
#include "strata/report/report.h"

namespace strata::cli {
namespace {

std::string WearNote(const DriveWear& w) {
  if (w.drives == 0) return "";
  std::string out =
      "\nnvme wear (per drive, at the resource bound's iteration time: at most these writes a day): " + WearText(w) +
      "\n";
  out += WearWarning(w, "at the resource bound's rate (strata simulate gives the simulated one)");
  return out;
}

// The wear note before the verdict, which stays the last line.
std::string EstimateWithWear(const MemoryEstimate& e, const std::string& note) {
  std::string text = EstimateText(e);
  const std::string verdict = EstimateVerdict(e) + "\n";
  if (note.empty() || text.size() < verdict.size() ||
      text.compare(text.size() - verdict.size(), verdict.size(), verdict) != 0)
    return text + note;
  return text.substr(0, text.size() - verdict.size()) + note.substr(1) + "\n" + verdict;
}

std::string WithWearJson(const std::string& json, const DriveWear& w) {
  auto j = nlohmann::ordered_json::parse(json);
  nlohmann::ordered_json wear;  // null without NVMe writes
  if (w.drives > 0)
    for (const auto& [name, v] : WearFields(w))
      wear[name] = std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
  j["nvme_wear_at_bound"] = wear;
  return j.dump(2) + "\n";
}

}  // namespace

Runner AddEstimate(CLI::App& app) {
  auto a = std::make_shared<CommonArgs>();
  auto* cmd = app.add_subcommand("estimate", "Memory per GPU and per node, and whether the scenario fits");
  AddCommon(cmd, *a, "Write the report to FILE instead of stdout");
  return [a]() {
    auto s = Load(*a);
    if (!s.ok()) return Fail(s.status());
    Plan plan;
    auto e = EstimateMemory(*s, &plan);
    if (!e.ok()) return Fail(e.status());
    // NVMe wear at the resource bound's iteration time, the fastest the
    // hardware allows: at most this many drive writes a day.
    const DriveWear wear = NvmeWear(plan, s->hardware.nvme, ComputeResourceBound(plan, s->hardware).busiest.seconds);
    const int rc = Emit(*a, a->json ? WithWearJson(EstimateJson(*e), wear) : EstimateWithWear(*e, WearNote(wear)));
    if (rc != 0) return rc;
    // A config DeepSpeed refuses is bad input (2), not a shortage (1).
    return e->deepspeed_refuses() ? 2 : e->feasible() ? 0 : 1;
  };
}

Runner AddPlan(CLI::App& app) {
  auto a = std::make_shared<CommonArgs>();
  auto* cmd = app.add_subcommand("plan", "Plan one training iteration: print a summary, write the plan JSON with -o");
  AddCommon(cmd, *a, "Write the plan JSON to FILE");
  return [a]() {
    auto planned = LoadAndPlan(*a);
    if (!planned.ok()) return Fail(planned.status());
    const Plan* plan = &planned->plan;
    const ValidationReport& report = planned->report;
    const auto summary = SummarizePlan(*plan, report);
    if (!a->output.empty()) {
      auto st = WriteFile(a->output, EncodePlan(*plan));
      if (!st.ok()) return Fail(st);
    }
    std::cout << (a->json ? SummaryJson(*plan, summary, report) : SummaryText(*plan, summary, report));
    if (!a->output.empty() && !a->json) std::cout << "plan written to " << a->output << "\n";
    return report.ok() ? 0 : 1;
  };
}

}  // namespace strata::cli
