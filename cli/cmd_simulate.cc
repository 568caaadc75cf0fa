// strata simulate: replay the plan in the SimGrid bandwidth model.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "strata/simulator/sim_report.h"

namespace strata::cli {
namespace {

struct SimulateArgs : CommonArgs {
  std::string trace, csv, collectives = "ring";
  bool all_nodes = false;
  int64_t max_op_instances = sim::SimOptions{}.max_op_instances;
  double timeout_s = sim::SimOptions{}.timeout_s;
  sim::SimOptions sim;  // --jitter, --jitter-seed (the rest is set below)
};

}  // namespace

Runner AddSimulate(CLI::App& app) {
  auto a = std::make_shared<SimulateArgs>();
  auto* cmd = app.add_subcommand("simulate",
                                 "Replay the plan on a SimGrid model of the hardware: iteration time, "
                                 "throughput, TFLOPS, exposed transfer time, bottleneck");
  AddCommon(cmd, *a, "Write the report (text, or JSON with --json) to FILE instead of stdout");
  cmd->add_option("--trace", a->trace, "Write the timeline as Chrome Trace Event JSON (Perfetto, chrome://tracing)");
  cmd->add_option("--csv", a->csv, "Write op spans to FILE and memory samples to FILE's .memory.csv");
  cmd->add_option("--collectives", a->collectives, "Collective model: ring (one flow per rank) or ring_steps")
      ->check(CLI::IsMember({"ring", "ring_steps"}));
  cmd->add_flag("--all-nodes", a->all_nodes, "Simulate every node instead of one (nodes are symmetric under SPMD)");
  cmd->add_option("--max-op-instances", a->max_op_instances,
                  "Refuse a simulation of more op instances (plan ops x simulated ranks) than this; each costs about "
                  "45 bytes and 0.5-5 us here (docs/limits.md)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  AddJitter(cmd, &a->sim);
  cmd->add_option("--timeout", a->timeout_s, "Stop the simulation after this many seconds (exit 1)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return [a]() {
    sim::SimOptions opts = a->sim;
    opts.collectives = a->collectives == "ring" ? sim::CollectiveModel::kRing : sim::CollectiveModel::kRingSteps;
    opts.reduce_symmetric_nodes = !a->all_nodes;
    opts.max_op_instances = a->max_op_instances;
    opts.timeout_s = a->timeout_s;
    opts.progress = isatty(2) != 0;
    auto sim = LoadPlanSimulate(*a, {}, opts);
    if (!sim.ok()) return Fail(sim.status());
    const bool fits = sim->planned.feasible;
    if (!fits) std::cerr << "strata: the plan does not fit (see the report); exit 1\n";
    const auto& violations = sim->planned.report.violations;
    // The trace records the jitter with the overrides: a replay is
    // reproduced only with the same amount and seed.
    Stamp(*a, &sim->result.timeline, JitterOverrides(a->sim));
    const sim::SimResult* r = &sim->result;
    const auto summary = sim::Summarize(sim->planned.plan, *r);
    if (const int rc = Emit(*a, a->json ? sim::SummaryJson(r->timeline, summary, violations)
                                        : sim::SummaryText(r->timeline, summary, r->wall_s, violations));
        rc != 0)
      return rc;
    auto written = WriteTimelineFiles(r->timeline, a->trace, a->csv);
    if (!written.ok()) return Fail(written);
    return fits ? 0 : 1;
  };
}

}  // namespace strata::cli
