// The Runner's stream workers (executor/runtime/stream_threads.h): each
// task index runs on its own thread, the same thread every Run, never the
// caller's, and Run returns only when every task has.
#include "runtime/stream_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace strata::exec::detail {
namespace {

TEST(StreamThreads, EachIndexKeepsItsThreadAcrossRuns) {
  constexpr int kThreads = 7;
  StreamThreads threads(kThreads);
  ASSERT_EQ(threads.size(), kThreads);
  std::vector<std::thread::id> first(kThreads);
  std::mt19937 rng(1);
  for (int run = 0; run < 200; ++run) {
    std::vector<std::thread::id> seen(kThreads);
    std::vector<int> ran(kThreads, 0);
    std::vector<std::function<void()>> tasks(kThreads);
    // Some indices idle in some runs (a stream without ops this step), and
    // some tasks slower than others.
    for (int i = 0; i < kThreads; ++i) {
      if (run > 0 && rng() % 3 == 0) continue;
      const int sleep_us = static_cast<int>(rng() % 50);
      tasks[i] = [&, i, sleep_us] {
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
        seen[i] = std::this_thread::get_id();
        ++ran[i];
      };
    }
    std::vector<bool> had(kThreads);
    for (int i = 0; i < kThreads; ++i) had[i] = static_cast<bool>(tasks[i]);
    threads.Run(std::move(tasks));
    for (int i = 0; i < kThreads; ++i) {
      if (!had[i]) {
        EXPECT_EQ(ran[i], 0);
        continue;
      }
      ASSERT_EQ(ran[i], 1) << "run " << run << " index " << i;  // done when Run returned, once
      EXPECT_NE(seen[i], std::this_thread::get_id());
      if (run == 0) first[i] = seen[i];
      EXPECT_EQ(seen[i], first[i]) << "run " << run << " index " << i;
    }
  }
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), static_cast<size_t>(kThreads));
}

// Tasks that wait on each other (as stream workers wait on another
// stream's ops) all run at once, each on its thread.
TEST(StreamThreads, TasksRunConcurrently) {
  StreamThreads threads(3);
  for (int run = 0; run < 50; ++run) {
    std::atomic<int> arrived{0};
    std::vector<std::function<void()>> tasks;
    for (int i = 0; i < 3; ++i)
      tasks.push_back([&] {
        arrived.fetch_add(1);
        while (arrived.load() < 3) std::this_thread::yield();
      });
    threads.Run(std::move(tasks));
    EXPECT_EQ(arrived.load(), 3);
  }
}

TEST(StreamThreads, AnEmptyRunReturnsAtOnce) {
  StreamThreads threads(2);
  threads.Run({});
  threads.Run({nullptr, nullptr});
  int ran = 0;
  threads.Run({[&] { ++ran; }});  // fewer tasks than threads
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace strata::exec::detail
