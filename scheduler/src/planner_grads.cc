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
  const std::vector<int> groups = bucket_;
  for (int gi : groups) {
    part += groups_[gi].part;
    bufs.push_back(grad_pending_[gi]);
  }
  const std::string name = Tag() + "reduce." + g_.param_groups[groups.front()].name;
  bucket_.clear();
  bucket_elems_ = Elements(0);
  // Per group: its whole gradient (pending buffer), its shard in the bucket's
  // reduced buffer or staging, and its place in the flat partition.
  auto whole = [&](size_t k) { return R(bufs[k], 0, Elements(groups_[groups[k]].part.v * n_).bytes(dt_).v); };
  auto flat = [&](size_t k) {
    const GroupLayout& gl = groups_[groups[k]];
    return R(grad_, gl.flat_offset.bytes(dt_).v, gl.part.bytes(dt_).v);
  };
  auto packed = [&](BufferId b) {  // shard k at its offset in a bucket-sized buffer
    std::vector<Region> out;
    int64_t off = 0;
    for (int gi : groups) {
      out.push_back(R(b, off, groups_[gi].part.bytes(dt_).v));
      off += groups_[gi].part.bytes(dt_).v;
    }
    return out;
  };

  OpId prev = last_compute_;
  std::vector<BufferId> reduced = bufs;
  std::vector<Region> shards;  // where each group's reduced shard is now
  for (size_t k = 0; k < groups.size(); ++k) shards.push_back(whole(k));  // one rank: the whole is the shard
  if (n_ > 1) {
    Op rs = NewOp(name, OpKind::kReduceScatter, Stream::kComm);
    rs.bytes = Elements(part.v * n_).bytes(dt_);
    rs.group = 0;
    rs.deps = {prev};
    rs.reads = bufs;
    rs.frees = bufs;
    if (optim_tier_ == Tier::kGpu) {
      rs.writes = {grad_};
      for (size_t k = 0; k < groups.size(); ++k) rs.moves.push_back({whole(k), flat(k), /*accumulate=*/true});
      reduced.clear();
    } else {
      BufferId r = NewBuffer(name + ".out", Tier::kGpu, StateKind::kCommBuffer, part.bytes(dt_));
      rs.allocs = {r};
      rs.writes = {r};
      shards = packed(r);
      for (size_t k = 0; k < groups.size(); ++k) rs.moves.push_back({whole(k), shards[k]});
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
    for (size_t k = 0; k < groups.size(); ++k) cp.moves.push_back({shards[k], flat(k), /*accumulate=*/true});
    prev = Emit(std::move(cp));
  } else if (optim_tier_ == Tier::kNvme) {
    // Gradients on NVMe: stage through pinned memory; later micro steps
    // read the partial sums back to accumulate.
    const BufferId staging = NewBuffer(name + ".staging", Tier::kCpu, StateKind::kSwapBuffer, part.bytes(dt_));
    const std::vector<Region> staged = packed(staging);
    OpId rd = -1;
    if (micro_ > 0) {
      Op r = NewOp(name + ".accum_read", OpKind::kNvmeRead, Stream::kNvmeRead);
      r.bytes = part.bytes(dt_);
      r.deps = {prev};
      // The partial sums must be on NVMe: after the last micro step's write.
      for (int gi : groups) r.deps.push_back(grad_nvme_write_[gi]);
      r.allocs = {staging};
      r.reads = {grad_};
      r.writes = {staging};
      for (size_t k = 0; k < groups.size(); ++k) r.moves.push_back({flat(k), staged[k]});
      rd = Emit(std::move(r));
    }
    Op cp = NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
    cp.bytes = part.bytes(dt_);
    cp.deps = {prev, rd};
    if (rd < 0) cp.allocs = {staging};
    cp.reads = reduced;
    cp.frees = reduced;
    cp.writes = {staging};
    // A fresh staging buffer is zero, so += works for the first micro step too.
    for (size_t k = 0; k < groups.size(); ++k) cp.moves.push_back({shards[k], staged[k], /*accumulate=*/true});
    const OpId d2h = Emit(std::move(cp));
    Op w = NewOp(name + ".nvme_write", OpKind::kNvmeWrite, Stream::kNvmeWrite);
    w.bytes = part.bytes(dt_);
    w.deps = {d2h};
    w.reads = {staging};
    w.frees = {staging};
    w.writes = {grad_};
    for (size_t k = 0; k < groups.size(); ++k) w.moves.push_back({staged[k], flat(k)});
    prev = Emit(std::move(w));
    for (int gi : groups) grad_nvme_write_[gi] = prev;
  }
  for (int gi : groups) grad_pending_[gi] = -1;
  // Without overlap_comm the reduction runs in line with backward.
  if (!s_.zero.overlap_comm && prev != last_compute_) block_ = prev;
}

// Stages 0-1 reduce the replica once per iteration, groups bucketed by
// reduce_bucket_size: stage 0 all-reduces in place; stage 1 reduce-scatters
// each group into the flat gradient partition the optimizer reads (on the
// GPU, or through a bucket-sized buffer and D2H to the CPU).
void PlanBuilder::ReduceReplica() {
  if (stage_ > 1) return;
  phase_ = Phase::kBackward;
  module_ = -1;
  const bool to_cpu = grad_cpu_ >= 0;
  if (n_ == 1 && !to_cpu) return;  // one rank, optimizer on the GPU: the replica is the gradient
  std::vector<int> bucket;
  int64_t bucket_elems = 0, index = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    const std::string name = Tag() + "reduce.replica." + std::to_string(index++);
    OpId prev = last_compute_;
    Elements part;
    for (int gi : bucket) part += groups_[gi].part;
    std::vector<Region> shards;  // where each group's reduced shard is
    if (n_ > 1) {
      Op op = NewOp(name, stage_ == 0 ? OpKind::kAllReduce : OpKind::kReduceScatter, Stream::kComm);
      op.group = 0;
      op.deps = {prev};
      op.reads = {grad_};
      int64_t bytes = 0, off = 0;
      BufferId reduced = -1;
      if (stage_ == 1 && to_cpu) {
        reduced = NewBuffer(name + ".out", Tier::kGpu, StateKind::kCommBuffer, part.bytes(dt_));
        op.allocs = {reduced};
      }
      for (int gi : bucket) {
        const GroupLayout& gl = groups_[gi];
        const Region whole = R(grad_, gl.home_offset, Padded(gl).bytes(dt_));
        bytes += whole.bytes;
        if (stage_ == 0) {
          op.moves.push_back({whole, whole});
          continue;
        }
        const Region shard = to_cpu ? R(reduced, off, gl.part.bytes(dt_).v)
                                    : R(grad_part_, gl.flat_offset.bytes(dt_).v, gl.part.bytes(dt_).v);
        op.moves.push_back({whole, shard});
        shards.push_back(shard);
        off += gl.part.bytes(dt_).v;
      }
      op.writes = {stage_ == 0 ? grad_ : to_cpu ? reduced : grad_part_};
      op.bytes = Bytes(bytes);
      prev = Emit(std::move(op));
      if (stage_ == 0 || !to_cpu) {
        bucket.clear();
        bucket_elems = 0;
        return;
      }
      // Stage 1, optimizer on the CPU: the reduced shards go down.
      Op cp = NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
      cp.bytes = part.bytes(dt_);
      cp.deps = {prev};
      cp.reads = {reduced};
      cp.frees = {reduced};
      cp.writes = {grad_cpu_};
      for (size_t k = 0; k < bucket.size(); ++k)
        cp.moves.push_back({shards[k], R(grad_cpu_, groups_[bucket[k]].flat_offset.bytes(dt_).v, shards[k].bytes)});
      Emit(std::move(cp));
    } else {
      // One rank, optimizer on the CPU: the whole gradient goes down.
      Op cp = NewOp(name + ".d2h", OpKind::kCopyD2H, Stream::kD2H);
      cp.bytes = part.bytes(dt_);
      cp.deps = {prev};
      cp.reads = {grad_};
      cp.writes = {grad_cpu_};
      for (int gi : bucket) {
        const GroupLayout& gl = groups_[gi];
        cp.moves.push_back({R(grad_, gl.home_offset, gl.elements.bytes(dt_)),
                            R(grad_cpu_, gl.flat_offset.bytes(dt_), gl.elements.bytes(dt_))});
      }
      Emit(std::move(cp));
    }
    bucket.clear();
    bucket_elems = 0;
  };
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const int64_t e = Padded(groups_[gi]).v;
    if (!bucket.empty() && bucket_elems + e > s_.zero.reduce_bucket_size.v) flush();
    bucket.push_back(static_cast<int>(gi));
    bucket_elems += e;
  }
  flush();
}

}  // namespace strata::detail
