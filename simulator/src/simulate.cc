// Simulate(): runs SimGrid in a child process (its engine can be created
// only once per process) and reads the op spans back through a pipe: a
// forked child when this process has one thread, else the spawned
// strata-sim-worker helper (simulator.h says why).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/log.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "platform.h"
#include "replay.h"
#include "sim_child.h"
#include "strata/cost/endurance.h"
#include "strata/plan/plan_wire.h"
#include "strata/plan/validator.h"
#include "strata/simulator/simulator.h"

extern char** environ;

namespace strata::sim {
namespace {

// Child -> parent frames, any number of times: progress (kProgress, done,
// total) and completed op instances as the replay goes (kSpans, count,
// spans: the child never holds them all, and the parent copies them in
// while the simulation runs); then one result (kResult, Header, message,
// the last spans).
enum Frame : int32_t { kProgress = 1, kResult = 2, kSpans = 3 };

struct Header {
  int32_t ok = 0;
  int32_t message_len = 0;
  int64_t activities = 0;
  int64_t domain_flows = 0;
  int64_t max_domain_flows = 0;
  int64_t stalls = 0;
  double stalled_s = 0;
  int64_t spans = 0;  // those that follow the message (not those streamed before)
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

// The ranks the replay simulates: every rank, or under the symmetry
// reduction one node's, plus (pipeline stages) the nodes holding the ranks
// its ranks send to and receive from, until the set is closed: the same
// position in every stage. Whole nodes, ascending.
std::vector<int> SimulatedRanks(const Plan& plan, const SimOptions& opt) {
  std::vector<int> r;
  if (!opt.reduce_symmetric_nodes || opt.Stalls()) {  // stalls make the nodes differ
    for (int i = 0; i < plan.world_size; ++i) r.push_back(i);
    return r;
  }
  const int gpn = std::max(1, plan.gpus_per_node);
  std::vector<char> node_in(static_cast<size_t>(std::max(1, plan.nodes)), 0);
  std::vector<int> todo = {0};
  node_in[0] = 1;
  while (!todo.empty()) {
    const int node = todo.back();
    todo.pop_back();
    for (int rank = node * gpn; rank < (node + 1) * gpn; ++rank)
      for (int s = 0; s < plan.pipeline; ++s) {
        const int peer_node = plan.PeerRank(rank, s) / gpn;
        if (!node_in[static_cast<size_t>(peer_node)]) {
          node_in[static_cast<size_t>(peer_node)] = 1;
          todo.push_back(peer_node);
        }
      }
  }
  for (int node = 0; node < plan.nodes; ++node)
    if (node_in[static_cast<size_t>(node)])
      for (int rank = node * gpn; rank < (node + 1) * gpn; ++rank) r.push_back(rank);
  return r;
}

// What the replay completes: each simulated rank with the op instances it
// runs (its stage's ops), and their sum.
std::vector<std::pair<int, int64_t>> OpCounts(const Plan& plan, const std::vector<int>& ranks) {
  std::vector<int64_t> per_stage(static_cast<size_t>(std::max(1, plan.pipeline)), 0);
  for (const Op& op : plan.ops) ++per_stage[static_cast<size_t>(std::clamp(op.stage, 0, plan.pipeline - 1))];
  std::vector<std::pair<int, int64_t>> counts;
  for (int r : ranks) counts.emplace_back(r, per_stage[static_cast<size_t>(plan.StageOf(r))]);
  return counts;
}

int64_t OpInstances(const Plan& plan, const std::vector<int>& ranks) {
  int64_t n = 0;
  for (const auto& [rank, count] : OpCounts(plan, ranks)) n += count;
  return n;
}

// Point-to-point pairs among the simulated ranks: each rank with its
// neighbouring stages' ranks, and the first stage's with the last's (tied
// gradients).
std::vector<std::pair<int, int>> PeerPairs(const Plan& plan, const std::vector<int>& ranks) {
  std::vector<std::pair<int, int>> pairs;
  if (plan.pipeline <= 1) return pairs;
  for (int r : ranks) {
    const int s = plan.StageOf(r);
    for (int t : {s - 1, s + 1, s == 0 ? plan.pipeline - 1 : -1, s == plan.pipeline - 1 ? 0 : -1})
      if (t >= 0 && t < plan.pipeline && t != s) pairs.push_back({r, plan.PeerRank(r, t)});
  }
  return pairs;
}

// One thread in this process (/proc/self/task has one entry): fork is safe.
bool SingleThreaded() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return false;
  int n = 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n == 1;
}

// The helper: $STRATA_SIM_WORKER, beside this executable, or where the
// build put it.
std::string WorkerPath() {
  if (const char* e = std::getenv("STRATA_SIM_WORKER"); e != nullptr && *e != '\0') return e;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/') + 1);
    if (::access((dir + "strata-sim-worker").c_str(), X_OK) == 0) return dir + "strata-sim-worker";
  }
  return STRATA_SIM_WORKER_BUILD_PATH;
}

// The largest plan a request may carry: the planner's limits keep a plan
// to a few GiB of JSON (docs/limits.md), and its wire bytes are fewer.
constexpr uint64_t kMaxPlanBytes = uint64_t{16} << 30;

// The plain fields of the request (the plan follows, EncodePlanWire).
struct RequestHead {
  char magic[8] = {'S', 'T', 'R', 'A', 'S', 'I', 'M', '6'};  // bumped whenever this layout changes
  HardwareSpec hw;
  int32_t collectives = 0;
  int32_t reduce_symmetric_nodes = 1;
  int32_t activity_owners_from_ranks = 0;
  int32_t signal_completions = 0;
  int32_t flow_domains = 1;
  int64_t max_op_instances = 0;
  int64_t spans_per_frame = 0;
  double jitter = 0;
  uint64_t jitter_seed = 0;
  double stall_rate = 0;
  double stall_time = 0;
  uint64_t plan_bytes = 0;
};
static_assert(std::is_trivially_copyable_v<HardwareSpec>, "the helper receives HardwareSpec as bytes");

}  // namespace

bool WriteSimRequest(int fd, const Plan& plan, const HardwareSpec& hw, const SimOptions& opt) {
  const std::string wire = EncodePlanWire(plan);
  RequestHead h;
  h.hw = hw;
  h.collectives = static_cast<int32_t>(opt.collectives);
  h.reduce_symmetric_nodes = opt.reduce_symmetric_nodes ? 1 : 0;
  h.activity_owners_from_ranks = opt.activity_owners_from_ranks;
  h.signal_completions = opt.signal_completions ? 1 : 0;
  h.flow_domains = opt.flow_domains ? 1 : 0;
  h.max_op_instances = opt.max_op_instances;
  h.spans_per_frame = opt.spans_per_frame;
  h.jitter = opt.jitter;
  h.jitter_seed = opt.jitter_seed;
  h.stall_rate = opt.stall_rate;
  h.stall_time = opt.stall_time;
  h.plan_bytes = wire.size();
  auto send_all = [fd](const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  };
  return send_all(&h, sizeof h) && send_all(wire.data(), wire.size());
}

Status ReadSimRequest(int fd, Plan* plan, HardwareSpec* hw, SimOptions* opt) {
  RequestHead h;
  const RequestHead want;
  if (!ReadAll(fd, &h, sizeof h) || std::memcmp(h.magic, want.magic, sizeof h.magic) != 0)
    return Status::InvalidArgument("no simulation request on stdin (strata-sim-worker is run by strata, not by hand)");
  // The helper trusts nothing it is sent: the size is bounded before it is
  // allocated, and the hardware and the plan pass the CLI's checks (all
  // but capacity, which an infeasible sweep point violates) before the
  // replay indexes anything with them.
  if (h.plan_bytes > kMaxPlanBytes)
    return Status::InvalidArgument("the simulation request claims a plan of " + std::to_string(h.plan_bytes) +
                                   " bytes, over the limit of " + std::to_string(kMaxPlanBytes));
  if (const auto issues = CheckHardwareSpec(h.hw); !issues.empty())
    return Status::InvalidArgument("the simulation request's hardware: " + issues[0].path + ": " + issues[0].message);
  std::string wire(h.plan_bytes, '\0');
  if (!ReadAll(fd, wire.data(), wire.size())) return Status::IOError("the simulation request was cut short");
  STRATA_ASSIGN_OR_RETURN(auto p, DecodePlanWire(wire));
  for (const Violation& v : ValidatePlan(p, 1).violations)
    if (v.kind != "capacity") return Status::InvalidArgument("the simulation request's plan is invalid: " + v.message);
  *plan = std::move(p);
  *hw = h.hw;
  opt->collectives = static_cast<CollectiveModel>(h.collectives);
  opt->reduce_symmetric_nodes = h.reduce_symmetric_nodes != 0;
  opt->activity_owners_from_ranks = h.activity_owners_from_ranks;
  opt->signal_completions = h.signal_completions != 0;
  opt->flow_domains = h.flow_domains != 0;
  opt->max_op_instances = h.max_op_instances;
  opt->spans_per_frame = h.spans_per_frame;
  opt->jitter = h.jitter;
  opt->jitter_seed = h.jitter_seed;
  opt->stall_rate = h.stall_rate;
  opt->stall_time = h.stall_time;
  return Status::Ok();
}

// Child: build the platform, replay, stream the result to `fd`.
void RunSimulationChild(const Plan& plan, const HardwareSpec& hw, const SimOptions& opt, int fd) {
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
    // The replay's owner actors (replay.h) only create Execs: small stacks
    // (KiB), so that one per simulated rank stays cheap at thousands of ranks.
    engine.set_config("contexts/stack-size:64");
    const std::vector<int> ranks = SimulatedRanks(plan, opt);
    Platform platform(hw, ranks, plan.groups, PeerPairs(plan, ranks), Replay::UsesSignals(opt, ranks.size()));
    Replay replay(plan, hw, opt, ranks, platform);
    replay.on_progress = [fd](int64_t done, int64_t total) {
      const int32_t tag = kProgress;
      const int64_t v[2] = {done, total};
      WriteAll(fd, &tag, sizeof tag) && WriteAll(fd, v, sizeof v);
    };
    bool streamed = true;
    replay.on_spans = [fd, &streamed](const std::vector<OpSpan>& s) {
      const int32_t tag = kSpans;
      const int64_t n = static_cast<int64_t>(s.size());
      streamed = streamed && WriteAll(fd, &tag, sizeof tag) && WriteAll(fd, &n, sizeof n) &&
                 WriteAll(fd, s.data(), s.size() * sizeof(OpSpan));
    };
    Status st = replay.Run();
    if (st.ok() && !streamed) st = Status::IOError("could not send the op spans to the parent process");
    h.ok = st.ok();
    msg = st.message();
    h.activities = replay.activities;
    h.domain_flows = replay.domain_flows;
    h.max_domain_flows = replay.max_domain_flows;
    h.stalls = replay.stalls;
    h.stalled_s = replay.stalled_s;
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

namespace {

// A simulation this large goes to the helper even from a single-threaded
// caller when the helper has jemalloc (simulator/CMakeLists.txt): its
// start (an exec and the plan's wire bytes, milliseconds) is then small
// beside the replay, which runs faster than in a forked child of a caller
// on glibc (the GUI, the tests). The CLI links jemalloc too, so its forked
// child would do as well; the helper still starts from a clean address
// space rather than a copy of the caller's.
bool PreferHelper(const Plan& plan, const SimOptions& opt) {
#ifdef STRATA_SIM_WORKER_JEMALLOC
  constexpr int64_t kHelperInstances = 1'000'000;
  return OpInstances(plan, SimulatedRanks(plan, opt)) >= kHelperInstances && ::access(WorkerPath().c_str(), X_OK) == 0;
#else
  (void)plan, (void)opt;
  return false;
#endif
}

// Starts the child: forked, or the helper spawned and sent the request.
// Returns its pid and the read end of its result frames.
Status StartChild(const Plan& plan, const HardwareSpec& hw, const SimOptions& opt, pid_t* pid, int* frames) {
  if (SingleThreaded() && !PreferHelper(plan, opt)) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + std::strerror(errno));
    std::fflush(nullptr);
    *pid = ::fork();
    if (*pid < 0) return Status::IOError(std::string("fork: ") + std::strerror(errno));
    if (*pid == 0) {
      ::close(fds[0]);
      RunSimulationChild(plan, hw, opt, fds[1]);
    }
    ::close(fds[1]);
    *frames = fds[0];
    return Status::Ok();
  }
  int req[2], out[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, req) != 0)
    return Status::IOError(std::string("socketpair: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(req[0]);
    ::close(req[1]);
    return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  }
  const std::string path = WorkerPath();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, req[1], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  char arg0[] = "strata-sim-worker";
  char* argv[] = {arg0, nullptr};
  const int err = ::posix_spawn(pid, path.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(req[1]);
  ::close(out[1]);
  if (err != 0) {
    ::close(req[0]);
    ::close(out[0]);
    return Status::IOError("cannot start the simulator helper '" + path + "': " + std::strerror(err) +
                           " (set STRATA_SIM_WORKER to its path)");
  }
  const bool sent = WriteSimRequest(req[0], plan, hw, opt);
  ::close(req[0]);
  if (!sent) {
    ::kill(*pid, SIGKILL);
    ::waitpid(*pid, nullptr, 0);
    ::close(out[0]);
    return Status::IOError("could not send the plan to the simulator helper '" + path + "'");
  }
  *frames = out[0];
  return Status::Ok();
}

// The progress bar on stderr: "simulating [####....]  40% (1234 ops)".
void DrawProgress(int64_t done, int64_t total, bool* drawn) {
  const int pct = static_cast<int>(100 * done / total);
  char bar[41];
  for (int i = 0; i < 40; ++i) bar[i] = i < pct * 40 / 100 ? '#' : '.';
  bar[40] = '\0';
  std::fprintf(stderr, "\rsimulating [%s] %3d%% (%lld ops)", bar, pct, static_cast<long long>(done));
  *drawn = true;
}

}  // namespace

Result<SimResult> Simulate(const Plan& plan, const HardwareSpec& hw, const SimOptions& options) {
  if (hw.gpus_per_node != plan.gpus_per_node || hw.nodes != plan.nodes)
    return Status::InvalidArgument("hardware does not match the plan's nodes and GPUs per node");
  if (!JitterInRange(options.jitter))
    return Status::InvalidArgument("jitter must be in [0, 0.5), got " + std::to_string(options.jitter));
  if (!StallsInRange(options.stall_rate, options.stall_time))
    return Status::InvalidArgument("stall_rate must be finite and >= 0 and stall_time in [0, 3.2e7] s, got " +
                                   std::to_string(options.stall_rate) + " and " + std::to_string(options.stall_time));
  std::vector<int> ranks = SimulatedRanks(plan, options);
  const int64_t instances = OpInstances(plan, ranks);
  if (instances > options.max_op_instances)
    return Status::InvalidArgument("the simulation would replay " + std::to_string(instances) + " op instances (" +
                                   std::to_string(plan.ops.size()) + " plan ops on " + std::to_string(ranks.size()) +
                                   " simulated ranks); the limit is " + std::to_string(options.max_op_instances) +
                                   " (each takes about 45 bytes and 0.5-5 us here; docs/limits.md). " +
                                   (options.Stalls() ? "Stalls simulate every node: fewer nodes or fewer layers"
                                    : options.reduce_symmetric_nodes
                                        ? "Fewer GPUs per node (hardware.gpus_per_node) or fewer layers"
                                        : "Simulate one node (drop --all-nodes), or fewer layers") +
                                   ", or raise the limit (strata simulate --max-op-instances)");
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = -1;
  int frames = -1;
  STRATA_RETURN_IF_ERROR(StartChild(plan, hw, options, &pid, &frames));
  Header h;
  std::string msg;
  // The spans become timeline ops as they arrive, in their ranks' slots,
  // so they are never all held beside the ops.
  TimelineBuilder timeline(plan, "simulate", OpCounts(plan, ranks));
  int64_t received = 0;
  std::vector<OpSpan> chunk;
  // Reads n spans from the child into the timeline. A frame is written
  // whole: the read blocks only while the rest of it is on the way. Counts
  // beyond the plan's instances, and spans of no simulated rank's op or
  // one too many of a rank, are refused (a corrupt stream).
  auto read_spans = [&](int64_t n) {
    if (n < 0 || n > instances - received) return false;
    received += n;
    while (n > 0) {
      chunk.resize(static_cast<size_t>(std::min<int64_t>(n, 1 << 16)));
      if (!ReadAll(frames, chunk.data(), chunk.size() * sizeof(OpSpan)) || !timeline.Add(chunk.data(), chunk.size()))
        return false;
      n -= static_cast<int64_t>(chunk.size());
    }
    return true;
  };
  bool ok = false, cancelled = false, timed_out = false, bar_drawn = false;
  while (true) {
    if (options.cancel != nullptr && options.cancel->load()) {
      ::kill(pid, SIGKILL);
      cancelled = true;
      break;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > options.timeout_s) {
      ::kill(pid, SIGKILL);
      timed_out = true;
      break;
    }
    pollfd p{frames, POLLIN, 0};
    const int n = ::poll(&p, 1, 50);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;
    int32_t tag = 0;
    if (!ReadAll(frames, &tag, sizeof tag)) break;
    if (tag == kProgress) {
      int64_t v[2];
      if (!ReadAll(frames, v, sizeof v)) break;
      if (options.on_progress && v[1] > 0) options.on_progress(static_cast<double>(v[0]) / static_cast<double>(v[1]));
      // The replay runs in the child, which only reports: the bar is the
      // parent's (SimOptions::progress).
      if (options.progress && v[1] > 0 && isatty(2)) DrawProgress(v[0], v[1], &bar_drawn);
      continue;
    }
    if (tag == kSpans) {
      int64_t n = 0;
      if (!ReadAll(frames, &n, sizeof n) || !read_spans(n)) break;
      continue;
    }
    if (tag != kResult || !ReadAll(frames, &h, sizeof h)) break;
    if (h.message_len < 0 || h.message_len > (1 << 20)) break;
    msg.resize(static_cast<size_t>(h.message_len));
    ok = ReadAll(frames, msg.data(), msg.size()) && read_spans(h.spans);
    break;
  }
  ::close(frames);
  if (bar_drawn) std::fprintf(stderr, "\r%-60s\r", "");
  if (!ok && !cancelled && !timed_out) ::kill(pid, SIGKILL);  // cut short or corrupt: never wait on a live child
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (cancelled) return Status::Internal("simulation cancelled");
  if (timed_out) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", options.timeout_s);
    return Status::Internal(std::string("the simulator process did not finish in ") + buf +
                            " s and was killed (SimOptions::timeout_s)");
  }
  if (!ok || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    if (WIFSIGNALED(wstatus))
      return Status::Internal("the simulator process died with signal " + std::to_string(WTERMSIG(wstatus)));
    return Status::Internal("the simulator process failed (exit status " + std::to_string(WEXITSTATUS(wstatus)) + ")");
  }
  if (!h.ok) return Status::Internal(msg);
  SimResult r;
  r.ranks = std::move(ranks);
  r.activities = h.activities;
  r.domain_flows = h.domain_flows;
  r.max_domain_flows = h.max_domain_flows;
  r.stalls = h.stalls;
  r.stalled_s = h.stalled_s;
  r.peak_flops = hw.gpu.peak_flops.flops_per_s;
  r.gpu_efficiency = hw.gpu.efficiency;
  std::vector<OpSpan>().swap(chunk);
  r.timeline = std::move(timeline).Finish();
  // The drives' wear at the simulated rate, for whoever shows the timeline.
  r.wear = NvmeWear(plan, hw.nvme, r.timeline.iteration_s);
  r.timeline.notes = WearLines(r.wear, "", "at the simulated rate");
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace strata::sim
