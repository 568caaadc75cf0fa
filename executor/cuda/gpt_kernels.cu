// The device model's GPT kernels (model_kernels.h): grid-stride loops over
// transformer_math.h's per-thread functions (one thread per element, row,
// channel, query or key), one writer per output, no atomics. The
// attention's backward is two launches in stream order: every query's pass
// (the scores' gradient, dq) before every key's (dk, dv). A launcher clears
// the last error first, so the error it returns is its launch's own.
#include "grid.cuh"
#include "model_kernels.h"
#include "strata/executor/transformer_math.h"

namespace strata::exec::cuda {
namespace {

__global__ void EmbeddingKernel(const int32_t* tokens, const void* wte, const void* wpe, int fmt, size_t first,
                                size_t vl, float* x, size_t n, size_t seq, size_t h) {
  STRATA_GRID_LOOP(i, n) dm::EmbeddingElement(tokens, wte, wpe, fmt, first, vl, x, seq, h, i);
}
__global__ void AddPositionsKernel(float* x, const void* wpe, int fmt, size_t n, size_t seq, size_t h) {
  STRATA_GRID_LOOP(i, n) dm::AddPositionElement(x, wpe, fmt, seq, h, i);
}
__global__ void EmbeddingBackwardKernel(const int32_t* tokens, const float* dx, float* dwte, float* dwpe, size_t first,
                                        size_t vl, size_t T, size_t seq, size_t h) {
  STRATA_GRID_LOOP(i, h) dm::EmbeddingBackwardChannel(tokens, dx, dwte, dwpe, first, vl, T, seq, h, i);
}
__global__ void LayerNormKernel(const float* x, const void* gamma, const void* beta, int fmt, float* y, void* low,
                                float* mean, float* rstd, size_t rows, size_t h) {
  STRATA_GRID_LOOP(r, rows) dm::LayerNormRow(x, gamma, beta, fmt, y, low, mean, rstd, h, 1e-5f, r);
}
__global__ void LayerNormBackwardKernel(const float* x, const void* gamma, int fmt, const float* mean,
                                        const float* rstd, const float* dy, float* dx, size_t rows, size_t h) {
  STRATA_GRID_LOOP(r, rows) dm::LayerNormBackwardRow(x, gamma, fmt, mean, rstd, dy, dx, h, r);
}
__global__ void LayerNormParamsKernel(const float* x, const float* mean, const float* rstd, const float* dy,
                                      size_t rows, size_t h, void* dgamma, void* dbeta, int fmt, bool fresh_gamma,
                                      bool fresh_beta, int* overflow) {
  STRATA_GRID_LOOP(i, h) {
    float dg, db;
    dm::LayerNormParamColumn(x, mean, rstd, dy, rows, h, i, &dg, &db);
    Flag(overflow, dm::AddToGrad(dgamma, i, dg, fmt, fresh_gamma));
    Flag(overflow, dm::AddToGrad(dbeta, i, db, fmt, fresh_beta));
  }
}
__global__ void GeluKernel(const float* x, float* y, void* low, int fmt, size_t n) {
  STRATA_GRID_LOOP(i, n) dm::GeluElement(x, y, low, fmt, i);
}
__global__ void GeluBackwardKernel(const float* x, const float* dy, float* dx, size_t n) {
  STRATA_GRID_LOOP(i, n) dm::GeluBackwardElement(x, dy, dx, i);
}
__global__ void ResidualKernel(const float* base, const float* y, const void* bias, int fmt, size_t n, size_t h,
                               float* out) {
  STRATA_GRID_LOOP(i, n) dm::ResidualElement(base, y, bias, fmt, h, out, i);
}
__global__ void AttentionKernel(const float* qkv, float* out, void* low, int fmt, float* probs, size_t n, size_t s,
                                size_t h, size_t heads) {
  STRATA_GRID_LOOP(q, n) dm::AttentionQuery(qkv, out, low, fmt, probs, s, h, heads, q);
}
__global__ void AttentionQueryBackwardKernel(const float* qkv, const float* probs, const float* dout, float* ds,
                                             float* dqkv, size_t n, size_t s, size_t h, size_t heads) {
  STRATA_GRID_LOOP(q, n) dm::AttentionBackwardQuery(qkv, probs, dout, ds, dqkv, s, h, heads, q);
}
__global__ void AttentionKeyBackwardKernel(const float* qkv, const float* probs, const float* dout, const float* ds,
                                           float* dqkv, size_t n, size_t s, size_t h, size_t heads) {
  STRATA_GRID_LOOP(k, n) dm::AttentionBackwardKey(qkv, probs, dout, ds, dqkv, s, h, heads, k);
}
__global__ void VocabMaxKernel(const float* logits, size_t vl, size_t T, float* row_max) {
  STRATA_GRID_LOOP(t, T) row_max[t] = dm::VocabRowMax(logits, vl, t);
}
__global__ void VocabStatsKernel(const float* logits, const int32_t* targets, const float* row_max, size_t first,
                                 size_t vl, size_t T, float* stats) {
  STRATA_GRID_LOOP(t, T) dm::VocabRowStats(logits, targets, row_max, first, vl, T, stats, t);
}
__global__ void VocabGradKernel(const float* logits, const int32_t* targets, const float* row_max, const float* stats,
                                size_t first, size_t vl, size_t T, float scale, float* dlogits, void* low, int fmt,
                                float* losses) {
  STRATA_GRID_LOOP(t, T)
  losses[t] = dm::VocabRowGrad(logits, targets, row_max, stats, first, vl, T, scale, dlogits, low, fmt, t);
}

}  // namespace

#define STRATA_LAUNCH(kernel, n, ...)                 \
  (void)cudaGetLastError();                           \
  kernel<<<Blocks(n), kThreads, 0, s>>>(__VA_ARGS__); \
  return cudaGetLastError()

cudaError_t Embedding(const int32_t* tokens, const void* wte, const void* wpe, int fmt, size_t first, size_t vl,
                      float* x, size_t T, size_t seq, size_t h, cudaStream_t s) {
  STRATA_LAUNCH(EmbeddingKernel, T * h, tokens, wte, wpe, fmt, first, vl, x, T * h, seq, h);
}
cudaError_t AddPositions(float* x, const void* wpe, int fmt, size_t T, size_t seq, size_t h, cudaStream_t s) {
  STRATA_LAUNCH(AddPositionsKernel, T * h, x, wpe, fmt, T * h, seq, h);
}
cudaError_t EmbeddingBackward(const int32_t* tokens, const float* dx, float* dwte, float* dwpe, size_t first, size_t vl,
                              size_t T, size_t seq, size_t h, cudaStream_t s) {
  STRATA_LAUNCH(EmbeddingBackwardKernel, h, tokens, dx, dwte, dwpe, first, vl, T, seq, h);
}
cudaError_t LayerNorm(const float* x, const void* gamma, const void* beta, int fmt, float* y, void* low, float* mean,
                      float* rstd, size_t rows, size_t h, cudaStream_t s) {
  STRATA_LAUNCH(LayerNormKernel, rows, x, gamma, beta, fmt, y, low, mean, rstd, rows, h);
}
cudaError_t LayerNormBackward(const float* x, const void* gamma, int fmt, const float* mean, const float* rstd,
                              const float* dy, float* dx, size_t rows, size_t h, void* dgamma, void* dbeta,
                              bool fresh_gamma, bool fresh_beta, int* overflow, cudaStream_t s) {
  (void)cudaGetLastError();
  LayerNormBackwardKernel<<<Blocks(rows), kThreads, 0, s>>>(x, gamma, fmt, mean, rstd, dy, dx, rows, h);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  LayerNormParamsKernel<<<Blocks(h), kThreads, 0, s>>>(x, mean, rstd, dy, rows, h, dgamma, dbeta, fmt, fresh_gamma,
                                                       fresh_beta, overflow);
  return cudaGetLastError();
}
cudaError_t Gelu(const float* x, float* y, void* low, int fmt, size_t n, cudaStream_t s) {
  STRATA_LAUNCH(GeluKernel, n, x, y, low, fmt, n);
}
cudaError_t GeluBackward(const float* x, const float* dy, float* dx, size_t n, cudaStream_t s) {
  STRATA_LAUNCH(GeluBackwardKernel, n, x, dy, dx, n);
}
cudaError_t Residual(const float* base, const float* y, const void* bias, int fmt, size_t rows, size_t h, float* out,
                     cudaStream_t s) {
  STRATA_LAUNCH(ResidualKernel, rows * h, base, y, bias, fmt, rows * h, h, out);
}
cudaError_t Attention(const float* qkv, float* out, void* low, int fmt, float* probs, size_t B, size_t seq, size_t h,
                      size_t heads, cudaStream_t s) {
  STRATA_LAUNCH(AttentionKernel, B * heads * seq, qkv, out, low, fmt, probs, B * heads * seq, seq, h, heads);
}
cudaError_t AttentionBackward(const float* qkv, const float* probs, const float* dout, float* ds, float* dqkv, size_t B,
                              size_t seq, size_t h, size_t heads, cudaStream_t s) {
  const size_t n = B * heads * seq;
  (void)cudaGetLastError();
  AttentionQueryBackwardKernel<<<Blocks(n), kThreads, 0, s>>>(qkv, probs, dout, ds, dqkv, n, seq, h, heads);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  AttentionKeyBackwardKernel<<<Blocks(n), kThreads, 0, s>>>(qkv, probs, dout, ds, dqkv, n, seq, h, heads);
  return cudaGetLastError();
}
cudaError_t VocabMax(const float* logits, size_t vl, size_t T, float* row_max, cudaStream_t s) {
  STRATA_LAUNCH(VocabMaxKernel, T, logits, vl, T, row_max);
}
cudaError_t VocabStats(const float* logits, const int32_t* targets, const float* row_max, size_t first, size_t vl,
                       size_t T, float* stats, cudaStream_t s) {
  STRATA_LAUNCH(VocabStatsKernel, T, logits, targets, row_max, first, vl, T, stats);
}
cudaError_t VocabGrad(const float* logits, const int32_t* targets, const float* row_max, const float* stats,
                      size_t first, size_t vl, size_t T, float scale, float* dlogits, void* low, int fmt, float* losses,
                      cudaStream_t s) {
  STRATA_LAUNCH(VocabGradKernel, T, logits, targets, row_max, stats, first, vl, T, scale, dlogits, low, fmt, losses);
}

}  // namespace strata::exec::cuda
