// What the device model (devmodel/, issue #17) asks of a GPU: memory for
// its activations, copies to and from the host, a GEMM, and the per-thread
// math of model_math.h run over a grid. Two implementations: the CUDA
// backend's (cuda/cuda_model_kernels.cc: cuBLAS and the kernels of
// cuda/model_kernels.cu, on the stream the model was called with) and the
// host's emulation (emulated_kernels.cc: the same per-thread functions in
// loops, and model_math.h's reference GEMM), which lets CI run the device
// model's whole logic without a GPU.
//
// Every call is ordered on the bound stream (Bind); pointers are device
// memory of the backend (Alloc, or the plan's parameter and gradient
// buffers) unless named host. Formats are model_math.h's (Precision's values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "strata/core/status.h"
#include "strata/executor/backend.h"

namespace strata::exec {

class ModelKernels {
 public:
  virtual ~ModelKernels() = default;

  // The stream the following calls are ordered on (the model's Forward or
  // Backward was called with it), and the caller's overflow flag: it is set
  // (visible after an event recorded on the stream) when a gradient written
  // by AddGrad or ColumnSumsToGrad is not finite.
  virtual Status Bind(DeviceStream& s, bool* overflow) = 0;

  // Device memory of `bytes` for activations (contents unspecified), kept
  // by the model and reused in stream order.
  virtual Result<Memory> Alloc(size_t bytes) = 0;
  // dst (device) = host src; the host memory may be reused on return.
  virtual Status Upload(void* dst, const void* host_src, size_t bytes) = 0;
  // host dst = src (device), after the stream's earlier work: done on return.
  virtual Status Download(void* host_dst, const void* src, size_t bytes) = 0;

  // C [m x n] (fp32, column-major) = op(A) op(B) (+ C when accumulate),
  // operands in fmt (BLAS's conventions, model_math.h's GemmElement), fp32
  // accumulation.
  virtual Status Gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, const void* a, size_t lda,
                      const void* b, size_t ldb, float* c, size_t ldc, int fmt, bool accumulate) = 0;

  // model_math.h's functions over every element or row:
  virtual Status BiasAct(float* y, void* low, const void* bias, int fmt, size_t rows, size_t cols, bool relu) = 0;
  virtual Status ReluBackward(const float* y, float* dy, void* low, int fmt, size_t n) = 0;
  // losses[r] = SoftmaxXentRow(..., r) for every row.
  virtual Status SoftmaxXent(const float* logits, const int32_t* labels, float* dlogits, void* low, int fmt,
                             size_t batch, size_t classes, float scale, float* losses) = 0;
  // grad[i] = AddToGrad(grad, i, src[i], fmt, fresh) for i < n.
  virtual Status AddGrad(void* grad, const float* src, size_t n, int fmt, bool fresh) = 0;
  // grad[c] = AddToGrad(grad, c, ColumnSum(m, rows, cols, c), fmt, fresh).
  virtual Status ColumnSumsToGrad(void* grad, const float* m, size_t rows, size_t cols, int fmt, bool fresh) = 0;
  // dst[i] = round(src[i]) in fmt (fp32 src).
  virtual Status Round(void* dst, const float* src, size_t n, int fmt) = 0;
  virtual Status Zero(void* dst, size_t bytes) = 0;

  // The GPT's (transformer_math.h's functions over every element, row,
  // channel, query or key; T tokens of hidden size h):
  virtual Status Embedding(const int32_t* tokens, const void* wte, const void* wpe, int fmt, size_t first, size_t vl,
                           float* x, size_t T, size_t seq, size_t h) = 0;
  virtual Status AddPositions(float* x, const void* wpe, int fmt, size_t T, size_t seq, size_t h) = 0;
  // dwte [vl x h] and dwpe [seq x h] (may be null): fp32, zeroed by the caller.
  virtual Status EmbeddingBackward(const int32_t* tokens, const float* dx, float* dwte, float* dwpe, size_t first,
                                   size_t vl, size_t T, size_t seq, size_t h) = 0;
  virtual Status LayerNorm(const float* x, const void* gamma, const void* beta, int fmt, float* y, void* low,
                           float* mean, float* rstd, size_t rows, size_t h) = 0;
  // dx += the input gradient; then gamma's and beta's gradients added into
  // the plan's buffers (AddToGrad, overflow flagged).
  virtual Status LayerNormBackward(const float* x, const void* gamma, int fmt, const float* mean, const float* rstd,
                                   const float* dy, float* dx, size_t rows, size_t h, void* dgamma, void* dbeta,
                                   bool fresh_gamma, bool fresh_beta) = 0;
  virtual Status Gelu(const float* x, float* y, void* low, int fmt, size_t n) = 0;
  virtual Status GeluBackward(const float* x, const float* dy, float* dx, size_t n) = 0;
  virtual Status Residual(const float* base, const float* y, const void* bias, int fmt, size_t rows, size_t h,
                          float* out) = 0;
  // probs [B x heads x s x s]; ds: scratch of the same size.
  virtual Status Attention(const float* qkv, float* out, void* low, int fmt, float* probs, size_t B, size_t s, size_t h,
                           size_t heads) = 0;
  virtual Status AttentionBackward(const float* qkv, const float* probs, const float* dout, float* ds, float* dqkv,
                                   size_t B, size_t s, size_t h, size_t heads) = 0;
  // The vocabulary-parallel loss's three passes (row_max [T], stats [2T],
  // losses [T]).
  virtual Status VocabMax(const float* logits, size_t vl, size_t T, float* row_max) = 0;
  virtual Status VocabStats(const float* logits, const int32_t* targets, const float* row_max, size_t first, size_t vl,
                            size_t T, float* stats) = 0;
  virtual Status VocabGrad(const float* logits, const int32_t* targets, const float* row_max, const float* stats,
                           size_t first, size_t vl, size_t T, float scale, float* dlogits, void* low, int fmt,
                           float* losses) = 0;
};

// The host's emulation: device memory is the host backend's (addressable),
// every call runs on the calling thread before it returns.
std::unique_ptr<ModelKernels> NewEmulatedKernels(Backend* backend);

}  // namespace strata::exec
