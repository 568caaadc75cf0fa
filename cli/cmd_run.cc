// strata run: execute the plan for real on the host backend (or --backend cuda).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "exec_common.h"
#include "strata/cost/bound.h"
#include "strata/cost/endurance.h"
#include "strata/executor/comm.h"
#include "strata/executor/interrupt.h"
#include "strata/executor/runner.h"
#include "wear_json.h"

namespace strata::cli {
namespace {

// The steps this process ran (a resumed run's earlier steps are not its).
int64_t StepsRun(const exec::RunResult& r) {
  return std::max<int64_t>(1, static_cast<int64_t>(r.losses.size()) - r.first_step);
}

struct RunArgs : ExecArgs {
  std::string trace, csv;
  int save_every = 0, keep_last = 0;
  bool overwrite = false;
  std::string checkpoint_dir, resume;
};

// STRATA_FAILPOINT=kill-in-save:N (tests): the N-th checkpoint save kills
// the process after writing its files, before publishing them.
int KillInSave() {
  const char* f = std::getenv("STRATA_FAILPOINT");
  const std::string v = f != nullptr ? f : "";
  const std::string key = "kill-in-save:";
  return v.rfind(key, 0) == 0 ? std::atoi(v.c_str() + key.size()) : 0;
}

// One step's line, printed as the step ends (stdout, or stderr under
// --json): a killed run leaves the losses it reached.
// `delayed_warmup`: the plan's (RunSpec::delayed_warmup), which says why a
// step applied nothing.
std::string StepLine(const exec::RunResult& r, size_t i, int steps, int delayed_warmup) {
  std::ostringstream o;
  const int at = static_cast<int>(i);
  const char* skipped = !r.step_skipped[i]     ? ""
                        : at == delayed_warmup ? "; no update: the delayed update keeps these gradients"
                        : at > delayed_warmup && delayed_warmup >= 0
                            ? "; no update: the last step's gradients overflowed"
                            : "; skipped: fp16 overflow";
  o << "step " << i + 1 << "  loss " << r.losses[i] << "  (loss scale " << r.loss_scale[i] << skipped << ")  "
    << FormatDuration(r.step_time_s[i]) << (static_cast<int>(i) == r.first_step && steps > 1 ? "  (warm-up)" : "")
    << "\n";
  return o.str();
}

std::string Text(const exec::RunResult& r, const ResourceBound& b, const DriveWear& wear) {
  std::ostringstream o;
  o << "\niteration time    " << FormatDuration(r.iteration_time_s)
    << (r.losses.size() - r.first_step > 1 ? " (mean of the steps after the warm-up)\n" : " (one step)\n");
  if (!r.resumed_from.empty())
    o << "resumed from      " << r.resumed_from << " (steps 1-" << r.first_step << " ran before it)\n";
  o << "resource bound    " << FormatDuration(b.busiest.seconds) << " (" << b.busiest.resource
    << ", at the hardware section's rates): " << r.iteration_time_s / b.busiest.seconds << "x\n";
  o << "busiest as run    " << FormatDuration(r.busiest_as_run_s)
    << " (a stream's or the NVMe device's busy time): " << r.iteration_time_s / r.busiest_as_run_s << "x\n";
  // Every step runs the same plan, the warm-up too: a step's bytes are the
  // run's over its steps (the time above leaves the warm-up out).
  const int64_t steps = StepsRun(r);
  o << "bytes moved per step (" << steps << " step" << (steps == 1 ? "" : "s") << " run, the same plan each):\n";
  for (int c = 1; c < kNumLinkClasses; ++c)
    o << "  " << LinkClassName(static_cast<LinkClass>(c)) << "  " << FormatBytes(Bytes(r.bytes_moved[c].v / steps))
      << "\n";
  if (r.nvme_write_requests > 0)
    o << "  nvme write requests  " << r.nvme_write_requests / steps << " (as submitted, aio.block_size pieces)\n";
  if (r.nvme_raw_written > 0) {
    char ratio[64];
    std::snprintf(ratio, sizeof ratio, "%.4f", static_cast<double>(r.nvme_stored_written) / r.nvme_raw_written);
    o << "  nvme compression     " << FormatBytes(Bytes(static_cast<int64_t>(r.nvme_stored_written / steps)))
      << " written for " << FormatBytes(Bytes(static_cast<int64_t>(r.nvme_raw_written / steps))) << " (stored/raw "
      << ratio << ", measured; policy.compression)\n";
  }
  o << "peak memory: gpu " << FormatBytes(r.peak[0]) << ", cpu " << FormatBytes(r.peak[1]) << ", nvme "
    << FormatBytes(r.peak[2]) << "\n";
  if (r.skipped_steps > 0) o << "skipped steps (fp16 overflow): " << r.skipped_steps << "\n";
  if (r.swap_verified_bytes + r.swap_unverified_bytes > 0)
    o << "NVMe reads checksum-verified: " << FormatBytes(Bytes(static_cast<int64_t>(r.swap_verified_bytes))) << " of "
      << FormatBytes(Bytes(static_cast<int64_t>(r.swap_verified_bytes + r.swap_unverified_bytes))) << "\n";
  // The plan's NVMe writes (the run's, step by step) at the measured rate.
  for (const std::string& line : WearLines(wear, ", at the measured iteration time", "at the measured rate"))
    o << line << "\n";
  o << "weights digest (SHA-256 of fp32 master weights): " << r.weights_digest << "\n";
  return o.str();
}

std::string Json(const exec::RunResult& r, const ResourceBound& b, const DriveWear& wear) {
  nlohmann::ordered_json j;
  j["losses"] = r.losses;
  j["loss_scale"] = r.loss_scale;
  j["iteration_time_s"] = r.iteration_time_s;
  j["step_time_s"] = r.step_time_s;
  nlohmann::ordered_json res;
  for (const ResourceTime& t : b.resources) res[t.resource] = t.seconds;
  j["resource_bound"] = {{"seconds", b.busiest.seconds}, {"resource", b.busiest.resource}, {"resources", res}};
  j["over_resource_bound"] = r.iteration_time_s / b.busiest.seconds;
  j["busiest_as_run_s"] = r.busiest_as_run_s;
  j["over_busiest_as_run"] = r.iteration_time_s / r.busiest_as_run_s;
  nlohmann::ordered_json moved, peak;
  for (int c = 1; c < kNumLinkClasses; ++c)
    moved[std::string(LinkClassName(static_cast<LinkClass>(c)))] = r.bytes_moved[c].v;
  for (Tier t : kAllTiers) peak[std::string(TierName(t))] = r.peak[static_cast<int>(t)].v;
  j["bytes_moved"] = moved;  // over every step run, the warm-up included
  nlohmann::ordered_json per_step;
  for (int c = 1; c < kNumLinkClasses; ++c)
    per_step[std::string(LinkClassName(static_cast<LinkClass>(c)))] = r.bytes_moved[c].v / StepsRun(r);
  j["bytes_moved_per_step"] = per_step;
  j["nvme_write_requests_per_step"] = r.nvme_write_requests / StepsRun(r);
  if (r.nvme_raw_written > 0) {
    j["nvme_raw_written_per_step"] = r.nvme_raw_written / StepsRun(r);
    j["nvme_stored_written_per_step"] = r.nvme_stored_written / StepsRun(r);
  }
  j["peak_bytes"] = peak;
  j["nvme_wear"] = WearJson(wear);
  j["skipped_steps"] = r.skipped_steps;
  j["step_skipped"] = r.step_skipped;
  j["swap_verified_bytes"] = r.swap_verified_bytes;
  j["swap_unverified_bytes"] = r.swap_unverified_bytes;
  j["first_step"] = r.first_step;
  j["resumed_from"] = r.resumed_from;
  j["checkpoints"] = r.checkpoints;
  j["weights_digest"] = r.weights_digest;
  return j.dump(2) + "\n";
}

}  // namespace

Runner AddRun(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand(
      "run",
      "Execute the plan for real on the host backend (MLP or GPT; under mpirun, a rank per process): "
      "losses, time, bytes moved, peak memory, weights digest");
  AddCommon(cmd, *a, "Write the report (text, or JSON with --json) to FILE instead of stdout; the steps still print");
  cmd->add_option("--steps", a->steps, "Training steps (iterations)")->check(CLI::PositiveNumber);
  AddExecOptions(cmd, *a);
  cmd->add_option("--trace", a->trace, "Write the last step's timeline as Chrome Trace Event JSON");
  cmd->add_option("--csv", a->csv, "Write the last step's op spans (and memory to FILE's .memory.csv)");
  cmd->add_option("--save-every", a->save_every,
                  "Write a checkpoint every N steps (fp32 master weights, Adam moments, step counters, loss scaler; "
                  "DeepSpeed's layout: DIR/latest, DIR/global_stepN/)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--checkpoint-dir", a->checkpoint_dir, "Where --save-every writes (default: the --resume directory)");
  cmd->add_option("--resume", a->resume,
                  "Continue from the latest checkpoint in DIR; --steps counts all steps, those before it included");
  cmd->add_option("--keep-last", a->keep_last,
                  "Keep only the newest N checkpoints of the checkpoint directory after each save (default: all, "
                  "as DeepSpeed keeps them)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--overwrite", a->overwrite,
                "Save into a checkpoint directory that holds another run's checkpoints (not resumed from): they are "
                "removed first");
  return [a]() {
    // Under mpirun the ranks are the plan's world (tensor x pipeline x data
    // parallel): plan for one node of that many GPUs.
    exec::Comm& comm = exec::Comm::World();
    if (comm.size() > 1 && comm.rank() == 0)
      std::cerr << "strata: " << comm.size() << " MPI ranks: planning for 1 node of " << comm.size() << " GPUs\n";
    auto planned = LoadAndPlan(*a, MpiWorldOverrides());
    if (!planned.ok()) return Fail(planned.status());
    if (!planned->feasible) {
      for (const auto& v : planned->report.violations) std::cerr << "strata: " << v.message << "\n";
      return 1;
    }
    if (a->checkpoint_dir.empty()) a->checkpoint_dir = a->resume;
    if (a->save_every > 0 && a->checkpoint_dir.empty())
      return Fail(Status::InvalidArgument("--save-every needs --checkpoint-dir (or --resume) to say where"));
    auto o = RunOptionsFrom(*a);
    if (!o.ok()) return Fail(o.status());
    o->save_every = a->save_every;
    o->checkpoint_dir = a->checkpoint_dir;
    o->resume_dir = a->resume;
    o->keep_last = a->keep_last;
    o->overwrite_checkpoints = a->overwrite;
    o->kill_in_save = KillInSave();
    // Losses as they happen, from rank 0 (they are reduced over ranks).
    std::ostream& live = a->json ? std::cerr : std::cout;
    size_t saved = 0;
    o->after_step = [&](int step, const exec::RunResult& res) {
      if (comm.rank() != 0) return Status::Ok();
      if (step == res.first_step && !res.resumed_from.empty())
        live << "resumed from " << res.resumed_from << " (steps 1-" << res.first_step << ")\n";
      live << StepLine(res, static_cast<size_t>(step), a->steps - res.first_step, planned->plan.run.delayed_warmup);
      for (; saved < res.checkpoints.size(); ++saved)
        std::cerr << "checkpoint saved: " << res.checkpoints[saved] << "\n";
      live << std::flush;
      return Status::Ok();
    };
    // Under mpirun a rank may sit in a collective its stopped peers never
    // join, and mpirun kills soon after its SIGTERM: a short grace.
    exec::InstallStopHandlers(comm.size() > 1 ? 0.5 : 10);
    auto r = exec::RunTraining(planned->plan, *o);
    if (!r.ok()) {
      std::cerr << "strata: " << (comm.size() > 1 ? "rank " + std::to_string(comm.rank()) + ": " : "")
                << r.status().message() << "\n";
      // Stopped by a signal: 128 + its number (130 SIGINT, 143 SIGTERM).
      const int code = r.status().code() == Status::Code::kCancelled ? 128 + exec::StopSignal() : r.status().ExitCode();
      // The other ranks may be blocked in a collective: end the job.
      if (comm.size() > 1) comm.Abort(code);
      return code;
    }
    if (comm.rank() != 0) return 0;  // rank 0 reports
    const ResourceBound bound = ComputeResourceBound(planned->plan, planned->scenario.hardware);
    const DriveWear wear = NvmeWear(planned->plan, planned->scenario.hardware.nvme, r->iteration_time_s);
    if (const int rc = Emit(*a, a->json ? Json(*r, bound, wear) : Text(*r, bound, wear)); rc != 0) return rc;
    Stamp(*a, &r->timeline);
    auto written = WriteTimelineFiles(r->timeline, a->trace, a->csv);
    if (!written.ok()) return Fail(written);
    return 0;
  };
}

}  // namespace strata::cli
