// Where each plan buffer's bytes live during a run (private): host memory
// for the GPU and CPU tiers (capped at their capacities), a preallocated
// file for NVMe buffers.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aligned.h"
#include "strata/executor/env.h"
#include "strata/scheduler/plan.h"

namespace strata::exec {

class BufferStore {
 public:
  BufferStore(const Plan& plan, Env* env, std::string nvme_dir, int rank);
  // Allocates resident buffers (memory zeroed, NVMe files preallocated).
  Status Open();
  // Allocation and release of transient buffers by `op` (zeroed memory);
  // exceeding a tier's capacity is an error naming the op.
  Status Allocate(BufferId b, const Op& op);
  void Free(BufferId b);

  bool in_memory(BufferId b) const { return plan_.buffers[b].tier != Tier::kNvme; }
  std::byte* data(const Region& r) { return mem_[r.buffer].data() + r.offset; }
  File* file(BufferId b) { return files_[b].get(); }
  Bytes peak(Tier t) const { return peak_[static_cast<int>(t)]; }

 private:
  Status Account(const Buffer& b, const Op* op);
  const Plan& plan_;
  Env* env_;
  std::string dir_;
  int rank_;
  std::mutex mu_;  // guards the usage counters (workers allocate concurrently)
  std::vector<AlignedBuffer> mem_;
  std::vector<std::unique_ptr<File>> files_;
  Bytes use_[kNumTiers], peak_[kNumTiers];
};

}  // namespace strata::exec
