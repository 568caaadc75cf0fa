// Checkpoints of a run (private to the executor): what `strata run
// --save-every N --checkpoint-dir D` writes and `--resume D` reads.
//
// Layout, after DeepSpeed's (runtime/engine.py, save_checkpoint and
// _get_zero_ckpt_name): D/latest holds the tag of the newest checkpoint,
// "global_stepN"; D/global_stepN/ holds one optimizer-state file per rank,
// [bf16_]zero_pp_rank_R_mp_rank_00_optim_states.bin, and strata_checkpoint.json,
// the manifest. Where it differs: the files are Strata's binary format, not
// torch pickles; there is no model-states file, because the low-precision
// weights are always the fp32 master rounded (they are rebuilt from it);
// and the manifest carries what DeepSpeed puts in the model-states file
// (global steps, skipped steps, the loss scaler) plus each file's size and
// XXH3-64 checksum, and its own checksum ("manifest_xxh3": XXH3-64 of the
// manifest's compact JSON without that key), so that no value a resume
// reads is outside a checksum.
//
// A rank's file holds its fp32 master weights and Adam moments as segments
// of parameter groups (group, first element, count), so a checkpoint is
// independent of the placement, ZeRO stage and partitioning that wrote it:
// a run may resume under another offload device, stage or world size.
//
// Atomicity: everything is written under D/global_stepN.tmp, fsynced, the
// directory renamed to D/global_stepN, then D/latest replaced by rename.
// A crash at any point leaves the previous `latest` and its directory whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/executor/env.h"
#include "strata/plan/plan.h"

namespace strata::exec {

class Comm;

// The run's scalars: the same on every rank.
struct CheckpointScalars {
  int global_steps = 0;    // steps done (the data position: the next step's index)
  int64_t adam_steps = 0;  // steps the optimizer applied (Adam's bias correction)
  float loss_scale = 1;    // DeepSpeed's dynamic loss scaler: cur_scale
  int good_steps = 0;      // steps since the last overflow (scale doubles at 1000)
  int skipped_steps = 0;
  std::vector<double> losses, loss_scales;  // per step so far
  std::vector<bool> step_skipped;
};

// Elements [start, start + count) of parameter group `group`.
struct StateSegment {
  int group = 0;
  int64_t start = 0, count = 0;
};

// One rank's optimizer state: its segments and, for each, `count` values
// of the master weights and both moments, concatenated in segment order.
struct RankState {
  std::vector<StateSegment> segments;
  std::vector<float> master, exp_avg, exp_avg_sq;
};

struct SaveOptions {
  bool bf16 = false;  // DeepSpeed's "bf16_" file prefix (_get_zero_ckpt_prefix)
  // Once published, keep only the newest `keep_last` checkpoints of the
  // directory (global_stepN folders that hold a manifest); 0 keeps all.
  int keep_last = 0;
  // Test failpoint: the process kills itself (SIGKILL) once its rank file
  // is written, before the rename.
  bool kill_after_files = false;
};

// Writes a checkpoint of every rank (collective: every rank calls it with
// its state).
Status SaveCheckpoint(Env* env, const std::string& dir, const Plan& plan, Comm& comm, const CheckpointScalars& scalars,
                      const RankState& mine, const SaveOptions& options);

// What checkpoints `dir` holds, for a message: "" when none (or no such
// directory), else `latest`'s tag or the first global_stepN folder. A run
// that saves into `dir` without resuming from it refuses one that holds
// any unless told to overwrite (runner_state.cc).
Result<std::string> CheckpointsIn(Env* env, const std::string& dir);

// Removes every checkpoint of `dir` (global_stepN folders holding a
// manifest, crashed saves' .tmp folders, `latest`): `--overwrite`.
Status RemoveCheckpoints(Env* env, const std::string& dir);

struct LoadedCheckpoint {
  std::string path;  // D/global_stepN
  CheckpointScalars scalars;
  std::vector<std::vector<float>> master;  // per group, all its elements
  // For the wanted segments (LoadCheckpoint's argument), concatenated.
  std::vector<float> exp_avg, exp_avg_sq;
};

// Reads D's latest checkpoint for `plan`: the manifest's and every file's
// checksum are checked before use, every count and offset read is bounded
// by the file that holds it and the plan's parameter groups, and the
// groups must be the plan's (names and sizes). Missing, damaged or edited
// checkpoints are errors naming the file.
Result<LoadedCheckpoint> LoadCheckpoint(Env* env, const std::string& dir, const Plan& plan,
                                        const std::vector<StateSegment>& want);

}  // namespace strata::exec
