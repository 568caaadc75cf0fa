// A fixed set of threads for the host backend's compute kernels: one
// parallel loop at a time, split in parts, the calling thread taking part 0.
// Kernels of a millisecond or so cannot afford a thread start per call (tens
// of microseconds), and kernels of tens of microseconds (a small model's
// layers) not even a futex wake-up each: a worker that has finished a part
// spins for a while (kSpin) on the next generation before it sleeps, and
// the caller spins on the parts' completion before it sleeps. Private to
// the host backend.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::exec {

class WorkerPool {
 public:
  // `threads` in all, the caller's included (at least 1: then Run calls fn
  // inline and no thread is started).
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(0) .. fn(parts - 1) and returns when every one has returned.
  // REQUIRES: 1 <= parts <= size(); one Run at a time (the pool belongs to
  // one stream's worker); fn does not throw.
  void Run(int parts, const std::function<void(int)>& fn);

 private:
  void Loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  // Published by the release increment of generation_ (made under mu_, so
  // a worker that checks it under mu_ before sleeping cannot miss it).
  const std::function<void(int)>* fn_ = nullptr;
  int parts_ = 0;
  std::atomic<int> pending_{0};
  std::atomic<unsigned long> generation_{0};
  std::atomic<bool> stop_{false};
};

// Marks the calling thread (and threads it starts later) as CPU-bound
// batch work (Linux SCHED_BATCH; best effort, no privilege needed): waking
// it no longer preempts the thread that woke it. The host backend's device
// work (kernels, copies, the CPU optimizer) runs on such threads, so that an
// NVMe or MPI worker that finishes an op and wakes them goes on to issue its
// next request at once instead of waiting, preempted, for the kernel to end
// (measured on the seed: the read of sub-group 1 started 1.2 ms late in
// about half the steps, behind sub-group 0's Adam step, which it wakes).
void MarkCurrentThreadCpuBound();

// Threads this process may run on (its CPU affinity; under mpirun with
// binding, the cores bound to the rank), at least 1.
int UsableCores();

}  // namespace strata::exec
