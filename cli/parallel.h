// Runs fn(0..n-1) on up to `jobs` threads (each simulation forks its own
// SimGrid process, so threads only wait).
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace strata::cli {

inline int DefaultJobs() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

inline void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  const size_t threads = std::min<size_t>(static_cast<size_t>(std::max(1, jobs)), n);
  for (size_t j = 0; j < threads; ++j)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < n;) fn(i);
    });
  for (auto& t : pool) t.join();
}

}  // namespace strata::cli
