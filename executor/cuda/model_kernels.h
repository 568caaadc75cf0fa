// The device model's kernels on CUDA (private; devmodel/model_kernels.h
// names what each computes): each thread runs model_math.h's function for
// one output element or row, so the host tests of that header and the
// emulated backend check the same code. C++17 (nvcc under CMake 3.25).
// `overflow` (device memory, may be null) is set to 1 when a gradient
// written is not finite.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace strata::exec::cuda {

cudaError_t BiasAct(float* y, void* low, const void* bias, int fmt, size_t rows, size_t cols, bool relu,
                    cudaStream_t s);
cudaError_t ReluBackward(const float* y, float* dy, void* low, int fmt, size_t n, cudaStream_t s);
cudaError_t SoftmaxXent(const float* logits, const int32_t* labels, float* dlogits, void* low, int fmt, size_t batch,
                        size_t classes, float scale, float* losses, cudaStream_t s);
cudaError_t AddGrad(void* grad, const float* src, size_t n, int fmt, bool fresh, int* overflow, cudaStream_t s);
cudaError_t ColumnSumsToGrad(void* grad, const float* m, size_t rows, size_t cols, int fmt, bool fresh, int* overflow,
                             cudaStream_t s);
cudaError_t Round(void* dst, const float* src, size_t n, int fmt, cudaStream_t s);

// The GPT's (transformer_math.h).
cudaError_t Embedding(const int32_t* tokens, const void* wte, const void* wpe, int fmt, size_t first, size_t vl,
                      float* x, size_t T, size_t seq, size_t h, cudaStream_t s);
cudaError_t AddPositions(float* x, const void* wpe, int fmt, size_t T, size_t seq, size_t h, cudaStream_t s);
cudaError_t EmbeddingBackward(const int32_t* tokens, const float* dx, float* dwte, float* dwpe, size_t first, size_t vl,
                              size_t T, size_t seq, size_t h, cudaStream_t s);
cudaError_t LayerNorm(const float* x, const void* gamma, const void* beta, int fmt, float* y, void* low, float* mean,
                      float* rstd, size_t rows, size_t h, cudaStream_t s);
cudaError_t LayerNormBackward(const float* x, const void* gamma, int fmt, const float* mean, const float* rstd,
                              const float* dy, float* dx, size_t rows, size_t h, void* dgamma, void* dbeta,
                              bool fresh_gamma, bool fresh_beta, int* overflow, cudaStream_t s);
cudaError_t Gelu(const float* x, float* y, void* low, int fmt, size_t n, cudaStream_t s);
cudaError_t GeluBackward(const float* x, const float* dy, float* dx, size_t n, cudaStream_t s);
cudaError_t Residual(const float* base, const float* y, const void* bias, int fmt, size_t rows, size_t h, float* out,
                     cudaStream_t s);
cudaError_t Attention(const float* qkv, float* out, void* low, int fmt, float* probs, size_t B, size_t seq, size_t h,
                      size_t heads, cudaStream_t s);
cudaError_t AttentionBackward(const float* qkv, const float* probs, const float* dout, float* ds, float* dqkv, size_t B,
                              size_t seq, size_t h, size_t heads, cudaStream_t s);
cudaError_t VocabMax(const float* logits, size_t vl, size_t T, float* row_max, cudaStream_t s);
cudaError_t VocabStats(const float* logits, const int32_t* targets, const float* row_max, size_t first, size_t vl,
                       size_t T, float* stats, cudaStream_t s);
cudaError_t VocabGrad(const float* logits, const int32_t* targets, const float* row_max, const float* stats,
                      size_t first, size_t vl, size_t T, float scale, float* dlogits, void* low, int fmt, float* losses,
                      cudaStream_t s);

}  // namespace strata::exec::cuda
