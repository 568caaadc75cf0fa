// Planner: the stage-3 parameter coordinator of DeepSpeed v0.3.12-v0.5.10
// (policy.deepspeed_stage3: v0.5, v0.3 or v0.3.13 with policy.prefetch:
// deepspeed), the release line the ZeRO-Infinity paper ran. Read at tag v0.5.10,
// deepspeed/runtime/zero/stage3.py: PartitionedParameterCoordinator
// (fetch_sub_module, prefetch_next_sub_modules, _prefetch_nvme_param_partitions,
// release_sub_module, _keep_for_later, _synchronize_communication),
// PrefetchCoordinator (get_params_to_prefetch, get_reuse_distance_in_numel),
// pre_sub_module_forward_function / pre_sub_module_backward_function; and
// partition_parameters.py (_all_gather, _ensure_availability_of_partitioned_params).
// The same rules are in v0.3.16 (April 2021), v0.4.0, v0.5.0 and v0.5.4
// (only the fetch's async_op differs, followed by the same synchronize).
//
// A parameter is NOT_AVAILABLE, INFLIGHT (a prefetch issued its allgather)
// or AVAILABLE. At position k (the module's pre-forward/pre-backward hook):
//  1. fetch: the module's NOT_AVAILABLE parameters are gathered now; if any
//     was, or any is INFLIGHT, _synchronize_communication waits for every
//     in-flight allgather and then calls torch.cuda.synchronize(): the host
//     waits for all the GPU's work, compute, allgathers, reduce-scatters
//     and copies (a device barrier). Every INFLIGHT parameter is then
//     AVAILABLE.
//  2. prefetch, only if no allgather is in flight and the available
//     parameters' full elements are below stage3_max_live_parameters: from
//     this position on, NOT_AVAILABLE parameters in trace order until their
//     full elements reach stage3_prefetch_bucket_size (the one that reaches
//     it included; with a bucket of 0, one). partition_parameters.py
//     _allgather_param calls torch.cuda.synchronize() before launching each
//     parameter's allgather: each is a device barrier, so the prefetched
//     allgathers run one after another and only the last overlaps the
//     module's compute.
//  3. NVMe read-ahead, in a forward (or recomputation) hook only (the
//     backward hook passes no nvme flag) and only where step 2 ran: from
//     this position, NOT_AVAILABLE parameters until their full elements
//     reach twice the partition elements step 2 took; those whose partition
//     is still only on NVMe are read while a swap buffer is free.
//  Any allgather (1 or 2) first makes its NVMe partitions resident: if one
//  is not read yet (swap_in(async_op=False)) or still being read
//  (synchronize_reads), the host waits for every outstanding read.
//  After 1, every parameter of the module (persistent ones too) is
//  formatted into a discarded debug message, f"... norm={param.norm()}"
//  (v0.3.15 to v0.5.10: ZeRO-Infinity's PR #976 added it, PR #1453 removed
//  it in v0.6.0; not in v0.3.13, policy v0.3.13): a norm kernel that
//  reads the whole parameter, and .item(), so the host waits for the
//  compute stream even where 1 gathered nothing.
//  4. compute, then release_sub_module: the module's gathered parameters go
//     unless the same module is used again before the modules in between
//     total stage3_max_reuse_distance elements (every parameter counted).
//
// The trace off by one (the release's aligned_trace false, what v0.3.14 to
// v0.5.10 do; v0.3.13 registers no reset hook, its trace lines up: policy
// v0.3.13): setup_zero_stage3_hooks registers the top module's reset_step
// pre-hook after _register_hooks_recursively gave the top module its own
// sub-module hook, and PyTorch runs pre-hooks in registration order. So
// each forward the top module's hook runs at step 0 (get_params_to_prefetch
// finds it at trace[0] and prefetches from the trace's start) and
// increments the step, the reset sets it back to 0, and every later module
// runs one step before its place in the trace, recorded the same way
// (DeepSpeed issue #1069: "causing the prefetches to be skipped"). From
// then on get_params_to_prefetch answers "Tracing failed. Prefetching is
// disabled" (so no NVMe read-ahead either) and get_reuse_distance_in_numel
// "no reuse": every fetch gathers its module's parameters itself and every
// gathered parameter is released after its module. A module run twice in
// a row would line up again: DeepSpeed's trace has none (the top module's
// and the layer containers' hooks come between a module's last forward
// use and its backward). With gradient accumulation the steps are reset
// only at the forward's start (and by _pre_step), so from the second micro
// step on even the top module's hook misses the trace: no prefetch at all.
// Not modelled: the top module's own and external parameters (Megatron's
// tied embedding weight, registered to the top module by ZeROOrderedDict),
// which its hook gathers and, its step lining up, may keep for reuse.
// Not modelled: the first, trace-recording iteration; the host time of the
// Python hooks; the partition's H2D copy on the allgather stream (Strata's
// is on the H2D stream, so it may overlap another group's allgather);
// gradient accumulation as v0.5 ran it (backward() partitions every
// parameter, persistent ones too, and the trace spans the micro steps:
// here each micro step starts afresh, persistent parameters resident);
// reduce_ipg_grads' reduction_stream.synchronize().
#include <algorithm>

#include "plan_builder.h"

namespace strata::detail {

Status PlanBuilder::CoordinateV05() {
  const ZeroConfig& z = s_.zero;
  const int P = Positions();
  const size_t G = groups_.size();
  Status status = Status::Ok();
  enum class St { kNotAvailable, kInflight, kAvailable };
  std::vector<St> st(G, St::kNotAvailable);
  // _distance_in_numel counts persistent parameters too.
  const std::vector<int64_t> prefix = PositionElements();
  // Per position: the next position of the same module (-1: none).
  std::vector<int> next_same(P, -1), seen(num_modules_, -1);
  for (int p = P - 1; p >= 0; --p) {
    next_same[p] = seen[ModuleAt(p)];
    seen[ModuleAt(p)] = p;
  }
  std::vector<int> inflight;  // INFLIGHT groups (their allgathers not yet waited for)
  int64_t available = 0;      // total_available_parameter_numel
  outstanding_reads_.clear();
  const OpId before = last_compute_;
  // _ensure_availability_of_partitioned_params: partitions not yet read are
  // read now; if any was, or any is still being read, the host waits for
  // every outstanding read (swap_in(async_op=False), synchronize_reads).
  auto resident = [&](const std::vector<std::pair<int, int>>& gs, OpId issue) {
    bool wait = false;
    for (auto [gi, pos] : gs) {
      if (groups_[gi].home != Tier::kNvme) continue;
      if (read_op_[gi] < 0) {
        ReadPartition(gi, pos, issue, &status);
        wait = true;
      } else {
        wait |=
            std::find(outstanding_reads_.begin(), outstanding_reads_.end(), read_op_[gi]) != outstanding_reads_.end();
      }
    }
    if (!wait) return;
    HostWaits(outstanding_reads_);
    outstanding_reads_.clear();
  };
  // The NOT_AVAILABLE groups from position k on, in trace order, until
  // their full elements reach `numel` (get_params_to_prefetch).
  auto upcoming = [&](int k, int64_t numel) {
    std::vector<std::pair<int, int>> out;
    int64_t total = 0;
    for (int p = k; p < P; ++p)
      for (int gi : GroupsAt(p)) {
        if (!groups_[gi].fetched || st[gi] != St::kNotAvailable) continue;
        if (std::any_of(out.begin(), out.end(), [&](auto e) { return e.first == gi; })) continue;
        out.push_back({gi, p});
        total += FullElements(gi);
        if (total >= numel) return out;
      }
    return out;
  };
  // 2. prefetch_next_sub_modules at position k (a bucket of 0 still takes
  // one parameter: get_params_to_prefetch's walk stops at total >= numel).
  // _allgather_param calls torch.cuda.synchronize() before it launches
  // each parameter's allgather: only the last one overlaps the compute.
  auto prefetch = [&](int k, OpId issue) {
    if (!inflight.empty() || available >= z.stage3_max_live_parameters.v) return;
    const auto pf = upcoming(k, z.stage3_prefetch_bucket_size.v);
    resident(pf, issue);
    int64_t part_in_flight = 0;
    for (auto [gi, pos] : pf) {
      DeviceSynchronize();
      fetch_ops_[pos].push_back(Fetch(pos, gi, issue));
      st[gi] = St::kInflight;
      inflight.push_back(gi);
      available += FullElements(gi);
      part_in_flight += groups_[gi].part.v;
    }
    // 3. _prefetch_nvme_param_partitions (forward hooks only).
    if (!param_slots_.empty() && !Backward(k)) {
      size_t chosen = 0;
      const size_t free = free_slots_.size();
      for (auto [gi, pos] : upcoming(k, 2 * part_in_flight)) {
        if (chosen >= free) break;
        if (groups_[gi].home == Tier::kNvme && read_op_[gi] < 0) {
          ReadPartition(gi, pos, issue, &status);
          ++chosen;
        }
      }
    }
  };
  // The trace off by one (aligned_trace false): only the top
  // module's own hook, at step 0 before the first module of the first
  // micro step, finds itself in the trace, and prefetches from its start.
  const bool aligned = release_.aligned_trace;
  if (!aligned && P > 0 && micro_ == 0) {
    phase_ = Phase::kForward;
    prefetch(0, before);
  }
  for (int k = 0; k < P; ++k) {
    phase_ = k < num_modules_ ? Phase::kForward : Phase::kBackward;
    SyncBoundary(k);
    const OpId issue = k == 0 ? before : compute_op_[k - 1];
    const auto& gs = GroupsAt(k);
    // 1. fetch_sub_module.
    std::vector<std::pair<int, int>> now;
    bool waits = false;
    for (int gi : gs) {
      if (!groups_[gi].fetched) continue;
      if (st[gi] == St::kNotAvailable) now.push_back({gi, k});
      waits |= st[gi] == St::kInflight;
    }
    resident(now, issue);
    for (auto [gi, pos] : now) {
      fetch_ops_[k].push_back(Fetch(k, gi, issue));
      available += FullElements(gi);
    }
    if (!now.empty() || waits) {
      DeviceSynchronize();
      for (int gi : inflight) st[gi] = St::kAvailable;
      inflight.clear();
    }
    for (auto [gi, pos] : now) st[gi] = St::kAvailable;
    // fetch_sub_module then formats every parameter of the module into a
    // debug message that print_rank_0 discards: f"... norm={param.norm()}"
    // is evaluated anyway, a norm kernel over the whole parameter, and
    // Tensor.__format__ of its 0-dim result calls .item(), so the host
    // waits for the compute stream. The norms are charged to the module's
    // compute op below, which they precede: the wait here is for the ops
    // before them, so an allgather issued next may overlap the norms (an
    // approximation: they are a small memory-bound pass).
    // ZeRO-3 Offload as released (v0.3.13) printed no norms: ZeRO-Infinity
    // (PR #976) added them.
    int64_t norm_bytes = 0;
    if (release_.debug_norms)
      for (int gi : gs) norm_bytes += groups_[gi].elements.bytes(dt_).v;
    if (norm_bytes > 0) HostWaits({last_[static_cast<int>(Stream::kCompute)]});
    // 2. prefetch_next_sub_modules, only where the trace lines up.
    if (aligned) prefetch(k, issue);
    // 4. Compute, then release_sub_module (at step id k + 1); with the
    // trace off by one, get_reuse_distance_in_numel sees another module at
    // the step and answers "no reuse".
    const bool keep = aligned && z.stage3_max_reuse_distance.v > 0 && next_same[k] >= 0 &&
                      prefix[next_same[k]] - prefix[k + 1] < z.stage3_max_reuse_distance.v;
    std::vector<char> release(gs.size(), false);
    for (size_t j = 0; j < gs.size(); ++j) release[j] = groups_[gs[j]].fetched && !keep;
    release_after_[k] = release;
    Compute(k);
    plan_.ops[compute_op_[k]].copy_bytes += Bytes(norm_bytes);
    for (size_t j = 0; j < gs.size(); ++j) {
      if (!release[j]) continue;
      st[gs[j]] = St::kNotAvailable;
      available -= FullElements(gs[j]);
      ReleaseCoordinated(gs[j], k);
    }
  }
  return status;
}

}  // namespace strata::detail
