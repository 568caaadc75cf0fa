#include "worker_pool.h"

#include <sched.h>

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

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::Run(int parts, const std::function<void(int)>& fn) {
  if (parts <= 1 || workers_.empty()) {
    for (int i = 0; i < parts; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    fn_ = &fn;
    parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  start_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> l(mu_);
  done_.wait(l, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void WorkerPool::Loop(int index) {
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(int)>* fn = nullptr;
    {
      std::unique_lock<std::mutex> l(mu_);
      start_.wait(l, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= parts_) continue;  // not needed this time
      fn = fn_;
    }
    (*fn)(index);
    std::lock_guard<std::mutex> l(mu_);
    if (--pending_ == 0) done_.notify_one();
  }
}

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

}  // namespace strata::exec
