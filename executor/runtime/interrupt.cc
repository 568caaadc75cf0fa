#include "strata/executor/interrupt.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

namespace strata::exec {
namespace {

std::atomic<int> g_signal{0};
int g_pipe[2] = {-1, -1};  // the handler wakes the watcher through it

std::mutex& CleanupMu() {
  static std::mutex mu;
  return mu;
}
std::set<std::string>& Cleanup() {
  static auto* dirs = new std::set<std::string>();  // never destroyed: the watcher may run at exit
  return *dirs;
}

extern "C" void OnStopSignal(int sig) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, sig);
  const char c = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &c, 1);  // async-signal-safe
}

[[noreturn]] void EndNow() {
  {
    std::lock_guard<std::mutex> l(CleanupMu());
    for (const std::string& d : Cleanup()) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
  const int sig = g_signal.load();
  std::fprintf(stderr, "strata: stopped by signal %d; swap files removed\n", sig);
  std::_Exit(128 + sig);
}

void Watch(double grace_s) {
  char c;
  while (::read(g_pipe[0], &c, 1) != 1) {
  }
  // Asked to stop: the run has grace_s seconds, or until a second signal.
  pollfd p{g_pipe[0], POLLIN, 0};
  int left_ms = static_cast<int>(grace_s * 1000);
  while (left_ms > 0) {
    const int step = std::min(left_ms, 100);
    if (::poll(&p, 1, step) > 0) break;
    left_ms -= step;
  }
  EndNow();
}

}  // namespace

void InstallStopHandlers(double grace_s) {
  static std::once_flag once;
  std::call_once(once, [grace_s] {
    if (::pipe2(g_pipe, O_CLOEXEC) != 0) return;  // no watcher: the handlers still set the flag
    std::thread(Watch, grace_s).detach();
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    // A file past RLIMIT_FSIZE: the write fails with EFBIG, an I/O error
    // the run reports and cleans up after, instead of a kill by SIGXFSZ.
    std::signal(SIGXFSZ, SIG_IGN);
  });
}

int StopSignal() { return g_signal.load(std::memory_order_relaxed); }

void RegisterStopCleanup(const std::string& dir) {
  std::lock_guard<std::mutex> l(CleanupMu());
  Cleanup().insert(dir);
}

void UnregisterStopCleanup(const std::string& dir) {
  std::lock_guard<std::mutex> l(CleanupMu());
  Cleanup().erase(dir);
}

}  // namespace strata::exec
