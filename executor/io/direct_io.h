// Splits arbitrary I/O requests into O_DIRECT operations (private): aligned
// offset, length and memory, at most `block` bytes each. Unaligned pieces go
// through page-aligned bounce buffers: reads copy out afterwards; writes of
// partial blocks read the blocks first (read-modify-write).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "io/aligned.h"
#include "strata/executor/env.h"

namespace strata::exec {

struct DirectOp {
  IoRequest::Op op;
  int fd;
  const std::string* path;
  uint64_t offset;
  std::byte* buf;
  size_t len;
};

struct CopyOut {
  std::byte* from;
  void* to;
  size_t len;
};

struct DirectPlan {
  std::vector<DirectOp> pre_reads;  // phase 1: partial blocks of unaligned writes
  std::vector<DirectOp> ops;        // phase 2
  std::vector<CopyOut> copy_outs;   // after phase 2: bounced reads to user memory
  std::vector<CopyOut> copy_ins;    // between phases: user data into write bounces
  std::vector<AlignedBuffer> bounces;
};

// REQUIRES: every request's file has a direct_fd().
DirectPlan PlanDirect(std::span<const IoRequest> requests, size_t block_size);

// The engine loop shared by libaio and io_uring: keeps up to `depth` ops in
// flight per thread over `threads` threads.
class AsyncQueue {
 public:
  virtual ~AsyncQueue() = default;
  virtual Status Init(unsigned depth) = 0;
  // Queues one op (not yet submitted); `tag` comes back on completion.
  virtual void Prepare(const DirectOp& op, size_t tag) = 0;
  // Submits what was prepared; `single` submits one op per call.
  virtual Status Submit(bool single) = 0;
  // Waits for at least `min` completions: (tag, result: bytes or -errno).
  virtual Status Reap(unsigned min, std::vector<std::pair<size_t, long>>& out) = 0;
};

// Runs `ops` over the given queues, one thread each (queues are set up once
// and reused: tearing a libaio context down waits for an RCU grace period,
// tens of milliseconds).
Status RunQueued(std::span<const DirectOp> ops, const AioConfig& cfg, const std::vector<AsyncQueue*>& queues);

Status ErrnoStatus(const std::string& what, const std::string& path, int err);

}  // namespace strata::exec
