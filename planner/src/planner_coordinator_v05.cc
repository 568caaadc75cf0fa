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

#include "coordinator.h"

namespace strata::detail {
namespace {

class ModuleTraceCoordinator final : public Coordinator {
 public:
  ModuleTraceCoordinator(const ZeroConfig& z, const ReleaseProfile& r, int swap_buffers, int groups)
      : Coordinator(z, swap_buffers, groups), aligned_trace_(r.aligned_trace), debug_norms_(r.debug_norms) {}
  Status Emit(FetchSite& site, int lo, int hi) override;

 private:
  const bool aligned_trace_, debug_norms_;  // the release's (release_profile.h)
};

Status ModuleTraceCoordinator::Emit(FetchSite& site, int lo, int hi) {
  const int P = site.Positions();
  if (lo != 0 || hi != P) return Status::Internal("the module-trace coordinator plans whole micro steps");
  const size_t G = static_cast<size_t>(site.NumGroups());
  Status status = Status::Ok();
  enum class St { kNotAvailable, kInflight, kAvailable };
  std::vector<St> st(G, St::kNotAvailable);
  // _distance_in_numel counts persistent parameters too.
  const std::vector<int64_t> prefix = site.PositionElements();
  // Per position: the next position of the same module (-1: none).
  std::vector<int> next_same(P, -1), seen(site.NumModules(), -1);
  for (int p = P - 1; p >= 0; --p) {
    next_same[p] = seen[site.ModuleAt(p)];
    seen[site.ModuleAt(p)] = p;
  }
  std::vector<int> inflight;  // INFLIGHT groups (their allgathers not yet waited for)
  int64_t available = 0;      // total_available_parameter_numel
  outstanding_.clear();
  const OpId before = site.LastCompute();
  // _ensure_availability_of_partitioned_params: partitions not yet read are
  // read now; if any was, or any is still being read, the host waits for
  // every outstanding read (swap_in(async_op=False), synchronize_reads).
  auto resident = [&](const std::vector<std::pair<int, int>>& gs, OpId issue) {
    bool wait = false;
    for (auto [gi, pos] : gs) {
      if (site.Group(gi).home != Tier::kNvme) continue;
      if (!HasRead(gi)) {
        ReadPartition(site, gi, pos, issue, &status);
        wait = true;
      } else {
        wait |= std::find(outstanding_.begin(), outstanding_.end(), ReadOf(gi).op) != outstanding_.end();
      }
    }
    if (!wait) return;
    site.HostWaits(outstanding_);
    outstanding_.clear();
  };
  // The NOT_AVAILABLE groups from position k on, in trace order, until
  // their full elements reach `numel` (get_params_to_prefetch).
  auto upcoming = [&](int k, int64_t numel) {
    std::vector<std::pair<int, int>> out;
    int64_t total = 0;
    for (int p = k; p < P; ++p)
      for (int gi : site.GroupsAt(p)) {
        if (!site.Group(gi).fetched || st[gi] != St::kNotAvailable) continue;
        if (std::any_of(out.begin(), out.end(), [&](auto e) { return e.first == gi; })) continue;
        out.push_back({gi, p});
        total += site.Group(gi).elements.v;
        if (total >= numel) return out;
      }
    return out;
  };
  // 2. prefetch_next_sub_modules at position k (a bucket of 0 still takes
  // one parameter: get_params_to_prefetch's walk stops at total >= numel).
  // _allgather_param calls torch.cuda.synchronize() before it launches
  // each parameter's allgather: only the last one overlaps the compute.
  auto prefetch = [&](int k, OpId issue) {
    if (!inflight.empty() || available >= max_live_) return;
    const auto pf = upcoming(k, bucket_);
    resident(pf, issue);
    int64_t part_in_flight = 0;
    for (auto [gi, pos] : pf) {
      site.DeviceSynchronize();
      site.Gather(pos, gi, issue);
      st[gi] = St::kInflight;
      inflight.push_back(gi);
      available += site.Group(gi).elements.v;
      part_in_flight += site.Group(gi).part.v;
    }
    // 3. _prefetch_nvme_param_partitions (forward hooks only).
    if (swap_buffers_ > 0 && !site.Backward(k)) {
      size_t chosen = 0;
      const size_t free = FreeBuffers();
      for (auto [gi, pos] : upcoming(k, 2 * part_in_flight)) {
        if (chosen >= free) break;
        if (site.Group(gi).home == Tier::kNvme && !HasRead(gi)) {
          ReadPartition(site, gi, pos, issue, &status);
          ++chosen;
        }
      }
    }
  };
  // The trace off by one (aligned_trace false): only the top
  // module's own hook, at step 0 before the first module of the first
  // micro step, finds itself in the trace, and prefetches from its start.
  const bool aligned = aligned_trace_;
  if (!aligned && P > 0 && site.micro() == 0) {
    site.SetPhase(Phase::kForward);
    prefetch(0, before);
  }
  for (int k = 0; k < P; ++k) {
    site.BeginPosition(k);
    const OpId issue = k == 0 ? before : site.ComputeOp(k - 1);
    const auto& gs = site.GroupsAt(k);
    // 1. fetch_sub_module.
    std::vector<std::pair<int, int>> now;
    bool waits = false;
    for (int gi : gs) {
      if (!site.Group(gi).fetched) continue;
      if (st[gi] == St::kNotAvailable) now.push_back({gi, k});
      waits |= st[gi] == St::kInflight;
    }
    site.Hook(k, !now.empty());
    resident(now, issue);
    for (auto [gi, pos] : now) {
      site.Gather(k, gi, issue);
      available += site.Group(gi).elements.v;
    }
    if (!now.empty() || waits) {
      site.DeviceSynchronize();
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
    if (debug_norms_)
      for (int gi : gs) norm_bytes += site.Group(gi).bytes.v;
    if (norm_bytes > 0) site.HostWaits({site.LastOn(Stream::kCompute)});
    // 2. prefetch_next_sub_modules, only where the trace lines up.
    if (aligned) prefetch(k, issue);
    // 4. Compute, then release_sub_module (at step id k + 1); with the
    // trace off by one, get_reuse_distance_in_numel sees another module at
    // the step and answers "no reuse".
    const bool keep = aligned && reuse_ > 0 && next_same[k] >= 0 && prefix[next_same[k]] - prefix[k + 1] < reuse_;
    std::vector<char> release(gs.size(), false);
    for (size_t j = 0; j < gs.size(); ++j) release[j] = site.Group(gs[j]).fetched && !keep;
    site.AddCopyBytes(site.Compute(k, release), Bytes(norm_bytes));
    for (size_t j = 0; j < gs.size(); ++j) {
      if (!release[j]) continue;
      st[gs[j]] = St::kNotAvailable;
      available -= site.Group(gs[j]).elements.v;
      Release(site, gs[j], k);
    }
  }
  return status;
}

}  // namespace

std::unique_ptr<FetchPolicy> NewModuleTraceCoordinator(const ZeroConfig& z, const ReleaseProfile& r, int swap_buffers,
                                                       int groups) {
  return std::make_unique<ModuleTraceCoordinator>(z, r, swap_buffers, groups);
}

}  // namespace strata::detail
