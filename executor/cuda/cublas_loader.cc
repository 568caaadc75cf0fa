// The cuBLAS entry points the CUDA backend calls, loaded when it first calls
// one. libcublas (with libcublasLt, 0.5 GB) cost every `strata` command and
// every test process 0.5 s of CPU and 25,000 page faults at start-up when
// linked; most never touch a GPU. These definitions take the linker's
// place: the first call opens the library (its path at configure time,
// then its soname) and each function forwards to the library's own. Where
// it cannot be opened, cublasCreate fails with CUBLAS_STATUS_NOT_INITIALIZED
// and the status names say why.
#include <cublas_v2.h>

#include <string>

#include "cuda/lazy_library.h"

namespace {

using strata::exec::cuda_detail::LazyLibrary;

const LazyLibrary& Cublas() {
  static const LazyLibrary lib = strata::exec::cuda_detail::OpenLibrary(STRATA_LIBCUBLAS, STRATA_LIBCUBLAS_SONAME);
  return lib;
}

template <typename F>
F* Symbol(const char* name) {
  return strata::exec::cuda_detail::SymbolOf<F>(Cublas(), name);
}

}  // namespace

// Each forwards to the library's function of the same name and parameters
// (spelled out: cublas_api.h overloads cublasGemmEx for C++ callers).
#define STRATA_CUBLAS_FORWARD(name, params, args)                 \
  extern "C" cublasStatus_t name params {                         \
    static auto* const f = Symbol<cublasStatus_t params>(#name);  \
    return f != nullptr ? f args : CUBLAS_STATUS_NOT_INITIALIZED; \
  }

STRATA_CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t * h), (h))
STRATA_CUBLAS_FORWARD(cublasDestroy_v2, (cublasHandle_t h), (h))
STRATA_CUBLAS_FORWARD(cublasSetStream_v2, (cublasHandle_t h, cudaStream_t s), (h, s))
STRATA_CUBLAS_FORWARD(cublasSetPointerMode_v2, (cublasHandle_t h, cublasPointerMode_t m), (h, m))
STRATA_CUBLAS_FORWARD(cublasSetMathMode, (cublasHandle_t h, cublasMath_t m), (h, m))
STRATA_CUBLAS_FORWARD(cublasGemmEx,
                      (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const void* alpha, const void* a, cudaDataType at, int lda, const void* b, cudaDataType bt,
                       int ldb, const void* beta, void* c, cudaDataType ct, int ldc, cublasComputeType_t compute,
                       cublasGemmAlgo_t algo),
                      (h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc, compute, algo))

extern "C" const char* cublasGetStatusName(cublasStatus_t status) {
  static auto* const f = Symbol<const char*(cublasStatus_t)>("cublasGetStatusName");
  return f != nullptr ? f(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

extern "C" const char* cublasGetStatusString(cublasStatus_t status) {
  static auto* const f = Symbol<const char*(cublasStatus_t)>("cublasGetStatusString");
  if (f != nullptr) return f(status);
  const LazyLibrary& l = Cublas();
  return l.error.empty() ? "cuBLAS has no cublasGetStatusString" : l.error.c_str();
}
