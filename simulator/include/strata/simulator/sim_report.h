// The simulator's answer to "how long will one iteration take, and what
// limits it?", as text and JSON (deterministic: no host timings in JSON).
#pragma once

#include <string>
#include <vector>

#include "strata/cost/endurance.h"
#include "strata/plan/validator.h"
#include "strata/simulator/simulator.h"
#include "strata/timeline/critical_path.h"
#include "strata/timeline/timeline.h"

namespace strata::sim {

// Model FLOPs as counted by Narayanan et al. (SC'21), without recomputation:
// transformer 72*B*s*l*h^2*(1 + s/(6h) + V/(12*h*l)) per micro batch of B
// sequences (= 3x forward); MLP 6*B*sum(in*out).
inline constexpr const char* kModelFlopsFormula =
    "3 x forward FLOPs per rank: transformer 72*B*s*l*h^2*(1 + s/(6h) + V/(12hl)) per micro batch, "
    "MLP 6*B*sum(in*out); recomputation not counted";

// Hardware FLOPs: every compute op's FLOPs as executed, so recomputation
// under activation checkpointing counts (Korthikanti et al. 2022's HFU).
inline constexpr const char* kHardwareFlopsFormula =
    "FLOPs of every forward, backward and recomputation op per rank (model FLOPs plus recomputation)";

struct SimSummary {
  double iteration_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;    // global
  double tflops_per_gpu = 0;  // model FLOPs per second per GPU
  double hardware_tflops_per_gpu = 0;
  double hardware_flops = 0;  // per rank per iteration
  // Model (hardware) FLOPs per second per GPU over hardware.gpu.peak_flops:
  // MFU and HFU (Chowdhery et al. 2022; Korthikanti et al. 2022).
  double mfu = 0, hfu = 0;
  double gpu_efficiency = 1.0;  // SimResult::gpu_efficiency: the compute model's large-GEMM share of peak
  Bytes peak[kNumTiers];
  TimeBreakdown breakdown;  // rank 0 (the first simulated rank): exposed and busy time per class
  CriticalPath path;        // the same rank's critical path; its bottleneck is the report's
  // How far from compute-bound: that rank's compute busy time (the
  // iteration if nothing else held it up) and its share of the iteration.
  double compute_s = 0;
  double ComputeFraction() const { return iteration_s > 0 ? compute_s / iteration_s : 0; }
  int64_t activities = 0;
  int64_t domain_flows = 0;      // flows the replay shared itself (SimResult)
  int64_t max_domain_flows = 0;  // the most flows one link domain held at once
  int64_t stalls = 0;            // SimResult::stalls
  double stalled_s = 0;          // SimResult::stalled_s
  int simulated_ranks = 0;
  std::string layout;     // Plan::LayoutText: "tensor 4 x data 128"
  PipelineBubble bubble;  // pipeline > 1
  DriveWear wear;         // the node's NVMe drives at the simulated rate
};

// REQUIRES: r is the simulation of `plan`.
SimSummary Summarize(const Plan& plan, const SimResult& r);
// `violations`: the plan's capacity violations (ValidatePlan); none means
// it fits. An infeasible plan's text starts with "DOES NOT FIT" and the
// violations, and marks its speed figures "(would not run)"; the JSON has
// `feasible` and `violations` and null speed figures.
std::string SummaryText(const Timeline& t, const SimSummary& s, double wall_s,
                        const std::vector<Violation>& violations = {});
std::string SummaryJson(const Timeline& t, const SimSummary& s, const std::vector<Violation>& violations = {});
// The violations as a JSON array (the report's `violations`): kind,
// message, and for capacity the tier, bytes needed and capacity.
std::string ViolationsJson(const std::vector<Violation>& violations);

}  // namespace strata::sim
