#include "runtime/stream_threads.h"

#include <utility>

namespace strata::exec::detail {

StreamThreads::StreamThreads(int n) {
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { Loop(i); });
}

StreamThreads::~StreamThreads() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void StreamThreads::Run(std::vector<std::function<void()>> tasks) {
  std::unique_lock<std::mutex> l(mu_);
  tasks.resize(threads_.size());
  tasks_ = std::move(tasks);
  pending_ = 0;
  for (const auto& t : tasks_)
    if (t) ++pending_;
  if (pending_ == 0) return;
  ++generation_;
  start_.notify_all();
  done_.wait(l, [this] { return pending_ == 0; });
  // The functions (and what they captured) are released here, on the
  // caller's thread, before the caller's frame they may refer to is gone;
  // a thread that wakes late for this generation finds nothing to do.
  tasks_.assign(threads_.size(), nullptr);
}

void StreamThreads::Loop(int index) {
  unsigned long seen = 0;
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    start_.wait(l, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    // A thread with nothing to do this generation may wake only after the
    // next Run has begun: it then runs that one's task (tasks_ is that
    // generation's, and pending_ counts it).
    if (!tasks_[static_cast<size_t>(index)]) continue;
    const std::function<void()>& task = tasks_[static_cast<size_t>(index)];
    l.unlock();
    task();
    l.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace strata::exec::detail
