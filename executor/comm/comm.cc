#include "strata/executor/comm.h"

#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace strata::exec {
namespace {

std::mutex& Lock() {
  static std::mutex mu;
  return mu;
}

// SimGrid's library exports the MPI API too (SMPI): in a binary linking
// both, a plain MPI_Init may reach SimGrid. The functions are taken from
// Open MPI's library explicitly.
struct Mpi {
  decltype(&MPI_Initialized) initialized;
  decltype(&MPI_Init_thread) init_thread;
  decltype(&MPI_Finalized) finalized;
  decltype(&MPI_Finalize) finalize;
  decltype(&MPI_Comm_rank) comm_rank;
  decltype(&MPI_Comm_size) comm_size;
  decltype(&MPI_Comm_split) comm_split;
  decltype(&MPI_Comm_free) comm_free;
  decltype(&MPI_Iallgather) iallgather;
  decltype(&MPI_Ialltoall) ialltoall;
  decltype(&MPI_Iallreduce) iallreduce;
  decltype(&MPI_Ibcast) ibcast;
  decltype(&MPI_Isend) isend;
  decltype(&MPI_Irecv) irecv;
  decltype(&MPI_Test) test;
  decltype(&MPI_Abort) abort;
};

template <typename F>
void Resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) {
    std::fprintf(stderr, "strata: %s not found in Open MPI's library: %s\n", name, dlerror());
    std::abort();
  }
}

const Mpi& Api() {
  static const Mpi api = [] {
    // The library configure found; where that file is absent (a build
    // carried to a machine with another release of the same ABI), its
    // soname through the loader's search path.
    const bool configured = access(STRATA_LIBMPI, F_OK) == 0;
    const char* path = configured ? STRATA_LIBMPI : STRATA_LIBMPI_SONAME;
    void* lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "strata: cannot load Open MPI%s: %s\n",
                   configured ? "" : " (" STRATA_LIBMPI " is absent, so by soname)", dlerror());
      std::abort();
    }
    Mpi m{};
    Resolve(lib, "MPI_Initialized", &m.initialized);
    Resolve(lib, "MPI_Init_thread", &m.init_thread);
    Resolve(lib, "MPI_Finalized", &m.finalized);
    Resolve(lib, "MPI_Finalize", &m.finalize);
    Resolve(lib, "MPI_Comm_rank", &m.comm_rank);
    Resolve(lib, "MPI_Comm_size", &m.comm_size);
    Resolve(lib, "MPI_Comm_split", &m.comm_split);
    Resolve(lib, "MPI_Comm_free", &m.comm_free);
    Resolve(lib, "MPI_Iallgather", &m.iallgather);
    Resolve(lib, "MPI_Ialltoall", &m.ialltoall);
    Resolve(lib, "MPI_Iallreduce", &m.iallreduce);
    Resolve(lib, "MPI_Ibcast", &m.ibcast);
    Resolve(lib, "MPI_Isend", &m.isend);
    Resolve(lib, "MPI_Irecv", &m.irecv);
    Resolve(lib, "MPI_Test", &m.test);
    Resolve(lib, "MPI_Abort", &m.abort);
    return m;
  }();
  return api;
}

MPI_Comm C(void* h) { return reinterpret_cast<MPI_Comm>(h); }

// MPI counts are ints. Point-to-point transfers go in chunks below that;
// a collective over more is a limit of this wrapper, reported and fatal
// (every rank reaches it, so none is left waiting).
constexpr size_t kMaxCount = size_t{1} << 30;
int Count(size_t n, const char* what) {
  if (n <= static_cast<size_t>(std::numeric_limits<int>::max())) return static_cast<int>(n);
  std::fprintf(stderr, "strata: %s of %zu elements: over MPI's int count (2^31 - 1), which Comm does not split\n", what,
               n);
  Comm::World().Abort(1);
}

std::atomic<double> g_timeout_s{Comm::kDefaultTimeoutS};
thread_local std::string t_label;

[[noreturn]] void TimedOut(const char* what, int group_size, double waited) {
  std::fprintf(stderr,
               "strata: rank %d: %s in a group of %d ranks%s%s did not complete in %.0f s (--collective-timeout %g): "
               "another rank did not join it (stopped, hung or gone); ending the job\n",
               Comm::World().rank(), what, group_size, t_label.empty() ? "" : " for ", t_label.c_str(), waited,
               g_timeout_s.load());
  Comm::World().Abort(1);
}

// Completes a posted request: MPI_Test under the lock, the lock released
// between tests (other threads' calls go on meanwhile). Yields first, then
// naps, so that a long wait does not take a core from the work it waits for;
// past the timeout the job ends (Comm::SetTimeout).
void Wait(MPI_Request* req, const char* what, int group_size) {
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    {
      std::lock_guard<std::mutex> l(Lock());
      Api().test(req, &done, MPI_STATUS_IGNORE);
    }
    if (done) return;
    if (polls < 200) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (const double limit = g_timeout_s.load(std::memory_order_relaxed); limit > 0 && polls % 1024 == 0) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > limit) TimedOut(what, group_size, waited);
    }
  }
}

// Posts `post` (an MPI_I* call) under the lock and waits for it.
template <typename F>
void Run(const char* what, int group_size, F post) {
  MPI_Request req = MPI_REQUEST_NULL;
  {
    std::lock_guard<std::mutex> l(Lock());
    post(&req);
  }
  Wait(&req, what, group_size);
}

}  // namespace

struct Comm::Pending {
  std::vector<std::byte> data;
  MPI_Request req = MPI_REQUEST_NULL;
};

Comm::Comm(void* handle, bool owned) : handle_(handle), owned_(owned) {
  Api().comm_rank(C(handle_), &rank_);
  Api().comm_size(C(handle_), &size_);
}

Comm::~Comm() {
  int finalized = 0;
  Api().finalized(&finalized);
  if (finalized) return;  // nothing may call MPI any more
  FlushSends();
  if (owned_) {
    MPI_Comm c = C(handle_);
    std::lock_guard<std::mutex> l(Lock());
    Api().comm_free(&c);
  }
}

Comm& Comm::World() {
  static Comm* c = [] {
    const Mpi& mpi = Api();
    int initialized = 0;
    mpi.initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      mpi.init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      std::atexit([] {
        int finalized = 0;
        Api().finalized(&finalized);
        if (!finalized) Api().finalize();
      });
    }
    return new Comm(reinterpret_cast<void*>(MPI_COMM_WORLD), false);
  }();
  return *c;
}

std::unique_ptr<Comm> Comm::Split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  {
    // MPI_Comm_split has no nonblocking form: every rank calls it from its
    // main thread before its streams start, so nothing waits on the lock.
    std::lock_guard<std::mutex> l(Lock());
    Api().comm_split(C(handle_), color, key, &out);
  }
  return std::unique_ptr<Comm>(new Comm(reinterpret_cast<void*>(out), true));
}

void Comm::Allgather(const void* src, void* dst, size_t bytes) {
  const int n = Count(bytes, "an allgather");
  Run("an all-gather", size_,
      [&](MPI_Request* r) { Api().iallgather(src, n, MPI_BYTE, dst, n, MPI_BYTE, C(handle_), r); });
}

void Comm::AllToAll(const void* src, void* dst, size_t bytes) {
  const int n = Count(bytes, "an all-to-all");
  Run("an all-to-all", size_,
      [&](MPI_Request* r) { Api().ialltoall(src, n, MPI_BYTE, dst, n, MPI_BYTE, C(handle_), r); });
}

void Comm::AllreduceSum(float* data, size_t count) {
  const int n = Count(count, "an all-reduce");
  Run("an all-reduce", size_,
      [&](MPI_Request* r) { Api().iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, C(handle_), r); });
}

void Comm::AllreduceMax(float* data, size_t count) {
  const int n = Count(count, "an all-reduce");
  Run("an all-reduce", size_,
      [&](MPI_Request* r) { Api().iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_MAX, C(handle_), r); });
}

double Comm::AllreduceSum(double v) {
  Run("an all-reduce", size_,
      [&](MPI_Request* r) { Api().iallreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, C(handle_), r); });
  return v;
}

bool Comm::AnyTrue(bool v) {
  int x = v ? 1 : 0;
  Run("an all-reduce", size_,
      [&](MPI_Request* r) { Api().iallreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_LOR, C(handle_), r); });
  return x != 0;
}

std::string Comm::Broadcast(const std::string& s) {
  int n = static_cast<int>(s.size());
  Run("a broadcast", size_, [&](MPI_Request* r) { Api().ibcast(&n, 1, MPI_INT, 0, C(handle_), r); });
  std::string out = rank_ == 0 ? s : std::string(static_cast<size_t>(n), '\0');
  Run("a broadcast", size_, [&](MPI_Request* r) { Api().ibcast(out.data(), n, MPI_CHAR, 0, C(handle_), r); });
  return out;
}

std::vector<std::string> Comm::AllgatherVariable(const std::string& bytes) {
  std::vector<uint64_t> sizes(static_cast<size_t>(size_));
  const uint64_t mine = bytes.size();
  Allgather(&mine, sizes.data(), sizeof mine);
  const uint64_t most = *std::max_element(sizes.begin(), sizes.end());
  std::string block(most, '\0'), all(most * static_cast<size_t>(size_), '\0');
  std::copy(bytes.begin(), bytes.end(), block.begin());
  // One block of the largest size per rank (Allgather's contract), cut back.
  Allgather(block.data(), all.data(), most);
  std::vector<std::string> out;
  for (size_t q = 0; q < sizes.size(); ++q) out.push_back(all.substr(q * most, sizes[q]));
  return out;
}

bool Comm::OneHost() {
  char name[256] = {};
  // The host name and the kernel's boot id (containers on two machines may
  // share a name; one boot is one monotonic clock). Unknown: a key no other
  // rank has, so not one host (every rank still joins the gather).
  std::string mine = gethostname(name, sizeof name - 1) == 0 ? std::string(name) : "?rank " + std::to_string(rank_);
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {};
    if (std::fgets(boot, sizeof boot, f) != nullptr) mine += std::string("/") + boot;
    std::fclose(f);
  } else {
    mine += "?no boot id, rank " + std::to_string(rank_);
  }
  for (const std::string& h : AllgatherVariable(mine))
    if (h != mine) return false;
  return true;
}

// Chunks of at most kMaxCount bytes, in order (MPI keeps the order of one
// tag's messages between two ranks).
void Comm::Send(const void* data, size_t bytes, int peer, int tag) {
  const auto* at = static_cast<const std::byte*>(data);
  for (size_t off = 0; off == 0 || off < bytes; off += kMaxCount) {
    const size_t n = std::min(kMaxCount, bytes - off);
    auto p = std::make_unique<Pending>();
    p->data.assign(at + off, at + off + n);
    std::lock_guard<std::mutex> l(Lock());
    // Completed sends are dropped as new ones are posted.
    std::erase_if(sends_, [](std::unique_ptr<Pending>& q) {
      int done = 0;
      Api().test(&q->req, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
    Api().isend(p->data.data(), static_cast<int>(n), MPI_BYTE, peer, tag, C(handle_), &p->req);
    sends_.push_back(std::move(p));
  }
}

void Comm::Recv(void* data, size_t bytes, int peer, int tag) {
  auto* at = static_cast<std::byte*>(data);
  for (size_t off = 0; off == 0 || off < bytes; off += kMaxCount) {
    const int n = static_cast<int>(std::min(kMaxCount, bytes - off));
    Run("a receive", size_, [&](MPI_Request* r) { Api().irecv(at + off, n, MPI_BYTE, peer, tag, C(handle_), r); });
  }
}

void Comm::FlushSends() {
  std::vector<std::unique_ptr<Pending>> pending;
  {
    std::lock_guard<std::mutex> l(Lock());
    pending.swap(sends_);
  }
  for (auto& p : pending) Wait(&p->req, "a send", size_);
}

void Comm::SetTimeout(double seconds) { g_timeout_s.store(seconds); }

Comm::Label::Label(std::string what) : previous_(std::exchange(t_label, std::move(what))) {}
Comm::Label::~Label() { t_label = std::move(previous_); }

void Comm::Abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (World().size() > 1) Api().abort(MPI_COMM_WORLD, code);  // no lock: the holder may be blocked for good
  std::_Exit(code);
}

}  // namespace strata::exec
