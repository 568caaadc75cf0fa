#include "runtime/stream_threads.h"

#include <algorithm>
#include <utility>

namespace strata::exec::detail {

StreamThreads::StreamThreads(int n) {
  for (int i = 0; i < n; ++i) slots_.push_back(std::make_unique<Slot>());
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { Loop(i); });
}

StreamThreads::~StreamThreads() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  for (auto& s : slots_) s->start.notify_one();
  for (std::thread& t : threads_) t.join();
}

void StreamThreads::Run(std::vector<std::function<void()>> tasks) {
  const size_t n = std::min(tasks.size(), slots_.size());
  std::unique_lock<std::mutex> l(mu_);
  for (size_t i = 0; i < n; ++i)
    if (tasks[i]) {
      slots_[i]->task = std::move(tasks[i]);
      slots_[i]->ready = true;
      ++pending_;
    }
  if (pending_ == 0) return;
  l.unlock();  // a woken thread need not wait for the lock
  for (size_t i = 0; i < n; ++i)
    if (slots_[i]->task) slots_[i]->start.notify_one();
  l.lock();
  done_.wait(l, [this] { return pending_ == 0; });
  // The functions (and what they captured) are released here, on the
  // caller's thread, before the caller's frame they may refer to is gone.
  for (size_t i = 0; i < n; ++i) slots_[i]->task = nullptr;
}

void StreamThreads::Loop(int index) {
  Slot& slot = *slots_[static_cast<size_t>(index)];
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    slot.start.wait(l, [&] { return stop_ || slot.ready; });
    if (stop_) return;
    l.unlock();
    slot.task();  // Run changes slot.task only once every task has returned
    l.lock();
    slot.ready = false;
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace strata::exec::detail
