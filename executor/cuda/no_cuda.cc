// A build without the CUDA backend (no toolkit or NCCL at configure time, or
// -DSTRATA_CUDA=OFF): asking for it is a clear runtime error.
#include "strata/executor/backend.h"

namespace strata::exec {

Result<std::unique_ptr<Backend>> NewCudaBackend(const CudaBackendOptions&) {
  return Status::Internal(
      "no CUDA device: this build has no CUDA backend (configured without the CUDA toolkit and NCCL, or with "
      "-DSTRATA_CUDA=OFF); run with --backend host");
}

}  // namespace strata::exec
