// The Runner's state (runner_impl.h): initial weights, checkpoints, the
// optimizer step and the end of an iteration.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "devmodel/device_model.h"
#include "host/convert.h"
#include "runtime/checkpoint.h"
#include "runtime/runner_impl.h"
#include "runtime/storage.h"
#include "strata/core/paths.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"
#include "strata/executor/interrupt.h"
#include "strata/executor/sha256.h"

namespace strata::exec::detail {

Status Runner::Init(RunResult& r) {
  if (o_.save_every > 0) {
    STRATA_RETURN_IF_ERROR(CheckUserDirectory("the checkpoint directory", o_.checkpoint_dir));
    STRATA_RETURN_IF_ERROR(env_->CreateDir(o_.checkpoint_dir));
    STRATA_ASSIGN_OR_RETURN(auto lock, env_->LockFile(o_.checkpoint_dir + "/strata-checkpoint-rank" +
                                                      std::to_string(Comm::World().rank()) + ".lock"));
    checkpoint_lock_ = std::move(lock);
    STRATA_RETURN_IF_ERROR(ClaimCheckpointDir());
  }
  std::optional<LoadedCheckpoint> ck;
  if (!o_.resume_dir.empty()) {
    std::vector<StateSegment> want;
    for (const OwnSegment& o : OwnSegments()) want.push_back(o.seg);
    STRATA_ASSIGN_OR_RETURN(auto loaded, LoadCheckpoint(env_, o_.resume_dir, p_, want));
    ck = std::move(loaded);
    const CheckpointScalars& sc = ck->scalars;
    r.first_step = sc.global_steps;
    r.resumed_from = ck->path;
    r.losses = sc.losses;
    r.loss_scale.assign(sc.loss_scales.begin(), sc.loss_scales.end());
    r.step_skipped = sc.step_skipped;
    r.skipped_steps = sc.skipped_steps;
    r.step_time_s.assign(sc.losses.size(), 0.0);
    adam_steps_ = sc.adam_steps;
    scale_ = sc.loss_scale;
    good_steps_ = sc.good_steps;
  }
  STRATA_RETURN_IF_ERROR(InitWeights(ck ? &ck->master : nullptr));
  if (!ck) return Status::Ok();
  // The moments, where this plan keeps them (zero otherwise).
  size_t at = 0;
  for (const OwnSegment& o : OwnSegments()) {
    STRATA_RETURN_IF_ERROR(HostToRegion(o.exp_avg, reinterpret_cast<const std::byte*>(ck->exp_avg.data() + at)));
    STRATA_RETURN_IF_ERROR(HostToRegion(o.exp_avg_sq, reinterpret_cast<const std::byte*>(ck->exp_avg_sq.data() + at)));
    at += static_cast<size_t>(o.seg.count);
  }
  return Status::Ok();
}

// A run saving into a directory that holds checkpoints it does not resume
// from would interleave its global_stepN folders with theirs and move
// `latest` back: refused, or with --overwrite those are removed first (by
// rank 0; every rank sees the same directory).
Status Runner::ClaimCheckpointDir() {
  const bool resumes_here = !o_.resume_dir.empty() && std::filesystem::path(o_.resume_dir).lexically_normal() ==
                                                          std::filesystem::path(o_.checkpoint_dir).lexically_normal();
  if (resumes_here) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(auto held, CheckpointsIn(env_, o_.checkpoint_dir));
  if (held.empty()) return Status::Ok();
  if (!o_.overwrite_checkpoints)
    return Status::InvalidArgument("the checkpoint directory '" + o_.checkpoint_dir +
                                   "' holds another run's checkpoints (" + held + "): continue it with --resume " +
                                   o_.checkpoint_dir +
                                   ", save into another --checkpoint-dir, or pass --overwrite to replace them");
  return Comm::World().rank() == 0 ? RemoveCheckpoints(env_, o_.checkpoint_dir) : Status::Ok();
}

std::vector<Runner::OwnSegment> Runner::OwnSegments() const {
  std::vector<OwnSegment> out;
  auto at = [](BufferId b, Bytes base, int64_t skip, int64_t n) {
    return Region{b, base + Bytes(skip * 4), Bytes(n * 4)};
  };
  const int64_t N = dsize_;
  if (const int64_t S = flat_; S > 0) {
    const PlanParamGroup& g0 = p_.param_groups[static_cast<size_t>(groups_.front())];
    for (int gi : groups_) {
      const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
      const int64_t lo = std::max(g.flat_offset.v, drank_ * S),
                    hi = std::min(g.flat_offset.v + g.elements.v, drank_ * S + S);
      if (lo >= hi) continue;
      const int64_t skip = lo - drank_ * S, n = hi - lo;
      out.push_back({{static_cast<int>(gi), lo - g.flat_offset.v, n},
                     at(g0.master_buffer, g0.master_offset, skip, n),
                     at(g0.exp_avg_buffer, g0.exp_avg_offset, skip, n),
                     at(g0.exp_avg_sq_buffer, g0.exp_avg_sq_offset, skip, n)});
    }
    return out;
  }
  const bool sharded = p_.zero_stage >= 1 && N > 1;
  if (!sharded && drank_ != 0) return out;
  for (int gi : groups_) {
    const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
    const int64_t part = g.partition_elements.v, from = sharded ? drank_ * part : 0;
    const int64_t n = std::min(g.elements.v, from + part) - from;
    if (n > 0)
      out.push_back({{static_cast<int>(gi), from, n},
                     at(g.master_buffer, g.master_offset, 0, n),
                     at(g.exp_avg_buffer, g.exp_avg_offset, 0, n),
                     at(g.exp_avg_sq_buffer, g.exp_avg_sq_offset, 0, n)});
  }
  return out;
}

Status Runner::Save(RunResult& r, int steps) {
  RankState st;
  for (const OwnSegment& o : OwnSegments()) {
    st.segments.push_back(o.seg);
    const size_t base = st.master.size(), n = static_cast<size_t>(o.seg.count);
    for (auto [v, r] : {std::pair{&st.master, o.master}, {&st.exp_avg, o.exp_avg}, {&st.exp_avg_sq, o.exp_avg_sq}}) {
      v->resize(base + n);
      STRATA_RETURN_IF_ERROR(RegionToHost(r, reinterpret_cast<std::byte*>(v->data() + base)));
    }
  }
  CheckpointScalars sc;
  sc.global_steps = steps;
  sc.adam_steps = adam_steps_;
  sc.loss_scale = scale_;
  sc.good_steps = good_steps_;
  sc.skipped_steps = r.skipped_steps;
  sc.losses = r.losses;
  sc.loss_scales.assign(r.loss_scale.begin(), r.loss_scale.end());
  sc.step_skipped = r.step_skipped;
  ++saves_;
  SaveOptions so;
  so.bf16 = prec_ == Precision::kBf16;
  so.keep_last = o_.keep_last;
  so.kill_after_files = saves_ == o_.kill_in_save;
  STRATA_RETURN_IF_ERROR(SaveCheckpoint(env_, o_.checkpoint_dir, p_, *comm_, sc, st, so));
  r.checkpoints.push_back(o_.checkpoint_dir + "/global_step" + std::to_string(steps));
  return Status::Ok();
}

Status Runner::InitWeights(const std::vector<std::vector<float>>* from) {
  const int64_t N = dsize_;
  // Stages 1-2 (plan.h, flat_partition): the master is this rank's slice
  // of the whole flat buffer, written once every group is in it.
  const int64_t S = flat_;
  const bool cut = S > 0;
  std::vector<float> flat(static_cast<size_t>(S * N), 0.0f);
  for (int gi : groups_) {
    const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
    const int64_t part = g.partition_elements.v;
    std::vector<float> w = from != nullptr ? (*from)[gi] : model_->InitGroup(static_cast<int>(gi));
    if (cut) {
      std::copy(w.begin(), w.begin() + g.elements.v, flat.begin() + g.flat_offset.v);
    } else {
      // fp32 master: this rank's partition of the group, padded with zeros.
      w.resize(static_cast<size_t>(std::max(g.elements.v, part * (p_.zero_stage >= 1 ? N : 1))), 0.0f);
      const int64_t shard = p_.zero_stage >= 1 ? drank_ * part : 0;
      STRATA_RETURN_IF_ERROR(HostToRegion({g.master_buffer, g.master_offset, Bytes(part * 4)},
                                          reinterpret_cast<const std::byte*>(w.data() + shard)));
    }
    if (g.home_buffer < 0) continue;  // FSDP2: cast from the shard at each gather
    // Low precision: the whole group (replica, persistent) or the partition.
    const bool whole = p_.zero_stage < 3 || g.persistent;
    const int64_t n = whole ? g.elements.v : part, from = whole ? 0 : drank_ * part;
    std::vector<std::byte> low(static_cast<size_t>(n * lp_bytes_));
    FloatToLow(w.data() + from, low.data(), static_cast<size_t>(n), prec_);  // host data: the host kernel
    STRATA_RETURN_IF_ERROR(HostToRegion({g.home_buffer, g.home_offset, Bytes(n * lp_bytes_)}, low.data()));
  }
  if (cut) {
    const PlanParamGroup& g0 = p_.param_groups[static_cast<size_t>(groups_.front())];
    STRATA_RETURN_IF_ERROR(HostToRegion({g0.master_buffer, g0.master_offset, Bytes(S * 4)},
                                        reinterpret_cast<const std::byte*>(flat.data() + drank_ * S)));
  }
  return Status::Ok();
}

Status Runner::Step(const Op& op) {
  bool skip;
  float scale = scale_;
  if (delayed_now_) {
    // The previous step's gradients, at its loss scale; the ranks agreed
    // on its overflow at its end (no collective here: the backward's run
    // beside this step).
    skip = pending_overflow_;
    scale = pending_scale_;
  } else {  // Steps on several streams (partial offload) race to agree once.
    std::lock_guard<std::mutex> l(overflow_mu_);
    if (!overflow_agreed_) {  // every rank skips, or none does
      overflow_ = comm_->AnyTrue(overflow_);
      overflow_agreed_ = true;
    }
    skip = overflow_;
  }
  if (!skip) applied_ = true;
  const size_t n = static_cast<size_t>(op.elements.v);
  auto* master = reinterpret_cast<float*>(store_.data(op.master));
  DeviceStream& st = S(op.stream);
  // The new low-precision weights, beside the master, then copied out.
  STRATA_ASSIGN_OR_RETURN(
      auto out, be_->Allocate(p_.buffers[op.master.buffer].tier, n * static_cast<size_t>(lp_bytes_), /*zeroed=*/false));
  Status status;
  if (!skip) {
    const AdamStepConsts c = MakeAdamStep(AdamConfig{}, adam_steps_ + 1, 1.0f / scale);
    AdamArgs args{master,
                  store_.data(op.grad_in),
                  reinterpret_cast<float*>(store_.data(op.exp_avg)),
                  reinterpret_cast<float*>(store_.data(op.exp_avg_sq)),
                  out.data(),
                  prec_,
                  n,
                  op.grad_in.bytes.v == static_cast<int64_t>(n) * 4};
    status = st.AdamStep(args, c);
  } else {
    status = st.FromFloat(out.data(), master, n, prec_);  // skipped: weights unchanged
  }
  for (const Move& mv : op.moves) {
    if (mv.src.buffer != kOpOutput || !status.ok() || (mv.rank >= 0 && mv.rank != drank_)) continue;
    status = st.Copy(store_.data(mv.dst), out.data() + mv.src.offset.v, static_cast<size_t>(mv.dst.bytes.v));
  }
  const Status synced = Sync(op.stream);  // before `out` is released, whatever happened
  return status.ok() ? synced : status;
}

Result<bool> Runner::EndIteration(RunResult& r) {
  const bool delayed = p_.run.delayed_warmup >= 0;
  if (delayed && !overflow_agreed_) {  // no step agreed on this step's gradients
    overflow_ = comm_->AnyTrue(overflow_);
    overflow_agreed_ = true;
  }
  for (const Buffer& b : p_.buffers)
    if (b.resident && b.kind == StateKind::kGrad && b.tier != Tier::kNvme && b.stage == stage_ &&
        b.id != pending_grads_)
      STRATA_RETURN_IF_ERROR(
          S(Stream::kCompute).Zero(store_.data({b.id, Bytes(0), b.bytes}), static_cast<size_t>(b.bytes.v)));
  STRATA_RETURN_IF_ERROR(Sync(Stream::kCompute));
  for (bool& f : overflow_seen_) f = false;
  const bool applied = applied_;
  if (applied) ++adam_steps_;
  pending_overflow_ = overflow_;
  pending_scale_ = scale_;                       // what this step's gradients were scaled by
  if (step_ran_ && !applied) ++r.skipped_steps;  // without a delay: this step's overflow
  if (overflow_) {
    good_steps_ = 0;
    if (prec_ == Precision::kFp16) scale_ = std::max(1.0f, scale_ / 2);
    return applied;
  }
  if (prec_ == Precision::kFp16 && ++good_steps_ == 1000) {
    scale_ *= 2;
    good_steps_ = 0;
  }
  return applied;
}

}  // namespace strata::exec::detail
