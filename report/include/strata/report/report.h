// Human and JSON renderings of the estimator's and planner's results, shared
// by the CLI and (later) the GUI.
#pragma once

#include <string>

#include "strata/plan/plan.h"
#include "strata/plan/validator.h"
#include "strata/planner/estimator.h"

namespace strata {

struct PlanSummary {
  int64_t ops = 0;
  int64_t ops_by_kind[kNumOpKinds] = {};
  Bytes bytes_by_link[kNumLinkClasses];  // indexed by LinkClass
  double compute_flops = 0;              // forward + backward + optimizer, per rank
  double host_seconds = 0;               // the hooks' host time, per rank (Op::host_seconds)
  int64_t buffers = 0;
  MemoryPeaks memory;
};
PlanSummary SummarizePlan(const Plan& plan, const ValidationReport& report);

// `strata estimate` output. JSON: {"scenario", "feasible", "tiers": {"gpu": {...}, ...},
// "violations": [...], "checks": [...], "zero_paper": {...}, "deepspeed": {...}}.
std::string EstimateText(const MemoryEstimate& e);
std::string EstimateJson(const MemoryEstimate& e);
// The estimate's last line: FITS, DOES NOT FIT, or DEEPSPEED WOULD REFUSE
// THIS CONFIG (a DeepSpeed assertion, whatever the memory) with whether the
// memory would fit.
std::string EstimateVerdict(const MemoryEstimate& e);

// `strata plan` summary.
std::string SummaryText(const Plan& plan, const PlanSummary& s, const ValidationReport& report);
std::string SummaryJson(const Plan& plan, const PlanSummary& s, const ValidationReport& report);

}  // namespace strata
