// Kernels of the GPT workload (issue 5): token and position embeddings,
// LayerNorm, the tanh GeLU and causal multi-head self-attention, forward and
// backward, as plain loops in a fixed order (deterministic). Templates so
// tests check them in double against finite differences. Linear layers and
// the loss are in mlp_kernels.h; the tied LM head is a Linear whose weight
// is the token embedding. Row-major: activations [tokens x hidden].
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::exec {

// x[t] = wte[token[t]] + wpe[t % seq]
template <typename T>
void EmbeddingForward(const int32_t* tokens, const T* wte, const T* wpe, T* x, size_t n_tokens, size_t seq, size_t h) {
  for (size_t t = 0; t < n_tokens; ++t)
    for (size_t i = 0; i < h; ++i) x[t * h + i] = wte[static_cast<size_t>(tokens[t]) * h + i] + wpe[(t % seq) * h + i];
}
template <typename T>
void EmbeddingBackward(const int32_t* tokens, const T* dx, T* dwte, T* dwpe, size_t n_tokens, size_t seq, size_t h) {
  for (size_t t = 0; t < n_tokens; ++t)
    for (size_t i = 0; i < h; ++i) {
      dwte[static_cast<size_t>(tokens[t]) * h + i] += dx[t * h + i];
      dwpe[(t % seq) * h + i] += dx[t * h + i];
    }
}

// y = (x - mean) / sqrt(var + eps) * gamma + beta, per row; saves mean and
// 1/std per row for backward.
template <typename T>
void LayerNormForward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, size_t rows, size_t h,
                      T eps = T(1e-5)) {
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * h;
    T m = 0;
    for (size_t i = 0; i < h; ++i) m += xr[i];
    m /= T(h);
    T v = 0;
    for (size_t i = 0; i < h; ++i) v += (xr[i] - m) * (xr[i] - m);
    v /= T(h);
    const T s = T(1) / std::sqrt(v + eps);
    mean[r] = m;
    rstd[r] = s;
    for (size_t i = 0; i < h; ++i) y[r * h + i] = (xr[i] - m) * s * gamma[i] + beta[i];
  }
}
template <typename T>
void LayerNormBackward(const T* x, const T* gamma, const T* mean, const T* rstd, const T* dy, T* dx, T* dgamma,
                       T* dbeta, size_t rows, size_t h) {
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * h;
    const T* g = dy + r * h;
    T sum_g = 0, sum_gx = 0;
    for (size_t i = 0; i < h; ++i) {
      const T xhat = (xr[i] - mean[r]) * rstd[r];
      const T gi = g[i] * gamma[i];
      dgamma[i] += g[i] * xhat;
      dbeta[i] += g[i];
      sum_g += gi;
      sum_gx += gi * xhat;
    }
    for (size_t i = 0; i < h; ++i) {
      const T xhat = (xr[i] - mean[r]) * rstd[r];
      dx[r * h + i] += rstd[r] * (g[i] * gamma[i] - sum_g / T(h) - xhat * sum_gx / T(h));
    }
  }
}

// GeLU, tanh approximation (GPT-2).
template <typename T>
void GeluForward(const T* x, T* y, size_t n) {
  const T c = std::sqrt(T(2) / T(M_PI));
  for (size_t i = 0; i < n; ++i) {
    const T u = c * (x[i] + T(0.044715) * x[i] * x[i] * x[i]);
    y[i] = T(0.5) * x[i] * (T(1) + std::tanh(u));
  }
}
template <typename T>
void GeluBackward(const T* x, const T* dy, T* dx, size_t n) {
  const T c = std::sqrt(T(2) / T(M_PI));
  for (size_t i = 0; i < n; ++i) {
    const T u = c * (x[i] + T(0.044715) * x[i] * x[i] * x[i]);
    const T t = std::tanh(u);
    const T du = c * (T(1) + T(3) * T(0.044715) * x[i] * x[i]);
    dx[i] += dy[i] * (T(0.5) * (T(1) + t) + T(0.5) * x[i] * (T(1) - t * t) * du);
  }
}

// Causal self-attention. qkv [B*s x 3h] holds q, k, v per token (head-major
// within each); out [B*s x h]. Saves the attention probabilities
// probs [B x heads x s x s] for backward.
template <typename T>
void AttentionForward(const T* qkv, T* out, T* probs, size_t B, size_t s, size_t h, size_t heads) {
  const size_t d = h / heads;
  const T scale = T(1) / std::sqrt(T(d));
  for (size_t b = 0; b < B; ++b)
    for (size_t a = 0; a < heads; ++a)
      for (size_t i = 0; i < s; ++i) {
        const T* q = qkv + (b * s + i) * 3 * h + a * d;
        T* p = probs + ((b * heads + a) * s + i) * s;
        T mx = -1e30;
        for (size_t j = 0; j <= i; ++j) {
          const T* k = qkv + (b * s + j) * 3 * h + h + a * d;
          T dot = 0;
          for (size_t e = 0; e < d; ++e) dot += q[e] * k[e];
          p[j] = dot * scale;
          mx = p[j] > mx ? p[j] : mx;
        }
        T sum = 0;
        for (size_t j = 0; j <= i; ++j) {
          p[j] = std::exp(p[j] - mx);
          sum += p[j];
        }
        for (size_t j = 0; j < s; ++j) p[j] = j <= i ? p[j] / sum : T(0);
        T* o = out + (b * s + i) * h + a * d;
        for (size_t e = 0; e < d; ++e) o[e] = 0;
        for (size_t j = 0; j <= i; ++j) {
          const T* v = qkv + (b * s + j) * 3 * h + 2 * h + a * d;
          for (size_t e = 0; e < d; ++e) o[e] += p[j] * v[e];
        }
      }
}
template <typename T>
void AttentionBackward(const T* qkv, const T* probs, const T* dout, T* dqkv, size_t B, size_t s, size_t h,
                       size_t heads) {
  const size_t d = h / heads;
  const T scale = T(1) / std::sqrt(T(d));
  std::vector<T> dp(s);
  for (size_t b = 0; b < B; ++b)
    for (size_t a = 0; a < heads; ++a)
      for (size_t i = 0; i < s; ++i) {
        const T* p = probs + ((b * heads + a) * s + i) * s;
        const T* go = dout + (b * s + i) * h + a * d;
        // dP and dV
        T dot_sum = 0;
        for (size_t j = 0; j <= i; ++j) {
          const T* v = qkv + (b * s + j) * 3 * h + 2 * h + a * d;
          T* dv = dqkv + (b * s + j) * 3 * h + 2 * h + a * d;
          T g = 0;
          for (size_t e = 0; e < d; ++e) {
            g += go[e] * v[e];
            dv[e] += p[j] * go[e];
          }
          dp[j] = g;
          dot_sum += g * p[j];
        }
        // Softmax backward, then the scores q.k.
        const T* q = qkv + (b * s + i) * 3 * h + a * d;
        T* dq = dqkv + (b * s + i) * 3 * h + a * d;
        for (size_t j = 0; j <= i; ++j) {
          const T ds = p[j] * (dp[j] - dot_sum) * scale;
          const T* k = qkv + (b * s + j) * 3 * h + h + a * d;
          T* dk = dqkv + (b * s + j) * 3 * h + h + a * d;
          for (size_t e = 0; e < d; ++e) {
            dq[e] += ds * k[e];
            dk[e] += ds * q[e];
          }
        }
      }
}

}  // namespace strata::exec
