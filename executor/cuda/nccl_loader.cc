// The NCCL entry points the CUDA backend calls, loaded when it first calls
// one, as cublas_loader.cc loads cuBLAS: linked, libnccl was opened by
// every `strata` command and test process at start-up, most of which never
// touch a GPU. The first call opens the library (its path at configure
// time, then its soname) and each function forwards to the library's own.
// Where it cannot be opened, each call returns ncclSystemError and
// ncclGetErrorString says why.
#include <dlfcn.h>
#include <nccl.h>

#include <string>

namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

const Library& Nccl() {
  static const Library lib = [] {
    Library l;
    l.handle = ::dlopen(STRATA_LIBNCCL, RTLD_NOW | RTLD_LOCAL);
    if (l.handle == nullptr) l.handle = ::dlopen(STRATA_LIBNCCL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (l.handle == nullptr) {
      const char* e = ::dlerror();
      l.error = std::string("cannot load ") + STRATA_LIBNCCL_SONAME + ": " + (e != nullptr ? e : "unknown error");
    }
    return l;
  }();
  return lib;
}

template <typename F>
F* Symbol(const char* name) {
  const Library& l = Nccl();
  return l.handle != nullptr ? reinterpret_cast<F*>(::dlsym(l.handle, name)) : nullptr;
}

}  // namespace

#define STRATA_NCCL_FORWARD(name, params, args)          \
  extern "C" ncclResult_t name params {                  \
    static auto* const f = Symbol<ncclResult_t params>(#name); \
    return f != nullptr ? f args : ncclSystemError;      \
  }

STRATA_NCCL_FORWARD(ncclGetUniqueId, (ncclUniqueId * id), (id))
STRATA_NCCL_FORWARD(ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank),
                    (comm, nranks, id, rank))
STRATA_NCCL_FORWARD(ncclCommDestroy, (ncclComm_t comm), (comm))
STRATA_NCCL_FORWARD(ncclCommAbort, (ncclComm_t comm), (comm))
STRATA_NCCL_FORWARD(ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* async), (comm, async))
STRATA_NCCL_FORWARD(ncclAllGather,
                    (const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                     cudaStream_t stream),
                    (send, recv, count, type, comm, stream))
STRATA_NCCL_FORWARD(ncclAllReduce,
                    (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                     ncclComm_t comm, cudaStream_t stream),
                    (send, recv, count, type, op, comm, stream))
STRATA_NCCL_FORWARD(ncclSend,
                    (const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                     cudaStream_t stream),
                    (send, count, type, peer, comm, stream))
STRATA_NCCL_FORWARD(ncclRecv,
                    (void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream),
                    (recv, count, type, peer, comm, stream))
STRATA_NCCL_FORWARD(ncclGroupStart, (), ())
STRATA_NCCL_FORWARD(ncclGroupEnd, (), ())

extern "C" const char* ncclGetErrorString(ncclResult_t result) {
  static auto* const f = Symbol<const char*(ncclResult_t)>("ncclGetErrorString");
  if (f != nullptr) return f(result);
  const Library& l = Nccl();
  return l.error.empty() ? "NCCL has no ncclGetErrorString" : l.error.c_str();
}
