// Kernels of the MLP workload (Linear, ReLU, softmax cross-entropy), plain
// loops in a fixed order so results are deterministic and identical however
// the plan places the data; the Linear loops are the reference the host
// backend's kernels (host/linear_low.h) reproduce bit for bit. Templates so
// tests can run them in double against finite differences. Layouts are
// row-major: x [batch x in], W [out x in] (PyTorch's Linear), y [batch x out].
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace strata::exec {

// y = x W^T + b. Each output is one chain over k in increasing order, each
// step a fused multiply-add (one rounding): acc = fma(x[k], w[k], acc) from
// acc = 0, then b + acc. The host kernels (host/linear_low.cc) give these
// bits on every SIMD target and thread count: the order is the same
// whatever the vector width, and a fused multiply-add is exact up to its one
// rounding wherever it runs.
template <typename T>
void LinearForward(const T* x, const T* w, const T* b, T* y, size_t batch, size_t in, size_t out) {
  for (size_t i = 0; i < batch; ++i) {
    const T* xr = x + i * in;
    for (size_t o = 0; o < out; ++o) {
      const T* wr = w + o * in;
      T acc = T(0);
      for (size_t k = 0; k < in; ++k) acc = std::fma(xr[k], wr[k], acc);
      y[i * out + o] = (b != nullptr ? b[o] : T(0)) + acc;
    }
  }
}

// dW += dy^T x, db += sum_i dy, dx = dy W (dx may be null). dW's elements
// sum over the batch in order, dx's over the rows of W in order, each step
// a fused multiply-add; db's plain additions over the batch in order.
template <typename T>
void LinearBackward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, size_t batch, size_t in, size_t out) {
  for (size_t o = 0; o < out; ++o) {
    T* dwr = dw + o * in;
    for (size_t i = 0; i < batch; ++i) {
      const T g = dy[i * out + o];
      const T* xr = x + i * in;
      for (size_t k = 0; k < in; ++k) dwr[k] = std::fma(g, xr[k], dwr[k]);
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
      for (size_t k = 0; k < in; ++k) dxr[k] = std::fma(g, wr[k], dxr[k]);
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
T SoftmaxCrossEntropy(const T* logits, const int32_t* labels, T* dlogits, size_t batch, size_t classes,
                      T grad_scale = T(1)) {
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
