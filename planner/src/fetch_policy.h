// The planner's fetch schedule (private to the planner): when each stage-3
// parameter group is gathered for its uses in a micro step, and when its
// gathered copy is released.
//
// A FetchPolicy walks the micro step's positions (module uses: every
// forward, then the backward with each checkpointed layer's recomputation)
// and asks a FetchSite, the plan being built, to emit each group's fetch
// chain, the host's waits and each position's compute with the gathered
// copies it releases. It sees the plan only through FetchSite. One policy
// serves a whole build (PlanBuilder), chosen once:
//   NewCoordinator              DeepSpeed's current parameter coordinator
//                               (planner_coordinator.cc): stage 3,
//                               policy.prefetch deepspeed, no caches.
//   NewModuleTraceCoordinator   the coordinator of DeepSpeed v0.3.12-v0.5.10
//                               (planner_coordinator_v05.cc): the same,
//                               under a release profile with
//                               module_trace_coordinator.
//   NewWindowFetch              Strata's window (planner_window.cc):
//                               policy.prefetch window, the parameter
//                               caches, stages 0-2 and pipelines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/release_profile.h"
#include "strata/core/scenario.h"
#include "strata/plan/plan.h"

namespace strata::detail {

class FetchSite {
 public:
  // A parameter group as the schedule sees it.
  struct GroupInfo {
    bool fetched = false;     // gathered before each use (stage 3, not persistent)
    Tier home = Tier::kGpu;   // where its low-precision copy lives between uses
    Elements elements, part;  // whole, and this rank's partition
    Bytes bytes;              // whole, in the low-precision format
  };
  // An NVMe read of a group's partition into host memory.
  struct Read {
    OpId op = -1;
    BufferId buffer = -1;
  };

  // The micro step's positions: forward modules [0, NumModules()), then
  // the backward and recomputations.
  virtual int Positions() const = 0;
  virtual int NumModules() const = 0;
  virtual int ModuleAt(int pos) const = 0;
  virtual bool Backward(int pos) const = 0;
  virtual const std::vector<int>& GroupsAt(int pos) const = 0;  // in module order
  virtual int NumGroups() const = 0;
  virtual GroupInfo Group(int gi) const = 0;
  virtual const std::string& GroupName(int gi) const = 0;
  // Per p in [0, Positions()]: the whole elements of every group (persistent
  // ones too) of the positions before p.
  virtual std::vector<int64_t> PositionElements() const = 0;
  virtual int Ranks() const = 0;            // the data-parallel ranks groups are partitioned over
  virtual int micro() const = 0;            // the micro step being emitted
  virtual int SwapBuffers() const = 0;      // offload_param's parameter swap buffers (0: none)
  virtual Bytes NvmeReadBytes() const = 0;  // parameter bytes read from NVMe so far

  // Emission, in list order.
  // Before position pos issues anything: its phase, and the barrier of a
  // checkpointed segment's boundary (synchronize_checkpoint_boundary).
  virtual void BeginPosition(int pos) = 0;
  virtual void SetPhase(Phase p) = 0;
  // Position pos's module hooks (stage 3 under policy.host_hooks, else
  // nothing): their host time, before anything the position issues. With
  // `gathers` (the position gathers a parameter) and a release whose
  // allgather launches synchronize the device, the host waits for it first.
  virtual void Hook(int pos, bool gathers) = 0;
  virtual OpId LastCompute() const = 0;       // the latest compute op emitted
  virtual OpId ComputeOp(int pos) const = 0;  // position pos's compute in this micro step
  virtual OpId LastOn(Stream s) const = 0;
  // Gathers group gi for its use at pos (NVMe read, H2D, allgather,
  // whichever apply), issued after `issue`; the chain's first op also waits
  // for `waits` (earlier ops). Returns the chain's last op (-1: a cache hit).
  virtual OpId Gather(int pos, int gi, OpId issue, const std::vector<OpId>& waits = {}) = 0;
  // Position pos's compute; release[k] frees the gathered copy of its k-th
  // group after it. Returns the compute op.
  virtual OpId Compute(int pos, const std::vector<char>& release) = 0;
  // Everything the host issues from now on waits for `ops`.
  virtual void HostWaits(const std::vector<OpId>& ops) = 0;
  // torch.cuda.synchronize(): the host waits for every GPU stream.
  virtual void DeviceSynchronize() = 0;
  virtual void AddCopyBytes(OpId op, Bytes b) = 0;
  // Reads group gi's partition for its use at pos, after `issue`, into
  // parameter swap buffer `slot` (after its last holder), or with slot -1
  // into a transient buffer of its own.
  virtual Read ReadPartition(int gi, int pos, OpId issue, int slot) = 0;
  // The read `r` (in `slot`, or its own buffer with -1) is done with once
  // position pos has computed.
  virtual void ReleaseRead(const Read& r, int slot, int pos) = 0;
  // A configuration DeepSpeed rejects: an error in strict mode, else
  // recorded and planned around.
  virtual Status Fire(const char* id, std::string message) = 0;

 protected:
  ~FetchSite() = default;
};

class FetchPolicy {
 public:
  virtual ~FetchPolicy() = default;
  // Emits positions [lo, hi) of the site's current micro step (the
  // coordinators: a whole micro step only).
  virtual Status Emit(FetchSite& site, int lo, int hi) = 0;
  // True when the policy reads NVMe partitions itself: a fetch chain then
  // starts from ReadOf(gi) instead of reading.
  virtual bool ReadsPartitions() const { return false; }
  virtual FetchSite::Read ReadOf(int /*gi*/) const { return {}; }
  // With more than one rank, the host waits for each offloaded
  // partition's H2D copy (DeepSpeed's current coordinator).
  virtual bool CopiesBlockHost() const { return false; }
  // The most parameter reads from NVMe in flight at once (CacheStats::
  // window_nvme_reads; the window's).
  virtual int64_t WindowNvmeReads() const { return 0; }
};

std::unique_ptr<FetchPolicy> NewWindowFetch(const ZeroConfig& z);
std::unique_ptr<FetchPolicy> NewCoordinator(const ZeroConfig& z, int swap_buffers, int groups);
std::unique_ptr<FetchPolicy> NewModuleTraceCoordinator(const ZeroConfig& z, const ReleaseProfile& r, int swap_buffers,
                                                       int groups);

}  // namespace strata::detail
