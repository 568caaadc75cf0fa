// Planner: DeepSpeed's stage-3 parameter coordinator (policy.prefetch:
// deepspeed, the default). One micro step's positions are walked as
// zero/partitioned_param_coordinator.py walks its trace; docs/fidelity.md
// lists the rules with their sources.
//
// At position k (the module's pre-forward/pre-backward hook; its ops are
// issued after the compute of position k-1, as Pass does):
//  1. fetch: the module's groups are gathered if they are not already: NVMe
//     partitions not yet read are read first (synchronously: the host waits
//     for every outstanding read, swap_in(async_op=False) and
//     synchronize_reads), whatever stage3_max_live_parameters says;
//  2. prefetch (stage3_prefetch_bucket_size > 0): the trace queue (one entry
//     per parameter of each module use) is walked from its head with a budget of min(max_live - available, bucket) full
//     elements; the first group not available is always taken (so a group
//     larger than the bucket is prefetched), the walk stops at a partition
//     still only on NVMe, and groups already available are passed over with
//     their next use recorded (they are then kept until it);
//  3. NVMe read-ahead: the queue from its new head, until the elements
//     considered exceed twice those being gathered or the reads chosen reach
//     the free swap buffers; each read takes a buffer until its group is
//     released (partitioned_param_swapper.py, LIFO buffer ids);
//  4. compute, then release: a group is kept when a prefetch has passed a
//     use of it after the next module, or when it is used again before the modules after it
//     total stage3_max_reuse_distance elements (__params_to_release).
//
// Not modelled: the first (trace-recording) iteration without prefetch, the
// fetch-event host throttle (implied here: issue waits for the previous
// compute), and all_gather_coalesced (one collective per fetch call: Strata
// issues one per parameter, the same bytes).
#include <algorithm>

#include "plan_builder.h"

namespace strata::detail {

namespace {
std::string NotEnoughBuffersMessage(int64_t free, const std::string& group, int64_t count) {
  return "group '" + group + "' must be read from NVMe but all " + std::to_string(count) +
         " parameter swap buffers are held by gathered or prefetched groups; DeepSpeed fails with \"Not enough "
         "buffers " +
         std::to_string(free) +
         " for swapping 1\" (partitioned_param_swapper.py swap_in): raise "
         "zero_optimization.offload_param.buffer_count";
}
}  // namespace

bool PlanBuilder::Coordinated() const {
  return stage_ == 3 && s_.policy.prefetch == PrefetchKind::kDeepSpeed && !gpu_cache_ && !cpu_cache_;
}

// Reads group gi's partition from NVMe into a free swap buffer, issued after
// `issue_dep`. Returns the read, or -1 with a fired check when no buffer is
// free (lenient mode then reads into a transient extra buffer).
OpId PlanBuilder::ReadPartition(int gi, int pos, OpId issue_dep, Status* status) {
  const GroupLayout& gl = groups_[gi];
  const std::string& gname = g_.param_groups[gi].name;
  const Bytes part = gl.part.bytes(dt_);
  Op rd = NewOp(Tag() +
                    (Backward(pos)    ? "bwd."
                     : Recompute(pos) ? "rec."
                                      : "fwd.") +
                    "fetch_nvme." + gname,
                OpKind::kNvmeRead, Stream::kNvmeRead);
  rd.bytes = part;
  rd.reads = {gl.home_buffer};
  rd.deps = {issue_dep};
  BufferId dst;
  if (free_slots_.empty()) {
    if (!slots_exhausted_) {  // reported once: the first read that finds none
      Status st = Fire("param_swap_buffers_exhausted",
                       NotEnoughBuffersMessage(0, gname, static_cast<int64_t>(param_slots_.size())));
      if (!st.ok()) *status = st;
    }
    slots_exhausted_ = true;
    dst = NewBuffer(Tag() + "swap.param.extra." + gname, Tier::kCpu, StateKind::kSwapBuffer, param_slot_bytes_);
    rd.allocs = {dst};
    slot_of_[gi] = -1;
    extra_slot_[gi] = dst;
  } else {
    const int slot = free_slots_.back();
    free_slots_.pop_back();
    dst = param_slots_[slot];
    rd.deps.push_back(param_slot_user_[slot]);  // its last holder has been released
    slot_of_[gi] = slot;
  }
  rd.writes = {dst};
  rd.moves = {{HomeRegion(gi), R(dst, 0, part.v)}};
  plan_.cache.fetch_nvme_read += part;
  const OpId id = Emit(std::move(rd));
  read_op_[gi] = id;
  outstanding_reads_.push_back(id);
  return id;
}

// Releases group gi after the compute at `pos`: its gathered copy is freed by
// Compute; its swap buffer (if any) is free once that compute has run.
void PlanBuilder::ReleaseCoordinated(int gi, int pos) {
  if (slot_of_[gi] >= 0) {
    param_slot_user_[slot_of_[gi]] = compute_op_[pos];
    free_slots_.push_back(slot_of_[gi]);
  } else if (extra_slot_[gi] >= 0) {
    plan_.ops[compute_op_[pos]].frees.push_back(extra_slot_[gi]);
  }
  slot_of_[gi] = -1;
  extra_slot_[gi] = -1;
  read_op_[gi] = -1;
}

// __prefetch_nvme_param_partitions: from the queue's head, partitions still
// only on NVMe are read while the full elements considered are at most twice
// those being gathered (`in_flight`: issued, not yet waited for) and a buffer
// is free.
void PlanBuilder::ReadAhead(int head, int64_t in_flight, OpId issue, const std::vector<bool>& gathered,
                            Status* status) {
  int64_t considered = 0;
  std::vector<std::pair<int, int>> chosen;  // (group, its position)
  for (int q = head; q < static_cast<int>(queue_.size()); ++q) {
    const int h = queue_[q].group;
    if (considered > 2 * in_flight || chosen.size() >= free_slots_.size()) break;
    const bool on_nvme = groups_[h].fetched && OnlyOnNvme(h, gathered);
    if (on_nvme && std::none_of(chosen.begin(), chosen.end(), [&](auto c) { return c.first == h; }))
      chosen.push_back({h, queue_[q].pos});
    considered += FullElements(h);
  }
  for (auto [h, q] : chosen) ReadPartition(h, q, issue, status);
}

Status PlanBuilder::Coordinate() {
  const ZeroConfig& z = s_.zero;
  const int P = Positions();
  const size_t G = groups_.size();
  Status status = Status::Ok();
  BuildTraceQueue();
  const int Q = static_cast<int>(queue_.size());
  // Persistent parameters included (__params_to_release counts them all).
  const std::vector<int64_t> prefix = PositionElements();
  // Per queue entry: the next position using its group (-1: none).
  std::vector<int> next_use(Q, -1), last(G, -1);
  for (int q = Q - 1; q >= 0; --q) {
    next_use[q] = last[queue_[q].group];
    last[queue_[q].group] = queue_[q].pos;
  }
  std::vector<bool> gathered(G, false);
  std::vector<int> most_recent(G, -1);  // the latest use a fetch or prefetch went past
  // Gathers in flight (issued, not yet waited for): their full elements, and
  // per position those its fetch will wait for.
  int64_t in_flight = 0;
  std::vector<int64_t> landing(P, 0);
  int64_t available = 0;  // __n_available_params (full elements)
  int head = 0;           // the trace queue's head
  outstanding_reads_.clear();
  const OpId before = last_compute_;
  auto gather = [&](int gi, int pos, int k, OpId issue) {
    // An NVMe partition must be in host memory; its allgather waits for
    // every outstanding read (synchronize_reads).
    std::vector<OpId> waits;
    if (groups_[gi].home == Tier::kNvme && read_op_[gi] < 0) ReadPartition(gi, pos, issue, &status);
    if (groups_[gi].home == Tier::kNvme) waits = outstanding_reads_, outstanding_reads_.clear();
    const OpId first = static_cast<OpId>(plan_.ops.size());
    fetch_ops_[pos].push_back(Fetch(pos, gi, issue));
    std::vector<OpId>& deps = plan_.ops[first].deps;
    for (OpId w : waits)
      if (w < first) AddOnce(deps, w);
    gathered[gi] = true;
    available += FullElements(gi);
    if (pos > k) {
      in_flight += FullElements(gi);
      landing[pos] += FullElements(gi);
    }
  };
  int entry = 0;  // the first queue entry of position k
  for (int k = 0; k < P; ++k) {
    phase_ = k < num_modules_ ? Phase::kForward : Phase::kBackward;
    SyncBoundary(k);
    const OpId issue = k == 0 ? before : compute_op_[k - 1];
    const auto& gs = GroupsAt(k);
    in_flight -= landing[k];  // this module's fetch waits for them
    // 1. The module's own fetch: every parameter not available, in one
    // call (Strata issues one chain per parameter).
    for (int gi : gs) {
      if (!groups_[gi].fetched) continue;
      if (!gathered[gi]) gather(gi, k, k, issue);
      most_recent[gi] = std::max(most_recent[gi], k);
    }
    while (entry < Q && queue_[entry].pos <= k) ++entry;
    head = std::max(head, entry);
    // 2. Allgather prefetch, parameter by parameter; persistent ones are
    // always available and passed over.
    if (z.stage3_prefetch_bucket_size.v > 0) {
      const int64_t budget = std::min(z.stage3_max_live_parameters.v - available, z.stage3_prefetch_bucket_size.v);
      int64_t taking = 0;
      while (head < Q && taking < budget) {
        const auto [pos, h] = queue_[head];
        if (!groups_[h].fetched) {
          ++head;
          continue;
        }
        if (OnlyOnNvme(h, gathered)) break;
        if (!gathered[h]) {
          gather(h, pos, k, issue);
          taking += FullElements(h);
        }
        most_recent[h] = std::max(most_recent[h], pos);
        ++head;
      }
      // 3. NVMe read-ahead (offload_param nvme only).
      if (!param_slots_.empty()) ReadAhead(head, in_flight, issue, gathered, &status);
    }
    // 4. Compute and release, parameter by parameter. Kept if a prefetch
    // passed a use after the next module (the release runs after
    // fetch_sub_module has advanced __step_id to k + 1, and keeps only
    // most_recent > step_id), or if its next use comes before the modules
    // after this one total max_reuse_distance elements (the scan from
    // step_id checks before each module).
    std::vector<char> release(gs.size(), false);
    for (size_t j = 0; j < gs.size(); ++j) {
      const int gi = gs[j];
      int nu = -1;
      for (int q = entry - 1; q >= 0 && queue_[q].pos == k; --q)
        if (queue_[q].group == gi) nu = next_use[q];
      const bool reused = nu >= 0 && prefix[nu] - prefix[k + 1] < z.stage3_max_reuse_distance.v;
      release[j] = groups_[gi].fetched && most_recent[gi] <= k + 1 && !reused;
    }
    release_after_[k] = release;
    Compute(k);
    for (size_t j = 0; j < gs.size(); ++j) {
      if (!release[j]) continue;
      gathered[gs[j]] = false;
      available -= FullElements(gs[j]);
      ReleaseCoordinated(gs[j], k);
    }
  }
  return status;
}

std::vector<int64_t> PlanBuilder::PositionElements() const {
  const int P = Positions();
  std::vector<int64_t> prefix(P + 1, 0);
  for (int p = 0; p < P; ++p) {
    prefix[p + 1] = prefix[p];
    for (int gi : GroupsAt(p)) prefix[p + 1] += FullElements(gi);
  }
  return prefix;
}

// DeepSpeed's trace (partitioned_param_coordinator.py record_parameters):
// per module use, its parameters in ds_id (creation) order.
void PlanBuilder::BuildTraceQueue() {
  queue_.clear();
  for (int p = 0; p < Positions(); ++p) {
    std::vector<int> gs = GroupsAt(p);
    std::sort(gs.begin(), gs.end());
    for (int gi : gs) queue_.push_back({p, gi});
  }
}

}  // namespace strata::detail
