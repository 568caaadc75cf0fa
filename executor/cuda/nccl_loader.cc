// The NCCL entry points the CUDA backend calls, loaded when it first calls
// one, as cublas_loader.cc loads cuBLAS: linked, libnccl was opened by
// every `strata` command and test process at start-up, most of which never
// touch a GPU. The first call opens the library (its path at configure
// time, then its soname) and each function forwards to the library's own.
// Where it cannot be opened, each call returns ncclSystemError and
// ncclGetErrorString says why.
#include <nccl.h>

#include <string>

#include "cuda/lazy_library.h"

namespace {

using strata::exec::cuda_detail::LazyLibrary;

const LazyLibrary& Nccl() {
  static const LazyLibrary lib = strata::exec::cuda_detail::OpenLibrary(STRATA_LIBNCCL, STRATA_LIBNCCL_SONAME);
  return lib;
}

template <typename F>
F* Symbol(const char* name) {
  return strata::exec::cuda_detail::SymbolOf<F>(Nccl(), name);
}

}  // namespace

#define STRATA_NCCL_FORWARD(name, params, args)                \
  extern "C" ncclResult_t name params {                        \
    static auto* const f = Symbol<ncclResult_t params>(#name); \
    return f != nullptr ? f args : ncclSystemError;            \
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
                    (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                     cudaStream_t stream),
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
  const LazyLibrary& l = Nccl();
  return l.error.empty() ? "NCCL has no ncclGetErrorString" : l.error.c_str();
}
