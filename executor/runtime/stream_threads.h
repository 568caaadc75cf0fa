// The Runner's stream workers (runner.cc, RunParallel): one thread per
// stream for the whole run, reused step after step. Threads started anew
// each step paid, every step, for what a thread builds up once: the host
// kernels' thread-local packing buffers (host/linear_low.cc, Scratch: an
// allocation and its page faults), its stack pages (glibc gives a joined
// thread's stack back with MADV_DONTNEED) and the starts themselves. On
// gpt-tiny that was about 665 page faults and 1 ms of a 5.5 ms step, the
// gap papers/sim-vs-real found between a threaded and a sequential run.
// Private to the Runner.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::exec::detail {

class StreamThreads {
 public:
  // `n` threads, started now; they sleep until Run.
  explicit StreamThreads(int n);
  // Joins every thread. REQUIRES: no Run in progress.
  ~StreamThreads();
  StreamThreads(const StreamThreads&) = delete;
  StreamThreads& operator=(const StreamThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }

  // Runs tasks[i] on thread i, each a thread of its own for the run (an
  // empty function: thread i does nothing this time), and returns when
  // every one has returned. REQUIRES: tasks.size() <= size(); one Run at a
  // time; the tasks do not throw.
  void Run(std::vector<std::function<void()>> tasks);

 private:
  void Loop(int index);

  // Each thread waits on its own condition variable, so that a Run wakes
  // only the threads it gives a task (waking all seven streams' threads for
  // the two or three a plan uses costs the one that can run its core, on a
  // two-core host).
  struct Slot {
    std::condition_variable start;
    std::function<void()> task;  // set by Run, under mu_
    bool ready = false;          // task is this Run's and not yet done
  };
  std::mutex mu_;
  std::condition_variable done_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int pending_ = 0;  // this Run's tasks not yet returned
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace strata::exec::detail
