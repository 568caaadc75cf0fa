// strata compare: plan and simulate the scenario under each eviction policy.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "compare.h"
#include "parallel.h"
#include "strata/planner/eviction.h"
#include "strata/report/report.h"
#include "strata/simulator/sim_report.h"

namespace strata::cli {
namespace {

struct CompareArgs : CommonArgs {
  std::string policies = "lru,lfu,fifo,belady,cost_aware";
  std::string gpu_cache, cpu_cache;
  std::string frameworks;  // --frameworks: rows are frameworks, not policies
  int jobs = 0;
  sim::SimOptions sim;  // --jitter, --jitter-seed, --stall-rate, --stall-time
};

struct Row {
  std::string policy;
  Status status;
  CacheStats cache;
  Bytes link[kNumLinkClasses];
  double iteration_s = 0;
  int64_t stalls = 0;  // --stall-rate's draws over every rank, and the seconds they added
  double stalled_s = 0;
  Bytes peak[kNumTiers];
  bool feasible = true;
  double hit_ratio(int64_t hits, int64_t accesses) const {
    return accesses > 0 ? static_cast<double>(hits) / static_cast<double>(accesses) : 0.0;
  }
  double over_lower_bound() const {
    const double moved = static_cast<double>((cache.fetch_nvme_read + cache.fetch_h2d + cache.fetch_allgather).v);
    const double bound =
        static_cast<double>((cache.compulsory_nvme_read + cache.compulsory_h2d + cache.compulsory_allgather).v);
    return bound > 0 ? moved / bound : 1.0;
  }
};

void RunRow(const CompareArgs& a, const std::vector<std::pair<std::string, std::string>>& base, Row& row) {
  auto overrides = base;
  overrides.emplace_back("policy.eviction", row.policy);
  auto r = LoadPlanSimulate(a, overrides, a.sim);
  if (!r.ok()) {
    row.status = r.status();
    return;
  }
  const Planned& p = r->planned;
  row.feasible = p.feasible;
  const PlanSummary sum = SummarizePlan(p.plan, p.report);
  for (int c = 0; c < kNumLinkClasses; ++c) row.link[c] = sum.bytes_by_link[c];
  row.cache = p.plan.cache;
  row.iteration_s = r->result.timeline.iteration_s;
  row.stalls = r->result.stalls;
  row.stalled_s = r->result.stalled_s;
  for (Tier t : kAllTiers) row.peak[static_cast<int>(t)] = r->result.timeline.Peak(t);
}

int LinkIndex(LinkClass c) { return static_cast<int>(c); }

std::string Json(const std::vector<Row>& rows) {
  nlohmann::ordered_json j;
  for (const Row& r : rows) {
    if (!r.status.ok()) {
      j[r.policy] = {{"error", r.status.message()}};
      continue;
    }
    nlohmann::ordered_json peak;
    for (Tier t : kAllTiers) peak[std::string(TierName(t))] = r.peak[static_cast<int>(t)].v;
    j[r.policy] = {
        {"bytes",
         {{"h2d", r.link[LinkIndex(LinkClass::kH2D)].v},
          {"d2h", r.link[LinkIndex(LinkClass::kD2H)].v},
          {"nvme_read", r.link[LinkIndex(LinkClass::kNvmeRead)].v},
          {"nvme_write", r.link[LinkIndex(LinkClass::kNvmeWrite)].v},
          {"collective", r.link[LinkIndex(LinkClass::kCollective)].v}}},
        {"hit_ratio",
         {{"gpu", r.hit_ratio(r.cache.gpu_hits, r.cache.gpu_accesses)},
          {"cpu", r.hit_ratio(r.cache.cpu_hits, r.cache.cpu_accesses)}}},
        {"accesses", {{"gpu", r.cache.gpu_accesses}, {"cpu", r.cache.cpu_accesses}}},
        {"iteration_time_s", r.iteration_s},
        {"stalls", r.stalls},
        {"stalled_s", r.stalled_s},
        {"peak_bytes", peak},
        {"feasible", r.feasible},
        {"parameter_traffic_bytes", (r.cache.fetch_nvme_read + r.cache.fetch_h2d + r.cache.fetch_allgather).v},
        {"compulsory_traffic_bytes",
         (r.cache.compulsory_nvme_read + r.cache.compulsory_h2d + r.cache.compulsory_allgather).v},
        {"traffic_over_lower_bound", r.over_lower_bound()}};
  }
  return j.dump(2) + "\n";
}

std::string Text(const std::vector<Row>& rows, const Row& any, const sim::SimOptions& sim) {
  std::ostringstream o;
  o << "cache: gpu " << FormatBytes(any.cache.gpu_capacity) << " per GPU, cpu " << FormatBytes(any.cache.cpu_capacity)
    << " per rank (policy.gpu_cache, policy.cpu_cache)\n\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-11s %12s %12s %12s %12s %8s %8s %13s %12s %12s %12s\n", "policy", "h2d", "d2h",
                "nvme_read", "nvme_write", "gpu_hit", "cpu_hit", "iteration_s", "peak_gpu", "peak_cpu", "traffic/LB");
  o << line;
  for (const Row& r : rows) {
    if (!r.status.ok()) {
      o << r.policy << ": " << r.status.message() << "\n";
      continue;
    }
    std::snprintf(line, sizeof line, "%-11s %12s %12s %12s %12s %7.1f%% %7.1f%% %13.6g %12s %12s %12.3f\n",
                  r.policy.c_str(), FormatBytes(r.link[LinkIndex(LinkClass::kH2D)]).c_str(),
                  FormatBytes(r.link[LinkIndex(LinkClass::kD2H)]).c_str(),
                  FormatBytes(r.link[LinkIndex(LinkClass::kNvmeRead)]).c_str(),
                  FormatBytes(r.link[LinkIndex(LinkClass::kNvmeWrite)]).c_str(),
                  100 * r.hit_ratio(r.cache.gpu_hits, r.cache.gpu_accesses),
                  100 * r.hit_ratio(r.cache.cpu_hits, r.cache.cpu_accesses), r.iteration_s,
                  FormatBytes(r.peak[0]).c_str(), FormatBytes(r.peak[1]).c_str(), r.over_lower_bound());
    o << line;
  }
  if (sim.Stalls()) {  // each policy's own draws: its ops differ, so do its stalls
    o << "\nstalls (--stall-rate " << sim.stall_rate << " per second of compute, --stall-time " << sim.stall_time
      << " s; all ranks):";
    for (const Row& r : rows)
      if (r.status.ok()) o << ' ' << r.policy << ' ' << r.stalls << " (" << r.stalled_s << " s)";
    o << '\n';
  }
  o << "\ntraffic/LB: parameter traffic (NVMe reads, H2D copies, allgathers of parameters) over the\n"
       "compulsory traffic of fetching every parameter group once per iteration.\n";
  return o.str();
}

}  // namespace

Runner AddCompare(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* cmd = app.add_subcommand("compare",
                                 "Plan and simulate the scenario under each eviction policy (or, with --frameworks, as "
                                 "each framework runs it), one row each");
  AddCommon(cmd, *a, "Write the table (or JSON) to FILE instead of stdout");
  auto* policies =
      cmd->add_option("--policies", a->policies, "Comma-separated: lru,lfu,fifo,belady,cost_aware (default: all)");
  cmd->add_option("--frameworks", a->frameworks,
                  "Comma-separated: deepspeed,fsdp: the scenario as DeepSpeed ZeRO and as PyTorch FSDP2 run it (the "
                  "closest configuration of each, docs/fsdp.md): peaks, bytes per link, iteration and exposed "
                  "collective time")
      ->excludes(policies);
  cmd->add_option("--gpu-cache", a->gpu_cache, "Override policy.gpu_cache (bytes per GPU, e.g. 2GiB)");
  cmd->add_option("--cpu-cache", a->cpu_cache, "Override policy.cpu_cache (bytes per rank, e.g. 64GiB)");
  AddJitter(cmd, &a->sim);
  cmd->add_option("--jobs,-j", a->jobs, "Policies simulated at once (default: the number of cores)")
      ->check(CLI::PositiveNumber);
  return [a]() {
    if (!a->frameworks.empty()) return CompareFrameworks(*a, a->frameworks, a->sim, a->jobs);
    std::vector<std::pair<std::string, std::string>> base;  // --set values are applied by Load
    if (!a->gpu_cache.empty()) base.emplace_back("policy.gpu_cache", a->gpu_cache);
    if (!a->cpu_cache.empty()) base.emplace_back("policy.cpu_cache", a->cpu_cache);
    std::vector<Row> rows;
    std::stringstream list(a->policies);
    for (std::string p; std::getline(list, p, ',');) {
      if (!ParseEviction(p))
        return Fail(
            Status::InvalidArgument("--policies: unknown policy '" + p + "' (lru, lfu, fifo, belady, cost_aware)"));
      rows.push_back({p});
    }
    if (rows.empty()) return Fail(Status::InvalidArgument("--policies: no policy given"));
    // Without a parameter cache nothing is ever evicted: every policy's row
    // would be the same plan.
    if (rows.size() > 1) {
      auto s = Load(*a, base);
      if (!s.ok()) return Fail(s.status());
      if (s->policy.gpu_cache.v <= 0 && s->policy.cpu_cache.v <= 0)
        return Fail(Status::InvalidArgument(
            "the scenario has no parameter cache (policy.gpu_cache and policy.cpu_cache are 0), so nothing is evicted "
            "and every eviction policy plans the same; give one, e.g. --gpu-cache 1GiB or --cpu-cache 16GiB (or "
            "--policies with one policy)"));
    }
    ParallelFor(rows.size(), a->jobs > 0 ? a->jobs : DefaultJobs(), [&](size_t i) { RunRow(*a, base, rows[i]); });
    int rc = 0;
    for (const Row& r : rows)
      if (!r.status.ok()) rc = std::max(rc, r.status.ExitCode());
    const Row* ok = nullptr;
    for (const Row& r : rows)
      if (r.status.ok()) ok = &r;
    if (ok == nullptr) return Fail(rows.front().status);
    const int out = Emit(*a, a->json ? Json(rows) : Text(rows, *ok, a->sim));
    if (out != 0) return out;
    for (const Row& r : rows)
      if (!r.feasible) rc = std::max(rc, 1);
    return rc;
  };
}

}  // namespace strata::cli
