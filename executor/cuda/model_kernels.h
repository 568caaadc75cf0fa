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

cudaError_t BiasAct(float* y, void* low, const void* bias, int fmt, size_t rows, size_t cols, bool relu, cudaStream_t s);
cudaError_t ReluBackward(const float* y, float* dy, void* low, int fmt, size_t n, cudaStream_t s);
cudaError_t SoftmaxXent(const float* logits, const int32_t* labels, float* dlogits, void* low, int fmt, size_t batch,
                        size_t classes, float scale, float* losses, cudaStream_t s);
cudaError_t AddGrad(void* grad, const float* src, size_t n, int fmt, bool fresh, int* overflow, cudaStream_t s);
cudaError_t ColumnSumsToGrad(void* grad, const float* m, size_t rows, size_t cols, int fmt, bool fresh, int* overflow,
                             cudaStream_t s);
cudaError_t Round(void* dst, const float* src, size_t n, int fmt, cudaStream_t s);

}  // namespace strata::exec::cuda
