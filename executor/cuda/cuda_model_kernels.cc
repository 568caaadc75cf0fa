// The device model's kernels on CUDA (devmodel/model_kernels.h): GEMMs by
// cuBLAS (cublasGemmEx: 16-bit operands with fp32 accumulation and output,
// or fp32 with CUBLAS_COMPUTE_32F_PEDANTIC: no TF32 whatever the
// environment says), the rest by cuda/model_kernels.cu, all on the stream
// of the model's call. One cuBLAS handle per model, on one stream at a
// time: cuBLAS gives the same bits for the same call on the same GPU then
// (its "Results reproducibility": one stream, no cublasLt split-K
// heuristics), so the device model is deterministic.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda/cuda_common.h"
#include "cuda/model_kernels.h"
#include "strata/executor/model_math.h"

namespace strata::exec {
namespace {

class CudaModelKernels : public ModelKernels {
 public:
  CudaModelKernels(int device, Backend* backend, cublasHandle_t h) : device_(device), backend_(backend), h_(h) {}
  ~CudaModelKernels() override {
    cudaSetDevice(device_);
    cublasDestroy(h_);
  }

  Status Bind(DeviceStream& s, bool* overflow) override {
    auto* cs = dynamic_cast<CudaStreamAccess*>(&s);
    if (cs == nullptr) return Status::Internal("the CUDA model was called on another backend's stream");
    STRATA_CUDA(cudaSetDevice(device_));
    s_ = cs->stream();
    flag_ = overflow != nullptr ? cs->overflow_flag() : nullptr;
    if (overflow != nullptr) cs->Watch(overflow);
    STRATA_CUBLAS(cublasSetStream(h_, s_));
    return Status::Ok();
  }
  Result<Memory> Alloc(size_t bytes) override { return backend_->Allocate(Tier::kGpu, bytes, false); }
  // Both wait for the copy on the bound stream (before the first Bind, a
  // pipeline stage's first receive, this thread's stream): the host memory
  // is pageable and may go on return, and a copy from it may return before
  // its DMA is done ("API synchronization behavior"); the paths using them
  // (samples, boundaries, tensor-parallel reductions) wait anyway.
  Status Upload(void* dst, const void* src, size_t bytes) override {
    STRATA_CUDA(cudaSetDevice(device_));
    const cudaStream_t s = s_ != nullptr ? s_ : cudaStreamPerThread;
    STRATA_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    STRATA_CUDA(cudaStreamSynchronize(s));
    return Status::Ok();
  }
  Status Download(void* dst, const void* src, size_t bytes) override {
    STRATA_CUDA(cudaSetDevice(device_));
    const cudaStream_t s = s_ != nullptr ? s_ : cudaStreamPerThread;
    STRATA_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    STRATA_CUDA(cudaStreamSynchronize(s));
    return Status::Ok();
  }

  Status Gemm(bool ta, bool tb, size_t m, size_t n, size_t k, const void* a, size_t lda, const void* b, size_t ldb,
              float* c, size_t ldc, int fmt, bool accumulate) override {
    const cudaDataType_t t = fmt == dm::kFp16 ? CUDA_R_16F : fmt == dm::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute = fmt == dm::kFp32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    // cuBLAS picks its kernel partly by the operands' alignment, and that
    // kernel fixes the summation order: a weight at an offset of a plan
    // buffer that is not 256-byte aligned is copied to aligned scratch
    // first, so that every placement of the parameters gives the same bits.
    const size_t eb = fmt == dm::kFp32 ? 4 : 2;
    auto aligned = [&](const void* p, bool trans, size_t rows, size_t cols, size_t ld,
                       int slot) -> Result<const void*> {
      if (reinterpret_cast<uintptr_t>(p) % 256 == 0) return p;
      const size_t r = trans ? cols : rows, c = trans ? rows : cols;  // stored as r x c, leading dimension ld
      const size_t bytes = (ld * (c - 1) + r) * eb;
      if (bytes > scratch_[slot].size()) {
        STRATA_ASSIGN_OR_RETURN(auto m, backend_->Allocate(Tier::kGpu, bytes, false));
        retired_.push_back(std::move(scratch_[slot]));  // queued work may still read it: kept to the end
        scratch_[slot] = std::move(m);
      }
      STRATA_CUDA(cudaMemcpyAsync(scratch_[slot].data(), p, bytes, cudaMemcpyDeviceToDevice, s_));
      return static_cast<const void*>(scratch_[slot].data());
    };
    STRATA_ASSIGN_OR_RETURN(auto pa, aligned(a, ta, m, k, lda, 0));
    STRATA_ASSIGN_OR_RETURN(auto pb, aligned(b, tb, k, n, ldb, 1));
    a = pa;
    b = pb;
    STRATA_CUBLAS(cublasGemmEx(h_, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, Int(m), Int(n),
                               Int(k), &alpha, a, t, Int(lda), b, t, Int(ldb), &beta, c, CUDA_R_32F, Int(ldc), compute,
                               CUBLAS_GEMM_DEFAULT));
    return Status::Ok();
  }
  Status BiasAct(float* y, void* low, const void* bias, int fmt, size_t rows, size_t cols, bool relu) override {
    STRATA_CUDA(cuda::BiasAct(y, low, bias, fmt, rows, cols, relu, s_));
    return Status::Ok();
  }
  Status ReluBackward(const float* y, float* dy, void* low, int fmt, size_t n) override {
    STRATA_CUDA(cuda::ReluBackward(y, dy, low, fmt, n, s_));
    return Status::Ok();
  }
  Status SoftmaxXent(const float* logits, const int32_t* labels, float* dlogits, void* low, int fmt, size_t batch,
                     size_t classes, float scale, float* losses) override {
    STRATA_CUDA(cuda::SoftmaxXent(logits, labels, dlogits, low, fmt, batch, classes, scale, losses, s_));
    return Status::Ok();
  }
  Status AddGrad(void* grad, const float* src, size_t n, int fmt, bool fresh) override {
    STRATA_CUDA(cuda::AddGrad(grad, src, n, fmt, fresh, flag_, s_));
    return Status::Ok();
  }
  Status ColumnSumsToGrad(void* grad, const float* m, size_t rows, size_t cols, int fmt, bool fresh) override {
    STRATA_CUDA(cuda::ColumnSumsToGrad(grad, m, rows, cols, fmt, fresh, flag_, s_));
    return Status::Ok();
  }
  Status Round(void* dst, const float* src, size_t n, int fmt) override {
    STRATA_CUDA(cuda::Round(dst, src, n, fmt, s_));
    return Status::Ok();
  }
  Status Zero(void* dst, size_t bytes) override {
    STRATA_CUDA(cudaMemsetAsync(dst, 0, bytes, s_));
    return Status::Ok();
  }

  Status Embedding(const int32_t* tokens, const void* wte, const void* wpe, int fmt, size_t first, size_t vl, float* x,
                   size_t T, size_t seq, size_t h) override {
    STRATA_CUDA(cuda::Embedding(tokens, wte, wpe, fmt, first, vl, x, T, seq, h, s_));
    return Status::Ok();
  }
  Status AddPositions(float* x, const void* wpe, int fmt, size_t T, size_t seq, size_t h) override {
    STRATA_CUDA(cuda::AddPositions(x, wpe, fmt, T, seq, h, s_));
    return Status::Ok();
  }
  Status EmbeddingBackward(const int32_t* tokens, const float* dx, float* dwte, float* dwpe, size_t first, size_t vl,
                           size_t T, size_t seq, size_t h) override {
    STRATA_CUDA(cuda::EmbeddingBackward(tokens, dx, dwte, dwpe, first, vl, T, seq, h, s_));
    return Status::Ok();
  }
  Status LayerNorm(const float* x, const void* gamma, const void* beta, int fmt, float* y, void* low, float* mean,
                   float* rstd, size_t rows, size_t h) override {
    STRATA_CUDA(cuda::LayerNorm(x, gamma, beta, fmt, y, low, mean, rstd, rows, h, s_));
    return Status::Ok();
  }
  Status LayerNormBackward(const float* x, const void* gamma, int fmt, const float* mean, const float* rstd,
                           const float* dy, float* dx, size_t rows, size_t h, void* dgamma, void* dbeta,
                           bool fresh_gamma, bool fresh_beta) override {
    STRATA_CUDA(cuda::LayerNormBackward(x, gamma, fmt, mean, rstd, dy, dx, rows, h, dgamma, dbeta, fresh_gamma,
                                        fresh_beta, flag_, s_));
    return Status::Ok();
  }
  Status Gelu(const float* x, float* y, void* low, int fmt, size_t n) override {
    STRATA_CUDA(cuda::Gelu(x, y, low, fmt, n, s_));
    return Status::Ok();
  }
  Status GeluBackward(const float* x, const float* dy, float* dx, size_t n) override {
    STRATA_CUDA(cuda::GeluBackward(x, dy, dx, n, s_));
    return Status::Ok();
  }
  Status Residual(const float* base, const float* y, const void* bias, int fmt, size_t rows, size_t h,
                  float* out) override {
    STRATA_CUDA(cuda::Residual(base, y, bias, fmt, rows, h, out, s_));
    return Status::Ok();
  }
  Status Attention(const float* qkv, float* out, void* low, int fmt, float* probs, size_t B, size_t s, size_t h,
                   size_t heads) override {
    STRATA_CUDA(cuda::Attention(qkv, out, low, fmt, probs, B, s, h, heads, s_));
    return Status::Ok();
  }
  Status AttentionBackward(const float* qkv, const float* probs, const float* dout, float* ds, float* dqkv, size_t B,
                           size_t s, size_t h, size_t heads) override {
    STRATA_CUDA(cuda::AttentionBackward(qkv, probs, dout, ds, dqkv, B, s, h, heads, s_));
    return Status::Ok();
  }
  Status VocabMax(const float* logits, size_t vl, size_t T, float* row_max) override {
    STRATA_CUDA(cuda::VocabMax(logits, vl, T, row_max, s_));
    return Status::Ok();
  }
  Status VocabStats(const float* logits, const int32_t* targets, const float* row_max, size_t first, size_t vl,
                    size_t T, float* stats) override {
    STRATA_CUDA(cuda::VocabStats(logits, targets, row_max, first, vl, T, stats, s_));
    return Status::Ok();
  }
  Status VocabGrad(const float* logits, const int32_t* targets, const float* row_max, const float* stats, size_t first,
                   size_t vl, size_t T, float scale, float* dlogits, void* low, int fmt, float* losses) override {
    STRATA_CUDA(cuda::VocabGrad(logits, targets, row_max, stats, first, vl, T, scale, dlogits, low, fmt, losses, s_));
    return Status::Ok();
  }

 private:
  // cuBLAS's dimensions are int: the MLP's are far below 2^31 (the plan's
  // scenario check bounds the layer widths).
  static int Int(size_t v) { return static_cast<int>(v); }

  int device_;
  Backend* backend_;
  cublasHandle_t h_;
  cudaStream_t s_ = nullptr;  // the bound stream (null before the first Bind)
  Memory scratch_[2];         // aligned copies of the GEMM's operands (Gemm)
  std::vector<Memory> retired_;
  int* flag_ = nullptr;  // the bound stream's overflow flag, when the caller watches one
};

}  // namespace

Result<std::unique_ptr<ModelKernels>> NewCudaModelKernels(int device, Backend* backend) {
  STRATA_CUDA(cudaSetDevice(device));
  cublasHandle_t h = nullptr;
  STRATA_CUBLAS(cublasCreate(&h));
  // Pointer mode host (alpha, beta on the stack), the default math mode (no
  // TF32 for fp32 operands): set explicitly, the environment cannot change it.
  cublasStatus_t r = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  if (r == CUBLAS_STATUS_SUCCESS) r = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
  if (r != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(h);
    return CublasError(r, "cublasSetMathMode/cublasSetPointerMode", __FILE__, __LINE__);
  }
  return std::unique_ptr<ModelKernels>(std::make_unique<CudaModelKernels>(device, backend, h));
}

}  // namespace strata::exec
