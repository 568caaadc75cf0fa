// What the CUDA backend's files share (private): statuses from CUDA, cuBLAS
// and NCCL results naming the call, the file and line, and the error string
// (after nccl-tests' CUDACHECK/NCCLCHECK); the device and communicator the
// streams share; a stream's CUDA handles, for the device model's kernels.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "devmodel/model_kernels.h"
#include "strata/core/status.h"

namespace strata::exec {

inline Status CudaError(cudaError_t e, const char* call, const char* file, int line) {
  return Status::Internal(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                          cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
inline Status NcclError(ncclResult_t r, const char* call, const char* file, int line) {
  return Status::Internal(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": NCCL " +
                          ncclGetErrorString(r));
}
inline Status CublasError(cublasStatus_t r, const char* call, const char* file, int line) {
  return Status::Internal(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                          cublasGetStatusName(r) + ": " + cublasGetStatusString(r));
}
#define STRATA_CUDA(call)                                                               \
  do {                                                                                  \
    const cudaError_t strata_e = (call);                                                \
    if (strata_e != cudaSuccess) return CudaError(strata_e, #call, __FILE__, __LINE__); \
  } while (0)
#define STRATA_NCCL(call)                                                               \
  do {                                                                                  \
    const ncclResult_t strata_r = (call);                                               \
    if (strata_r != ncclSuccess) return NcclError(strata_r, #call, __FILE__, __LINE__); \
  } while (0)
#define STRATA_CUBLAS(call)                                                                         \
  do {                                                                                              \
    const cublasStatus_t strata_b = (call);                                                         \
    if (strata_b != CUBLAS_STATUS_SUCCESS) return CublasError(strata_b, #call, __FILE__, __LINE__); \
  } while (0)

// What the backend's streams share: the device, the NCCL communicator (null
// with one rank) and its size.
struct Shared {
  int device = 0;
  ncclComm_t nccl = nullptr;
  int ranks = 1;
  int adam_threads = 1;  // the host threads of a CPU optimizer's step (CudaBackendOptions)
  std::mutex nccl_mu;    // NCCL calls on one communicator are issued in one order
  // Set once the communicator was aborted after an asynchronous NCCL error
  // (abort_reason first, under nccl_mu): no NCCL call follows, every
  // collective and every wait fails with the reason.
  std::atomic<bool> aborted{false};
  Status abort_reason;
};

// A backend stream's CUDA side: its cudaStream_t, its device overflow flag
// (set to 1 by a kernel writing a non-finite gradient), and Watch(b): `*b`
// is set at the next Record()'s event if the flag was set by then.
class CudaStreamAccess {
 public:
  virtual cudaStream_t stream() const = 0;
  virtual int* overflow_flag() const = 0;
  virtual void Watch(bool* overflow) = 0;

 protected:
  ~CudaStreamAccess() = default;
};

// The device model's kernels on `device` (cuda_model_kernels.cc): cuBLAS
// and model_kernels.cu on the stream bound, device memory from `backend`.
Result<std::unique_ptr<ModelKernels>> NewCudaModelKernels(int device, Backend* backend);

}  // namespace strata::exec
