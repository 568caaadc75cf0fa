// Kernels of the MLP workload (Linear, ReLU, softmax cross-entropy), plain
// loops in a fixed order so results are deterministic and identical however
// the plan places the data. Templates so tests can run them in double
// against finite differences. Layouts are row-major: x [batch x in],
// W [out x in] (PyTorch's Linear), y [batch x out].
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace strata::exec {

// y = x W^T + b
template <typename T>
void LinearForward(const T* x, const T* w, const T* b, T* y, size_t batch, size_t in, size_t out) {
  // Each dot product in 16 interleaved partial sums (lane j takes k = j mod
  // 16), added pairwise at the end: a fixed order the compiler can put in
  // vector registers. All batch rows go through a weight row while it is in
  // cache.
  constexpr size_t L = 16;
  for (size_t o = 0; o < out; ++o) {
    const T* wr = w + o * in;
    for (size_t i = 0; i < batch; ++i) {
      const T* xr = x + i * in;
      T part[L] = {};
      size_t k = 0;
      for (; k + L <= in; k += L)
        for (size_t j = 0; j < L; ++j) part[j] += xr[k + j] * wr[k + j];
      for (size_t j = 0; k < in; ++k, ++j) part[j] += xr[k] * wr[k];
      for (size_t h = L / 2; h > 0; h /= 2)
        for (size_t j = 0; j < h; ++j) part[j] += part[j + h];
      y[i * out + o] = (b != nullptr ? b[o] : T(0)) + part[0];
    }
  }
}

// dW += dy^T x, db += sum_i dy, dx = dy W (dx may be null).
template <typename T>
void LinearBackward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, size_t batch, size_t in, size_t out) {
  for (size_t o = 0; o < out; ++o) {
    T* dwr = dw + o * in;
    for (size_t i = 0; i < batch; ++i) {
      const T g = dy[i * out + o];
      const T* xr = x + i * in;
      for (size_t k = 0; k < in; ++k) dwr[k] += g * xr[k];
      if (db != nullptr) db[o] += g;
    }
  }
  if (dx == nullptr) return;
  // dx[i][k] sums over o in order, row by row of W (contiguous).
  for (size_t i = 0; i < batch; ++i) {
    T* dxr = dx + i * in;
    for (size_t k = 0; k < in; ++k) dxr[k] = T(0);
    for (size_t o = 0; o < out; ++o) {
      const T g = dy[i * out + o];
      const T* wr = w + o * in;
      for (size_t k = 0; k < in; ++k) dxr[k] += g * wr[k];
    }
  }
}

template <typename T>
void ReluForward(T* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = y[i] > T(0) ? y[i] : T(0);
}

// dy *= (y > 0), with y the ReLU's output.
template <typename T>
void ReluBackward(const T* y, T* dy, size_t n) {
  for (size_t i = 0; i < n; ++i) dy[i] = y[i] > T(0) ? dy[i] : T(0);
}

// Mean softmax cross-entropy over the batch; writes d(loss)/d(logits)
// scaled by `grad_scale` (the loss scale).
template <typename T>
T SoftmaxCrossEntropy(const T* logits, const int32_t* labels, T* dlogits, size_t batch, size_t classes, T grad_scale = T(1)) {
  T loss = T(0);
  for (size_t i = 0; i < batch; ++i) {
    const T* z = logits + i * classes;
    T mx = z[0];
    for (size_t c = 1; c < classes; ++c) mx = z[c] > mx ? z[c] : mx;
    T sum = T(0);
    for (size_t c = 0; c < classes; ++c) sum += std::exp(z[c] - mx);
    const T log_sum = std::log(sum) + mx;
    loss += log_sum - z[labels[i]];
    for (size_t c = 0; c < classes; ++c) {
      const T p = std::exp(z[c] - log_sum);
      dlogits[i * classes + c] = (p - (static_cast<int32_t>(c) == labels[i] ? T(1) : T(0))) * grad_scale / T(batch);
    }
  }
  return loss / T(batch);
}

}  // namespace strata::exec
