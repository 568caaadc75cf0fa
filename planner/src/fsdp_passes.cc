// FSDP2 front end: forward and backward of one micro step (fsdp_builder.h).
// What each rule follows in PyTorch's source is docs/fsdp2-source.md's
// sections 3-5 (PG = _fsdp_param_group.py, COLL = _fsdp_collectives.py).
#include <algorithm>

#include "fsdp_builder.h"

namespace strata::detail {

namespace {

// The units a pass needs, in the order it first needs them, with the
// position of each first need; `next` is the first not reached yet.
struct PassOrder {
  std::vector<int> units, start;
  size_t next = 0;
};

template <typename Start>
PassOrder OrderBy(const std::vector<FsdpUnit>& units, Start start) {
  PassOrder o;
  for (int u = 0; u < static_cast<int>(units.size()); ++u)
    if (units[u].shard > 0 && start(units[u]) >= 0) o.units.push_back(u);
  std::stable_sort(o.units.begin(), o.units.end(), [&](int a, int b) { return start(units[a]) < start(units[b]); });
  for (int u : o.units) o.start.push_back(start(units[u]));
  return o;
}

}  // namespace

void FsdpBuilder::MicroStep() {
  const size_t U = units_.size();
  gathered_.assign(U, -1);
  post_shard_.assign(U, -1);
  ugrad_.assign(U, -1);
  gather_op_.assign(U, -1);
  act_.assign(graph_.modules.size(), -1);
  ckpt_.assign(static_cast<size_t>(graph_.num_layers), -1);
  held_input_ = -1;
  // Forward: the root first (its pre_forward runs before any block's).
  // FSDP2 never looks ahead on its own, but unit t+1's all-gather is issued
  // when the host reaches its pre_forward, its copy-in waiting only for
  // copy-out(t-1) (PG.wait_for_unshard); the plan lets it wait for the
  // compute before unit t, one unit more conservative: it overlaps unit t's
  // compute. Explicit prefetch of k units (set_modules_to_forward_prefetch)
  // issues t+1..t+k after copy-out(t).
  PassOrder fwd = OrderBy(units_, [](const FsdpUnit& u) { return u.root ? 0 : u.first_fwd; });
  // Backward: every unit in the order its backward starts; those resharded
  // after forward gather again. Unit t+b's all-gather follows copy-out(t)
  // (PG._backward_prefetch, one unit by default, from a kept unit too: the
  // root's pre_backward prefetches the last block).
  PassOrder bwd = OrderBy(units_, [](const FsdpUnit& u) { return u.first_bwd; });
  issued_.assign(U, 0);
  before_.assign(std::max(fwd.units.size(), bwd.units.size()), -1);
  for (int p = 0; p < static_cast<int>(pos_.seq.size()); ++p) {
    const bool backward = pos_.seq[p].kind != Position::Kind::kForward;
    if (backward && p > 0 && pos_.seq[p - 1].kind == Position::Kind::kForward) {
      before_.assign(before_.size(), -1);
      issued_.assign(U, 0);
    }
    PassOrder& pass = backward ? bwd : fwd;
    for (; pass.next < pass.units.size() && pass.start[pass.next] == p; ++pass.next) {
      before_[pass.next] = last_compute_;
      IssueGathers(pass.units, static_cast<int>(pass.next) + Ahead(backward), backward);
    }
    Compute(p);
  }
  // The root's final callback waits for the last reduce-scatter and drops
  // its input (ST._root_post_backward_final_callback).
  if (held_input_ >= 0) AddOnce(plan_.ops[static_cast<size_t>(held_rs_op_)].frees, held_input_);
}

// Issues the all-gathers of order[0..through] not yet issued; entry t's
// waits for the last compute before entry t - ahead's first position.
void FsdpBuilder::IssueGathers(const std::vector<int>& order, int through, bool backward) {
  const int ahead = Ahead(backward);
  for (int t = 0; t <= through && t < static_cast<int>(order.size()); ++t) {
    const int u = order[t];
    if (issued_[u]) continue;
    issued_[u] = 1;
    if (backward && !Resharded(u)) continue;  // still gathered from its forward
    gather_op_[u] = Gather(u, before_[std::max(0, t - ahead)], backward);
  }
}

// One unit's all-gather into its unsharded buffer (COLL.foreach_all_gather
// then foreach_all_gather_copy_out): each parameter's padded rows, W x its
// shard, laid end to end; the copy-in casts the fp32 shard to param_dtype
// (a move with narrow). Under CPU offload the shard first comes over PCIe;
// a unit resharded to k ranks gathers its post-forward shard over k.
OpId FsdpBuilder::Gather(int u, OpId dep, bool backward) {
  const FsdpUnit& unit = units_[u];
  em_.Outside(backward ? Phase::kBackward : Phase::kForward);
  const std::string name = em_.Tag() + (backward ? "bwd." : "fwd.") + "allgather." + unit.name;
  const bool from_post = backward && post_k_ > 0;
  BufferId src = shard32_;
  int64_t src_base = unit.offset * 4;
  OpId h2d = -1;
  if (tier_ == Tier::kCpu && !from_post) {
    // FSDPParam.all_gather_inputs: sharded_param_data.to(device) on the
    // copy-in stream, then the cast.
    Op cp = em_.NewOp(em_.Tag() + (backward ? "bwd." : "fwd.") + "h2d." + unit.name, OpKind::kCopyH2D, Stream::kH2D);
    const Bytes b(unit.shard * 4);
    src = em_.NewBuffer(cp.name, Tier::kGpu, StateKind::kMaster32, b);
    src_base = 0;
    cp.bytes = b;
    cp.deps = {dep};
    cp.allocs = {src};
    cp.reads = {shard32_};
    cp.writes = {src};
    cp.moves = {{R(shard32_, unit.offset * 4, b.v), R(src, 0, b.v)}};
    h2d = em_.Emit(std::move(cp));
  }
  Op op = em_.NewOp(name, OpKind::kAllGather, Stream::kComm);
  op.group = from_post ? post_group_ : shard_group_;
  op.deps = {dep, h2d};
  const int64_t whole = unit.shard * shard_;
  gathered_[u] =
      em_.NewBuffer(em_.Tag() + "fsdp.unsharded." + unit.name, Tier::kGpu, StateKind::kGatherBuffer, Lp(whole));
  op.allocs = {gathered_[u]};
  op.writes = {gathered_[u]};
  op.bytes = Lp(whole);
  for (size_t k = 0; k < unit.groups.size(); ++k) {
    const int64_t part = part_[static_cast<size_t>(unit.groups[k])];
    const Region dst = R(gathered_[u], Lp(unit.off[k]), Lp(part * shard_));
    if (from_post) {
      const int64_t slice = part * shard_ / post_k_;
      op.moves.push_back({R(post_shard_[u], Lp(unit.off[k] / post_k_), Lp(slice)), dst});
    } else {
      const int64_t at = src_base + (flat_[static_cast<size_t>(unit.groups[k])] - unit.offset) * 4;
      op.moves.push_back({R(src, at, part * 4), dst, false, false, -1, /*narrow=*/true});
    }
  }
  if (from_post) {
    op.reads = {post_shard_[u]};
    op.frees = {post_shard_[u]};
    post_shard_[u] = -1;
  } else {
    op.reads = {src};
    if (h2d >= 0) op.frees = {src};
    // Copy-in: read the fp32 shard, write it cast (foreach copy).
    op.copy_bytes += Bytes(unit.shard * 4) + Lp(unit.shard);
  }
  // Copy-out into the per-parameter unsharded tensors (split_with_sizes_copy).
  op.copy_bytes += Lp(2 * whole);
  plan_.cache.fetch_allgather += op.bytes;
  return em_.Emit(std::move(op));
}

}  // namespace strata::detail
