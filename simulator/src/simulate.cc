// Simulate(): runs SimGrid in a forked child (its engine can be created only
// once per process) and reads the op spans back through a pipe.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <xbt/log.h>

#include "platform.h"
#include "replay.h"
#include "strata/simulator/simulator.h"

namespace strata::sim {
namespace {

// Child -> parent frames: progress (kProgress, done, total) any number of
// times, then one result (kResult, Header, message, spans).
enum Frame : int32_t { kProgress = 1, kResult = 2 };

struct Header {
  int32_t ok = 0;
  int32_t message_len = 0;
  int64_t activities = 0;
  int64_t spans = 0;
};

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

std::vector<int> SimulatedRanks(const Plan& plan, const SimOptions& opt) {
  const int count = opt.reduce_symmetric_nodes ? plan.gpus_per_node : plan.world_size;
  std::vector<int> r(count);
  for (int i = 0; i < count; ++i) r[i] = i;
  return r;
}

// Child: build the platform, replay, stream the result to `fd`.
[[noreturn]] void RunChild(const Plan& plan, const HardwareSpec& hw, const SimOptions& opt, int fd) {
  xbt_log_control_set("root.thresh:critical");
  int argc = 1;
  char arg0[] = "strata-sim";
  char* argv[] = {arg0, nullptr};
  Header h;
  std::string msg;
  std::vector<OpSpan> spans;
  {
    sg4::Engine engine(&argc, argv);
    engine.set_config("network/model:CM02");
    engine.set_config("network/crosstraffic:0");
    engine.set_config("network/TCP-gamma:0");
    const std::vector<int> ranks = SimulatedRanks(plan, opt);
    Platform platform(hw, ranks, plan.world_size);
    Replay replay(plan, hw, opt, ranks, platform);
    replay.on_progress = [fd](int64_t done, int64_t total) {
      const int32_t tag = kProgress;
      const int64_t v[2] = {done, total};
      WriteAll(fd, &tag, sizeof tag) && WriteAll(fd, v, sizeof v);
    };
    Status st = replay.Run();
    h.ok = st.ok();
    msg = st.message();
    h.activities = replay.activities;
    spans = std::move(replay.spans);
  }
  h.message_len = static_cast<int32_t>(msg.size());
  h.spans = static_cast<int64_t>(spans.size());
  const int32_t tag = kResult;
  bool ok = WriteAll(fd, &tag, sizeof tag) && WriteAll(fd, &h, sizeof h) && WriteAll(fd, msg.data(), msg.size()) &&
            WriteAll(fd, spans.data(), spans.size() * sizeof(OpSpan));
  ::close(fd);
  ::_exit(ok ? 0 : 3);
}

}  // namespace

Result<SimResult> Simulate(const Plan& plan, const HardwareSpec& hw, const SimOptions& options) {
  if (hw.gpus_per_node != plan.gpus_per_node || hw.nodes != plan.nodes)
    return Status::InvalidArgument("hardware does not match the plan's nodes and GPUs per node");
  {
    const int64_t ranks = static_cast<int64_t>(SimulatedRanks(plan, options).size());
    const int64_t instances = static_cast<int64_t>(plan.ops.size()) * ranks;
    if (instances > options.max_op_instances)
      return Status::InvalidArgument(
          "the simulation would replay " + std::to_string(instances) + " op instances (" +
          std::to_string(plan.ops.size()) + " plan ops on " + std::to_string(ranks) + " simulated ranks); the limit is " +
          std::to_string(options.max_op_instances) + " (past it the simulator slows superlinearly; docs/limits.md). " +
          (options.reduce_symmetric_nodes ? "Fewer GPUs per node (hardware.gpus_per_node) or fewer layers"
                                          : "Simulate one node (drop --all-nodes), or fewer layers"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  int fds[2];
  if (::pipe(fds) != 0) return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::IOError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    RunChild(plan, hw, options, fds[1]);
  }
  ::close(fds[1]);
  Header h;
  std::string msg;
  std::vector<OpSpan> spans;
  bool ok = false, cancelled = false;
  while (true) {
    if (options.cancel != nullptr && options.cancel->load()) {
      ::kill(pid, SIGKILL);
      cancelled = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = ::poll(&p, 1, 50);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;
    int32_t tag = 0;
    if (!ReadAll(fds[0], &tag, sizeof tag)) break;
    if (tag == kProgress) {
      int64_t v[2];
      if (!ReadAll(fds[0], v, sizeof v)) break;
      if (options.on_progress && v[1] > 0) options.on_progress(static_cast<double>(v[0]) / static_cast<double>(v[1]));
      continue;
    }
    if (tag != kResult || !ReadAll(fds[0], &h, sizeof h)) break;
    msg.resize(static_cast<size_t>(h.message_len));
    spans.resize(static_cast<size_t>(h.spans));
    ok = ReadAll(fds[0], msg.data(), msg.size()) && ReadAll(fds[0], spans.data(), spans.size() * sizeof(OpSpan));
    break;
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (cancelled) return Status::Internal("simulation cancelled");
  if (!ok || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    if (WIFSIGNALED(wstatus))
      return Status::Internal("the simulator process died with signal " + std::to_string(WTERMSIG(wstatus)));
    return Status::Internal("the simulator process failed (exit status " + std::to_string(WEXITSTATUS(wstatus)) + ")");
  }
  if (!h.ok) return Status::Internal(msg);
  SimResult r;
  r.ranks = SimulatedRanks(plan, options);
  r.activities = h.activities;
  r.timeline = BuildTimeline(plan, std::move(spans), "simulate");
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace strata::sim
