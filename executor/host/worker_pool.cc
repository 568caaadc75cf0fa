#include "host/worker_pool.h"

#include <sched.h>

#include <chrono>
#include <memory>

namespace strata::exec {

WorkerPool::WorkerPool(int threads) {
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this, i] {
      MarkCurrentThreadCpuBound();  // the model's kernels
      Loop(i);
    });
}

void MarkCurrentThreadCpuBound() {
  sched_param p{};
  p.sched_priority = 0;
  (void)sched_setscheduler(0, SCHED_BATCH, &p);  // best effort: a policy, not a correctness matter
}

namespace {

// How long a thread polls before it blocks: about one small kernel. Polling
// costs a core's time for that long after each part, which a run on two
// cores can spare (its I/O threads mostly wait on the device).
constexpr std::chrono::microseconds kSpin{50};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls `done` until it holds or kSpin has passed; returns whether it holds.
template <typename Pred>
bool SpinUntil(Pred done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    CpuRelax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= until) return false;
  }
}

}  // namespace

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_.store(true, std::memory_order_seq_cst);
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::Start() {
  // Every worker checks in, needed or not: none may still be reading task_
  // when the next Run writes it.
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> l(mu_);
    start_.notify_all();
  }
}

void WorkerPool::Finish() {
  auto finished = [this] { return pending_.load(std::memory_order_seq_cst) == 0; };
  if (SpinUntil(finished)) return;
  std::unique_lock<std::mutex> l(mu_);
  caller_sleeps_.store(true, std::memory_order_seq_cst);
  done_.wait(l, finished);
  caller_sleeps_.store(false, std::memory_order_relaxed);
}

void WorkerPool::Loop(int index) {
  unsigned long seen = 0;
  for (;;) {
    auto woken = [&] {
      return generation_.load(std::memory_order_seq_cst) != seen || stop_.load(std::memory_order_acquire);
    };
    if (!SpinUntil(woken)) {
      std::unique_lock<std::mutex> l(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      start_.wait(l, woken);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    if (index < task_.parts) task_.call(task_.bytes, index);  // else not needed this time
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_sleeps_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> l(mu_);
      done_.notify_one();
    }
  }
}

WorkerPool& CallingThreadPool(int threads) {
  thread_local std::unique_ptr<WorkerPool> pool;
  if (pool == nullptr || pool->size() < threads) pool = std::make_unique<WorkerPool>(threads);
  return *pool;
}

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

}  // namespace strata::exec
