// Where each plan buffer's bytes live during a run (private): the backend's
// memory for the GPU and CPU tiers (capped at the plan's capacities), a
// preallocated file for NVMe buffers.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "io/swap_checksums.h"
#include "strata/executor/backend.h"
#include "strata/executor/env.h"
#include "strata/plan/plan.h"

namespace strata::exec {

class BufferStore {
 public:
  // `nvme_dir`: every swap file's directory; "" for the plan's
  // (RunSpec::nvme_dirs, Buffer::nvme_dir).
  BufferStore(const Plan& plan, Env* env, Backend* backend, std::string nvme_dir, int rank, bool keep_files = false);
  // Removes the run's swap files (unless kept) and releases the locks.
  ~BufferStore();
  BufferStore(const BufferStore&) = delete;
  BufferStore& operator=(const BufferStore&) = delete;
  // Allocates resident buffers of rank's pipeline stage (memory zeroed,
  // NVMe files preallocated).
  // NVMe files go in a directory of this run in their swap directory DIR,
  // DIR/strata-rankR.run-PID, created new (O_EXCL files), under the lock
  // DIR/strata-rankR.lock: a second run with the same DIR is refused with
  // the holder's pid, and a run directory of rank R left by a killed run
  // is removed first.
  Status Open();
  // Has the backend make ahead the blocks the plan's transient buffers of
  // this stage need (Backend::Reserve): of each tier and size, the most
  // live at once in list order. Pageable CPU buffers are left out (PyTorch
  // caches none). Capacity is not charged: the ops allocating them are.
  Status Reserve();
  // Allocation and release of transient buffers by `op` (zeroed memory
  // where the plan says the buffer is cleared, else undefined bytes);
  // exceeding a tier's capacity is an error naming the op. REQUIRES for
  // Free: the backend's work on the buffer is done.
  Status Allocate(BufferId b, const Op& op);
  void Free(BufferId b);

  bool in_memory(BufferId b) const { return plan_.buffers[b].tier != Tier::kNvme; }
  // In memory and addressable by the host (NVMe I/O can target it).
  bool host_accessible(BufferId b) const { return in_memory(b) && backend_->HostAccessible(plan_.buffers[b].tier); }
  // The region's address in its tier (see backend.h: not a host pointer for
  // device memory).
  std::byte* data(const Region& r) { return mem_[r.buffer].data() + r.offset.v; }
  File* file(BufferId b) { return files_[b].get(); }
  // Exchanges two in-memory buffers' memory (a delayed update's gradient
  // buffers, RunSpec::delayed_grads; the validator checks they are alike).
  // REQUIRES: no op is running.
  void Swap(BufferId a, BufferId b) { std::swap(mem_[a], mem_[b]); }
  Bytes peak(Tier t) const { return peak_[static_cast<int>(t)]; }
  // What was written to the swap files (Open records them as zeros).
  SwapChecksums& checksums() { return sums_; }

 private:
  // A swap directory this run uses: its lock and this run's directory in it.
  struct RunDir {
    std::string dir, run;
    std::unique_ptr<FileLock> lock;
  };
  // The run directory of buffer b's swap file (of its part in stripe
  // directory `stripe`, or -1 unstriped), opened on first use.
  Result<const RunDir*> RunDirOf(const Buffer& b, int stripe);
  // Buffer b's swap file: one file, or under striping a StripedFile.
  Status OpenSwapFile(const Buffer& b);
  int Stripes() const { return plan_.run.striped ? static_cast<int>(plan_.run.nvme_dirs.size()) : 1; }
  Status OpenRunDir(RunDir& d);
  Status Account(const Buffer& b, const Op* op);
  // Buffer b's memory: page-locked or not as the plan says (Buffer::pinned).
  Result<Memory> Allocate(const Buffer& b, bool zeroed) {
    const size_t n = static_cast<size_t>(b.bytes.v);
    if (b.tier == Tier::kCpu && !b.pinned) return backend_->AllocatePageable(n, zeroed);
    return backend_->Allocate(b.tier, n, zeroed);
  }
  const Plan& plan_;
  Env* env_;
  Backend* backend_;
  std::string dir_;  // the override, or ""
  int rank_;
  bool keep_files_;
  std::vector<std::unique_ptr<RunDir>> run_dirs_;
  std::mutex mu_;  // guards the usage counters (workers allocate concurrently)
  std::vector<Memory> mem_;
  std::vector<std::unique_ptr<File>> files_;
  Bytes use_[kNumTiers], peak_[kNumTiers];
  SwapChecksums sums_;
};

}  // namespace strata::exec
