// strata estimate, strata plan.
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
#include "wear_json.h"

namespace strata::cli {
namespace {

std::string WithWearJson(const std::string& json, const DriveWear& w) {
  auto j = nlohmann::ordered_json::parse(json);
  j["nvme_wear_at_bound"] = WearJson(w);
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
    e->notes = WearLines(wear, ", at the resource bound's iteration time: at most these writes a day",
                         "at the resource bound's rate (strata simulate gives the simulated one)");
    const int rc = Emit(*a, a->json ? WithWearJson(EstimateJson(*e), wear) : EstimateText(*e));
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
