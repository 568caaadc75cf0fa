// Planner: gradient reduction. Stages 2-3 reduce-scatter every micro step in
// reduce_bucket_size buckets and move the reduced partition to the
// optimizer's tier; stages 0-1 reduce the replica once per iteration.
#include "plan_builder.h"

namespace strata::detail {

// Called after the backward op at `pos` wrote group `gi`'s gradient. A group
// joins a bucket at its last backward use (the tied embedding is used twice).
void PlanBuilder::GradientOut(int gi, int pos) {
  if (grad_pending_[gi] < 0 || pos != last_bwd_use_[gi]) return;
  const Elements size = Elements(groups_[gi].part.v * n_);
  if (!bucket_.empty() && (bucket_elems_ + size).v > s_.zero.reduce_bucket_size.v) FlushBucket();
  bucket_.push_back(gi);
  bucket_elems_ += size;
  if (bucket_elems_.v >= s_.zero.reduce_bucket_size.v) FlushBucket();
}

void PlanBuilder::FlushBucket() {
  if (bucket_.empty()) return;
  phase_ = Phase::kBackward;
  module_ = -1;
  Elements part;
  std::vector<BufferId> bufs;
  for (int gi : bucket_) {
    part += groups_[gi].part;
    bufs.push_back(grad_pending_[gi]);
    grad_pending_[gi] = -1;
  }
  const std::string name = Tag() + "reduce." + g_.param_groups[bucket_.front()].name;
  bucket_.clear();
  bucket_elems_ = Elements(0);

  OpId prev = last_compute_;
  std::vector<BufferId> reduced = bufs;
  if (n_ > 1) {
    Op rs = NewOp(name, OpKind::kReduceScatter, Stream::kComm);
    rs.bytes = Elements(part.v * n_).bytes(dt_);
    rs.group = 0;
    rs.deps = {prev};
    rs.reads = bufs;
    rs.frees = bufs;
    if (optim_tier_ == Tier::kGpu) {
      rs.writes = {grad_};
      reduced.clear();
    } else {
      BufferId r = NewBuffer(name + ".out", Tier::kGpu, StateKind::kCommBuffer, part.bytes(dt_));
      rs.allocs = {r};
      rs.writes = {r};
      reduced = {r};
    }
    prev = Emit(std::move(rs));
  }
  if (optim_tier_ == Tier::kCpu) {
    Op cp = NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
    cp.bytes = part.bytes(dt_);
    cp.deps = {prev};
    cp.reads = reduced;
    cp.frees = reduced;
    cp.writes = {grad_};
    prev = Emit(std::move(cp));
  } else if (optim_tier_ == Tier::kNvme) {
    // Gradients on NVMe: stage through pinned memory; later micro steps
    // read the partial sums back to accumulate.
    const BufferId staging = NewBuffer(name + ".staging", Tier::kCpu, StateKind::kSwapBuffer, part.bytes(dt_));
    OpId rd = -1;
    if (micro_ > 0) {
      Op r = NewOp(name + ".accum_read", OpKind::kNvmeRead, Stream::kNvmeRead);
      r.bytes = part.bytes(dt_);
      r.deps = {prev};
      r.allocs = {staging};
      r.reads = {grad_};
      r.writes = {staging};
      rd = Emit(std::move(r));
    }
    Op cp = NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
    cp.bytes = part.bytes(dt_);
    cp.deps = {prev, rd};
    if (rd < 0) cp.allocs = {staging};
    cp.reads = reduced;
    cp.frees = reduced;
    cp.writes = {staging};
    const OpId d2h = Emit(std::move(cp));
    Op w = NewOp(name + ".nvme_write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
    w.bytes = part.bytes(dt_);
    w.deps = {d2h};
    w.reads = {staging};
    w.frees = {staging};
    w.writes = {grad_};
    prev = Emit(std::move(w));
  }
  // Without overlap_comm the reduction runs in line with backward.
  if (!s_.zero.overlap_comm && prev != last_compute_) block_ = prev;
}

void PlanBuilder::ReduceReplica() {
  if (stage_ > 1) return;
  phase_ = Phase::kBackward;
  module_ = -1;
  const int64_t total = g_.total_params.v;
  const int64_t chunk = s_.zero.reduce_bucket_size.v;
  for (int64_t a = 0, i = 0; a < total; a += chunk, ++i) {
    const Elements n(std::min(chunk, total - a));
    const std::string name = Tag() + "reduce.replica." + std::to_string(i);
    OpId prev = last_compute_;
    if (n_ > 1) {
      Op op = NewOp(name, stage_ == 0 ? OpKind::kAllReduce : OpKind::kReduceScatter, Stream::kComm);
      op.bytes = n.bytes(dt_);
      op.group = 0;
      op.deps = {prev};
      op.reads = {grad_};
      op.writes = {grad_};
      prev = Emit(std::move(op));
    }
    if (grad_cpu_ >= 0) {
      Op cp = NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
      cp.bytes = Elements(CeilDiv(n.v, n_)).bytes(dt_);
      cp.deps = {prev};
      cp.reads = {grad_};
      cp.writes = {grad_cpu_};
      Emit(std::move(cp));
    }
  }
}

}  // namespace strata::detail
