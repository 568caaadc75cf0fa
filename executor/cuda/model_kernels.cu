// The device model's kernels (model_kernels.h): grid-stride loops over
// model_math.h's per-thread functions, one writer per output, no atomics.
// A launcher clears the last error first, so the error it returns is its
// launch's own.
#include "grid.cuh"
#include "model_kernels.h"
#include "strata/executor/model_math.h"

namespace strata::exec::cuda {
namespace {

__global__ void BiasActKernel(float* y, void* low, const void* bias, int fmt, size_t n, size_t cols, bool relu) {
  STRATA_GRID_LOOP(i, n) dm::BiasActElement(y, low, bias, fmt, cols, relu, i);
}
__global__ void ReluBackwardKernel(const float* y, float* dy, void* low, int fmt, size_t n) {
  STRATA_GRID_LOOP(i, n) dm::ReluBackwardElement(y, dy, low, fmt, i);
}
__global__ void SoftmaxXentKernel(const float* logits, const int32_t* labels, float* dlogits, void* low, int fmt,
                                  size_t batch, size_t classes, float scale, float* losses) {
  STRATA_GRID_LOOP(r, batch)
  losses[r] = dm::SoftmaxXentRow(logits, labels, dlogits, low, fmt, batch, classes, scale, r);
}
__global__ void AddGradKernel(void* grad, const float* src, size_t n, int fmt, bool fresh, int* overflow) {
  STRATA_GRID_LOOP(i, n) Flag(overflow, dm::AddToGrad(grad, i, src[i], fmt, fresh));
}
__global__ void ColumnSumsKernel(void* grad, const float* m, size_t rows, size_t cols, int fmt, bool fresh,
                                 int* overflow) {
  STRATA_GRID_LOOP(c, cols) Flag(overflow, dm::AddToGrad(grad, c, dm::ColumnSum(m, rows, cols, c), fmt, fresh));
}
__global__ void RoundKernel(void* dst, const float* src, size_t n, int fmt) {
  STRATA_GRID_LOOP(i, n) dm::StoreAs(dst, i, src[i], fmt);
}

}  // namespace

cudaError_t BiasAct(float* y, void* low, const void* bias, int fmt, size_t rows, size_t cols, bool relu,
                    cudaStream_t s) {
  (void)cudaGetLastError();
  BiasActKernel<<<Blocks(rows * cols), kThreads, 0, s>>>(y, low, bias, fmt, rows * cols, cols, relu);
  return cudaGetLastError();
}
cudaError_t ReluBackward(const float* y, float* dy, void* low, int fmt, size_t n, cudaStream_t s) {
  (void)cudaGetLastError();
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, s>>>(y, dy, low, fmt, n);
  return cudaGetLastError();
}
cudaError_t SoftmaxXent(const float* logits, const int32_t* labels, float* dlogits, void* low, int fmt, size_t batch,
                        size_t classes, float scale, float* losses, cudaStream_t s) {
  (void)cudaGetLastError();
  SoftmaxXentKernel<<<Blocks(batch), kThreads, 0, s>>>(logits, labels, dlogits, low, fmt, batch, classes, scale,
                                                       losses);
  return cudaGetLastError();
}
cudaError_t AddGrad(void* grad, const float* src, size_t n, int fmt, bool fresh, int* overflow, cudaStream_t s) {
  (void)cudaGetLastError();
  AddGradKernel<<<Blocks(n), kThreads, 0, s>>>(grad, src, n, fmt, fresh, overflow);
  return cudaGetLastError();
}
cudaError_t ColumnSumsToGrad(void* grad, const float* m, size_t rows, size_t cols, int fmt, bool fresh, int* overflow,
                             cudaStream_t s) {
  (void)cudaGetLastError();
  ColumnSumsKernel<<<Blocks(cols), kThreads, 0, s>>>(grad, m, rows, cols, fmt, fresh, overflow);
  return cudaGetLastError();
}
cudaError_t Round(void* dst, const float* src, size_t n, int fmt, cudaStream_t s) {
  (void)cudaGetLastError();
  RoundKernel<<<Blocks(n), kThreads, 0, s>>>(dst, src, n, fmt);
  return cudaGetLastError();
}

}  // namespace strata::exec::cuda
