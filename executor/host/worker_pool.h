// A fixed set of threads for the host backend's compute kernels: one
// parallel loop at a time, split in parts, the calling thread taking part 0.
// Kernels of a millisecond or so cannot afford a thread start per call (tens
// of microseconds), and kernels of tens of microseconds (a small model's
// layers) not even a futex wake-up each: a worker that has finished a part
// spins for a while (kSpin) on the next generation before it sleeps, and
// the caller spins on the parts' completion before it sleeps; while they
// spin, a Run takes neither a lock nor a system call, and costs the
// cache-line transfers of the start, the part function and the check-in.
// Private to the host backend.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

namespace strata::exec {

class WorkerPool {
 public:
  // The largest part function Run takes (its captures).
  static constexpr size_t kTaskBytes = 240;

  // `threads` in all, the caller's included (at least 1: then Run calls fn
  // inline and no thread is started).
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(0) .. fn(parts - 1) and returns when every one has returned.
  // fn is copied into the pool's own cache lines, which the workers read in
  // parallel once they see the start: each pointer they followed into the
  // caller's frame instead (a std::function, its heap closure, the
  // variables it refers to) was one more cache-line transfer in a chain,
  // ~0.2 us each between this VM's cores; capture by value what the parts
  // read. REQUIRES: 1 <= parts <= size(); one Run at a time (the pool
  // belongs to one stream's worker); fn does not throw; F trivially
  // copyable, at most kTaskBytes.
  template <typename F>
  void Run(int parts, const F& fn) {
    static_assert(std::is_trivially_copyable_v<F> && sizeof(F) <= kTaskBytes && alignof(F) <= alignof(std::max_align_t),
                  "WorkerPool::Run: a small trivially copyable function (capture pointers and sizes)");
    if (parts <= 1 || workers_.empty()) {
      for (int i = 0; i < parts; ++i) fn(i);
      return;
    }
    ::new (static_cast<void*>(task_.bytes)) F(fn);  // trivially destructible: never destroyed
    task_.call = [](const void* t, int part) { (*std::launder(static_cast<const F*>(t)))(part); };
    task_.parts = parts;
    Start();
    fn(0);
    Finish();
  }

 private:
  void Start();
  void Finish();
  void Loop(int index);

  // Written by Run before the start, read by the workers after it.
  struct alignas(64) Task {
    void (*call)(const void*, int) = nullptr;
    int parts = 0;
    alignas(std::max_align_t) unsigned char bytes[kTaskBytes];
  } task_;
  // The start: a new generation (release) publishes task_. On a line of
  // its own, which the idle workers poll.
  alignas(64) std::atomic<unsigned long> generation_{0};
  std::atomic<bool> stop_{false};
  // Parts not yet checked in; the caller polls it.
  alignas(64) std::atomic<int> pending_{0};
  // Sleeping, after kSpin of polling (worker_pool.cc): the side that
  // publishes notifies only when the other says it sleeps (seq_cst both
  // ways, so one of the two sees the other), under mu_ so that the
  // notification cannot fall between the sleeper's check and its wait.
  alignas(64) std::mutex mu_;
  std::condition_variable start_, done_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeps_{false};
  std::vector<std::thread> workers_;
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

// The calling thread's own pool of at least `threads` (made, or remade
// larger, on demand), kept for the thread's lifetime: for work split per
// call (a large copy, a CPU Adam step) on threads that live for a run (the
// host backend's stream workers), where a thread started and joined per
// call cost 20-37% of an 8 MiB copy (bench/copy_bench). One per thread, so
// two threads' calls never share one (a pool runs one loop at a time); the
// callers do not nest. Its workers are marked CPU-bound.
WorkerPool& CallingThreadPool(int threads);

// Threads this process may run on (its CPU affinity; under mpirun with
// binding, the cores bound to the rank), at least 1.
int UsableCores();

}  // namespace strata::exec
