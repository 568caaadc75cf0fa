#include "strata/executor/comm.h"

#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
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
  decltype(&MPI_Allgather) allgather;
  decltype(&MPI_Alltoall) alltoall;
  decltype(&MPI_Allreduce) allreduce;
  decltype(&MPI_Bcast) bcast;
  decltype(&MPI_Abort) abort;
};

template <typename F>
void Resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) {
    std::fprintf(stderr, "strata: %s not found in %s: %s\n", name, STRATA_LIBMPI, dlerror());
    std::abort();
  }
}

const Mpi& Api() {
  static const Mpi api = [] {
    void* lib = dlopen(STRATA_LIBMPI, RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "strata: cannot load %s: %s\n", STRATA_LIBMPI, dlerror());
      std::abort();
    }
    Mpi m{};
    Resolve(lib, "MPI_Initialized", &m.initialized);
    Resolve(lib, "MPI_Init_thread", &m.init_thread);
    Resolve(lib, "MPI_Finalized", &m.finalized);
    Resolve(lib, "MPI_Finalize", &m.finalize);
    Resolve(lib, "MPI_Comm_rank", &m.comm_rank);
    Resolve(lib, "MPI_Comm_size", &m.comm_size);
    Resolve(lib, "MPI_Allgather", &m.allgather);
    Resolve(lib, "MPI_Alltoall", &m.alltoall);
    Resolve(lib, "MPI_Allreduce", &m.allreduce);
    Resolve(lib, "MPI_Bcast", &m.bcast);
    Resolve(lib, "MPI_Abort", &m.abort);
    return m;
  }();
  return api;
}

}  // namespace

Comm::Comm() {
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
  mpi.comm_rank(MPI_COMM_WORLD, &rank_);
  mpi.comm_size(MPI_COMM_WORLD, &size_);
}

Comm& Comm::World() {
  static Comm* c = new Comm();
  return *c;
}

void Comm::Allgather(const void* src, void* dst, size_t bytes) {
  std::lock_guard<std::mutex> l(Lock());
  Api().allgather(src, static_cast<int>(bytes), MPI_BYTE, dst, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
}

void Comm::AllToAll(const void* src, void* dst, size_t bytes) {
  std::lock_guard<std::mutex> l(Lock());
  Api().alltoall(src, static_cast<int>(bytes), MPI_BYTE, dst, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
}

void Comm::AllreduceSum(float* data, size_t count) {
  std::lock_guard<std::mutex> l(Lock());
  Api().allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

double Comm::AllreduceSum(double v) {
  std::lock_guard<std::mutex> l(Lock());
  Api().allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

bool Comm::AnyTrue(bool v) {
  int x = v ? 1 : 0;
  std::lock_guard<std::mutex> l(Lock());
  Api().allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return x != 0;
}

void Comm::Abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (size_ > 1) Api().abort(MPI_COMM_WORLD, code);  // no lock: the holder may be blocked for good
  std::_Exit(code);
}

std::string Comm::Broadcast(const std::string& s) {
  std::lock_guard<std::mutex> l(Lock());
  int n = static_cast<int>(s.size());
  Api().bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string out = rank_ == 0 ? s : std::string(static_cast<size_t>(n), '\0');
  Api().bcast(out.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
}

}  // namespace strata::exec
