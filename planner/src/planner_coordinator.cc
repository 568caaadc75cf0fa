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
//     On one rank the host then waits for the copies up issued so far
//     (NoGatherCoalescedHandle.wait synchronizes the allgather stream);
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

#include "coordinator.h"

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

Coordinator::Coordinator(const ZeroConfig& z, int swap_buffers, int groups)
    : bucket_(z.stage3_prefetch_bucket_size.v),
      max_live_(z.stage3_max_live_parameters.v),
      reuse_(z.stage3_max_reuse_distance.v),
      swap_buffers_(swap_buffers),
      slot_of_(groups, -1),
      reads_(groups) {
  for (int i = 0; i < swap_buffers; ++i) free_.push_back(i);
}

OpId Coordinator::ReadPartition(FetchSite& site, int gi, int pos, OpId issue, Status* status) {
  int slot = -1;
  if (free_.empty()) {
    if (!exhausted_) {  // reported once: the first read that finds none
      Status st = site.Fire("param_swap_buffers_exhausted",
                            NotEnoughBuffersMessage(0, site.GroupName(gi), static_cast<int64_t>(swap_buffers_)));
      if (!st.ok()) *status = st;
    }
    exhausted_ = true;
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  slot_of_[gi] = slot;
  reads_[gi] = site.ReadPartition(gi, pos, issue, slot);
  outstanding_.push_back(reads_[gi].op);
  return reads_[gi].op;
}

void Coordinator::Release(FetchSite& site, int gi, int pos) {
  if (reads_[gi].op >= 0) site.ReleaseRead(reads_[gi], slot_of_[gi], pos);
  if (slot_of_[gi] >= 0) free_.push_back(slot_of_[gi]);
  slot_of_[gi] = -1;
  reads_[gi] = {};
}

std::vector<Coordinator::QueueEntry> Coordinator::TraceQueue(const FetchSite& site) {
  std::vector<QueueEntry> queue;
  for (int p = 0; p < site.Positions(); ++p) {
    std::vector<int> gs = site.GroupsAt(p);
    std::sort(gs.begin(), gs.end());
    for (int gi : gs) queue.push_back({p, gi});
  }
  return queue;
}

namespace {

class DeepSpeedCoordinator final : public Coordinator {
 public:
  using Coordinator::Coordinator;
  Status Emit(FetchSite& site, int lo, int hi) override;
  bool CopiesBlockHost() const override { return true; }

 private:
  // __prefetch_nvme_param_partitions: from the queue's head, partitions
  // still only on NVMe are read while the full elements considered are at
  // most twice those being gathered (`in_flight`: issued, not yet waited
  // for) and a buffer is free.
  void ReadAhead(FetchSite& site, int head, int64_t in_flight, OpId issue, const std::vector<bool>& gathered,
                 Status* status);
  std::vector<QueueEntry> queue_;
};

void DeepSpeedCoordinator::ReadAhead(FetchSite& site, int head, int64_t in_flight, OpId issue,
                                     const std::vector<bool>& gathered, Status* status) {
  int64_t considered = 0;
  std::vector<std::pair<int, int>> chosen;  // (group, its position)
  for (int q = head; q < static_cast<int>(queue_.size()); ++q) {
    const int h = queue_[q].group;
    if (considered > 2 * in_flight || chosen.size() >= FreeBuffers()) break;
    const bool on_nvme = site.Group(h).fetched && OnlyOnNvme(site, h, gathered);
    if (on_nvme && std::none_of(chosen.begin(), chosen.end(), [&](auto c) { return c.first == h; }))
      chosen.push_back({h, queue_[q].pos});
    considered += site.Group(h).elements.v;
  }
  for (auto [h, q] : chosen) ReadPartition(site, h, q, issue, status);
}

Status DeepSpeedCoordinator::Emit(FetchSite& site, int lo, int hi) {
  const int P = site.Positions();
  if (lo != 0 || hi != P) return Status::Internal("DeepSpeed's coordinator plans whole micro steps");
  const size_t G = static_cast<size_t>(site.NumGroups());
  Status status = Status::Ok();
  queue_ = TraceQueue(site);
  const int Q = static_cast<int>(queue_.size());
  // Persistent parameters included (__params_to_release counts them all).
  const std::vector<int64_t> prefix = site.PositionElements();
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
  outstanding_.clear();
  const OpId before = site.LastCompute();
  // One rank (DeepSpeed v0.9+, PR #2953): a fetch's handle copies the
  // partition up without gathering (NoGatherCoalescedHandle), and waiting
  // for it synchronizes the allgather stream, so the host waits there for
  // every copy issued so far (prefetches included) before the module's
  // compute is launched. `unwaited`: gathered, its handle not yet waited.
  const bool single_rank = site.Ranks() == 1;
  std::vector<bool> unwaited(G, false);
  OpId last_copy = -1;  // the allgather stream's last op (the latest copy up)
  auto gather = [&](int gi, int pos, int k, OpId issue) {
    // An NVMe partition must be in host memory; its allgather waits for
    // every outstanding read (synchronize_reads).
    const FetchSite::GroupInfo g = site.Group(gi);
    std::vector<OpId> waits;
    if (g.home == Tier::kNvme && !HasRead(gi)) ReadPartition(site, gi, pos, issue, &status);
    if (g.home == Tier::kNvme) waits = outstanding_, outstanding_.clear();
    if (const OpId chain = site.Gather(pos, gi, issue, waits); g.home != Tier::kGpu && chain >= 0) last_copy = chain;
    gathered[gi] = true;
    unwaited[gi] = true;
    available += g.elements.v;
    if (pos > k) {
      in_flight += g.elements.v;
      landing[pos] += g.elements.v;
    }
  };
  int entry = 0;  // the first queue entry of position k
  for (int k = 0; k < P; ++k) {
    site.BeginPosition(k);
    const OpId issue = k == 0 ? before : site.ComputeOp(k - 1);
    const auto& gs = site.GroupsAt(k);
    in_flight -= landing[k];  // this module's fetch waits for them
    site.Hook(k, std::any_of(gs.begin(), gs.end(), [&](int gi) { return site.Group(gi).fetched && !gathered[gi]; }));
    // 1. The module's own fetch: every parameter not available, in one
    // call (Strata issues one chain per parameter).
    for (int gi : gs) {
      if (!site.Group(gi).fetched) continue;
      if (!gathered[gi]) gather(gi, k, k, issue);
      most_recent[gi] = std::max(most_recent[gi], k);
    }
    // The wait for the module's parameters (their handles, once each).
    bool waits = false;
    for (int gi : gs)
      if (unwaited[gi]) waits = true, unwaited[gi] = false;
    if (waits && single_rank && last_copy >= 0) site.HostWaits({last_copy});
    while (entry < Q && queue_[entry].pos <= k) ++entry;
    head = std::max(head, entry);
    // 2. Allgather prefetch, parameter by parameter; persistent ones are
    // always available and passed over.
    if (bucket_ > 0) {
      const int64_t budget = std::min(max_live_ - available, bucket_);
      int64_t taking = 0;
      while (head < Q && taking < budget) {
        const auto [pos, h] = queue_[head];
        if (!site.Group(h).fetched) {
          ++head;
          continue;
        }
        if (OnlyOnNvme(site, h, gathered)) break;
        if (!gathered[h]) {
          gather(h, pos, k, issue);
          taking += site.Group(h).elements.v;
        }
        most_recent[h] = std::max(most_recent[h], pos);
        ++head;
      }
      // 3. NVMe read-ahead (offload_param nvme only).
      if (swap_buffers_ > 0) ReadAhead(site, head, in_flight, issue, gathered, &status);
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
      const bool reused = nu >= 0 && prefix[nu] - prefix[k + 1] < reuse_;
      release[j] = site.Group(gi).fetched && most_recent[gi] <= k + 1 && !reused;
    }
    site.Compute(k, release);
    for (size_t j = 0; j < gs.size(); ++j) {
      if (!release[j]) continue;
      gathered[gs[j]] = false;
      available -= site.Group(gs[j]).elements.v;
      Release(site, gs[j], k);
    }
  }
  return status;
}

}  // namespace

std::unique_ptr<FetchPolicy> NewCoordinator(const ZeroConfig& z, int swap_buffers, int groups) {
  return std::make_unique<DeepSpeedCoordinator>(z, swap_buffers, groups);
}

}  // namespace strata::detail
