// The GPT's per-thread math for the device model (issue #17), beside
// model_math.h's: what one GPU thread computes for one row, column, query
// or key, STRATA_HD, each the operations of transformer_kernels.h's plain
// loops (or gpt_workload.cc's vocabulary-parallel loss) in their order, so
// host tests check them bit for bit. Deterministic: one writer per output,
// fixed summation orders, no atomics (the scatters of the embedding's and
// the attention's backward are turned into gathers: a thread per channel,
// per key). Activations are fp32; parameters are in `fmt` (model_math.h).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "strata/executor/model_math.h"

namespace strata::exec::dm {

// Element idx of x [tokens x h] = wte[token] + wpe[position]
// (EmbeddingForward). Vocabulary-parallel (Megatron's
// VocabParallelEmbedding): this rank holds the table's rows [first, first +
// vl), a token outside them gives 0, and wpe is null (the positions are
// added after the all-reduce: AddPositionElement).
STRATA_HD inline void EmbeddingElement(const int32_t* tokens, const void* wte, const void* wpe, int fmt, size_t first,
                                       size_t vl, float* x, size_t seq, size_t h, size_t idx) {
  const size_t t = idx / h, i = idx % h, tok = static_cast<size_t>(tokens[t]);
  float v = tok >= first && tok < first + vl ? LoadAs(wte, (tok - first) * h + i, fmt) : 0.0f;
  if (wpe != nullptr) v = v + LoadAs(wpe, (t % seq) * h + i, fmt);
  x[idx] = v;
}
STRATA_HD inline void AddPositionElement(float* x, const void* wpe, int fmt, size_t seq, size_t h, size_t idx) {
  const size_t t = idx / h, i = idx % h;
  x[idx] = x[idx] + LoadAs(wpe, (t % seq) * h + i, fmt);
}
// Channel i of the tables' gradients (EmbeddingBackward's sums, in token
// order): dwte [vl x h] (this rank's rows [first, first + vl)) and dwpe
// [seq x h] (may be null) in fp32, zeroed by the caller; the thread of
// channel i is the only writer of column i.
STRATA_HD inline void EmbeddingBackwardChannel(const int32_t* tokens, const float* dx, float* dwte, float* dwpe,
                                               size_t first, size_t vl, size_t n_tokens, size_t seq, size_t h,
                                               size_t i) {
  for (size_t t = 0; t < n_tokens; ++t) {
    const size_t tok = static_cast<size_t>(tokens[t]);
    if (tok >= first && tok < first + vl) dwte[(tok - first) * h + i] += dx[t * h + i];
    if (dwpe != nullptr) dwpe[(t % seq) * h + i] += dx[t * h + i];
  }
}
// Element idx of out [rows x h] = base + (y + bias) (bias in fmt, may be
// null): a Linear's output (a row-parallel one's summed partials) with its
// bias, and the residual connection.
STRATA_HD inline void ResidualElement(const float* base, const float* y, const void* bias, int fmt, size_t h,
                                      float* out, size_t idx) {
  const float v = bias != nullptr ? y[idx] + LoadAs(bias, idx % h, fmt) : y[idx];
  out[idx] = base[idx] + v;
}

// Row r of LayerNorm (LayerNormForward): y and, when `low` is not null, y
// rounded to fmt; the row's mean and 1/std saved.
STRATA_HD inline void LayerNormRow(const float* x, const void* gamma, const void* beta, int fmt, float* y, void* low,
                                   float* mean, float* rstd, size_t h, float eps, size_t r) {
  const float* xr = x + r * h;
  float m = 0;
  for (size_t i = 0; i < h; ++i) m += xr[i];
  m /= static_cast<float>(h);
  float v = 0;
  for (size_t i = 0; i < h; ++i) v += (xr[i] - m) * (xr[i] - m);
  v /= static_cast<float>(h);
  const float s = 1.0f / sqrtf(v + eps);
  mean[r] = m;
  rstd[r] = s;
  for (size_t i = 0; i < h; ++i) {
    const float o = (xr[i] - m) * s * LoadAs(gamma, i, fmt) + LoadAs(beta, i, fmt);
    y[r * h + i] = o;
    if (low != nullptr) StoreAs(low, r * h + i, o, fmt);
  }
}
// Row r of LayerNorm's input gradient, added into dx (LayerNormBackward).
STRATA_HD inline void LayerNormBackwardRow(const float* x, const void* gamma, int fmt, const float* mean,
                                           const float* rstd, const float* dy, float* dx, size_t h, size_t r) {
  const float* xr = x + r * h;
  const float* g = dy + r * h;
  float sum_g = 0, sum_gx = 0;
  for (size_t i = 0; i < h; ++i) {
    const float xhat = (xr[i] - mean[r]) * rstd[r];
    const float gi = g[i] * LoadAs(gamma, i, fmt);
    sum_g += gi;
    sum_gx += gi * xhat;
  }
  for (size_t i = 0; i < h; ++i) {
    const float xhat = (xr[i] - mean[r]) * rstd[r];
    dx[r * h + i] += rstd[r] * (g[i] * LoadAs(gamma, i, fmt) - sum_g / static_cast<float>(h) -
                                xhat * sum_gx / static_cast<float>(h));
  }
}
// Column i of gamma's and beta's gradients: the rows' terms summed in row
// order from zero (LayerNormBackward's dgamma, dbeta).
STRATA_HD inline void LayerNormParamColumn(const float* x, const float* mean, const float* rstd, const float* dy,
                                           size_t rows, size_t h, size_t i, float* dgamma, float* dbeta) {
  float dg = 0, db = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float xhat = (x[r * h + i] - mean[r]) * rstd[r];
    dg += dy[r * h + i] * xhat;
    db += dy[r * h + i];
  }
  *dgamma = dg;
  *dbeta = db;
}

// GeLU (tanh approximation) on element i; `low` (may be null) gets y
// rounded to fmt.
STRATA_HD inline void GeluElement(const float* x, float* y, void* low, int fmt, size_t i) {
  const float c = sqrtf(2.0f / 3.14159265358979323846f);
  const float u = c * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
  y[i] = 0.5f * x[i] * (1.0f + tanhf(u));
  if (low != nullptr) StoreAs(low, i, y[i], fmt);
}
// dx[i] += dy[i] * GeLU'(x[i]) (GeluBackward).
STRATA_HD inline void GeluBackwardElement(const float* x, const float* dy, float* dx, size_t i) {
  const float c = sqrtf(2.0f / 3.14159265358979323846f);
  const float u = c * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
  const float t = tanhf(u);
  const float du = c * (1.0f + 3.0f * 0.044715f * x[i] * x[i]);
  dx[i] += dy[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * du);
}

// Causal self-attention, one query per thread: idx = (b * heads + a) * s + i
// (AttentionForward's loops). qkv [B*s x 3h] (q, k, v per token, head-major
// within each), out [B*s x h] (and `low`, may be null, rounded to fmt),
// probs [B x heads x s x s] saved for the backward.
STRATA_HD inline void AttentionQuery(const float* qkv, float* out, void* low, int fmt, float* probs, size_t s, size_t h,
                                     size_t heads, size_t idx) {
  const size_t d = h / heads, i = idx % s, a = (idx / s) % heads, b = idx / (s * heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  const float* q = qkv + (b * s + i) * 3 * h + a * d;
  float* p = probs + idx * s;
  float mx = -1e30f;
  for (size_t j = 0; j <= i; ++j) {
    const float* k = qkv + (b * s + j) * 3 * h + h + a * d;
    float dot = 0;
    for (size_t e = 0; e < d; ++e) dot += q[e] * k[e];
    p[j] = dot * scale;
    mx = p[j] > mx ? p[j] : mx;
  }
  float sum = 0;
  for (size_t j = 0; j <= i; ++j) {
    p[j] = expf(p[j] - mx);
    sum += p[j];
  }
  for (size_t j = 0; j < s; ++j) p[j] = j <= i ? p[j] / sum : 0.0f;
  float* o = out + (b * s + i) * h + a * d;
  for (size_t e = 0; e < d; ++e) {
    float acc = 0;
    for (size_t j = 0; j <= i; ++j) acc += p[j] * qkv[(b * s + j) * 3 * h + 2 * h + a * d + e];
    o[e] = acc;
    if (low != nullptr) StoreAs(low, (b * s + i) * h + a * d + e, acc, fmt);
  }
}
// The backward, in two passes. Per query (idx as AttentionQuery): the
// scores' gradient ds [B x heads x s x s] (softmax backward, scaled) and
// dq += sum over keys j of ds_j k_j.
STRATA_HD inline void AttentionBackwardQuery(const float* qkv, const float* probs, const float* dout, float* ds,
                                             float* dqkv, size_t s, size_t h, size_t heads, size_t idx) {
  const size_t d = h / heads, i = idx % s, a = (idx / s) % heads, b = idx / (s * heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  const float* p = probs + idx * s;
  const float* go = dout + (b * s + i) * h + a * d;
  float* dsr = ds + idx * s;
  float dot_sum = 0;
  for (size_t j = 0; j <= i; ++j) {
    const float* v = qkv + (b * s + j) * 3 * h + 2 * h + a * d;
    float g = 0;
    for (size_t e = 0; e < d; ++e) g += go[e] * v[e];
    dsr[j] = g;  // dP for now
    dot_sum += g * p[j];
  }
  for (size_t j = 0; j <= i; ++j) dsr[j] = p[j] * (dsr[j] - dot_sum) * scale;
  float* dq = dqkv + (b * s + i) * 3 * h + a * d;
  for (size_t j = 0; j <= i; ++j) {
    const float* k = qkv + (b * s + j) * 3 * h + h + a * d;
    for (size_t e = 0; e < d; ++e) dq[e] += dsr[j] * k[e];
  }
}
// Per key j (idx = (b * heads + a) * s + j), after every query's pass: dv
// += p_ij go_i and dk += ds_ij q_i over the queries i >= j in order.
STRATA_HD inline void AttentionBackwardKey(const float* qkv, const float* probs, const float* dout, const float* ds,
                                           float* dqkv, size_t s, size_t h, size_t heads, size_t idx) {
  const size_t d = h / heads, j = idx % s, a = (idx / s) % heads, b = idx / (s * heads);
  const size_t row0 = (b * heads + a) * s;  // the query rows of this (batch, head)
  float* dk = dqkv + (b * s + j) * 3 * h + h + a * d;
  float* dv = dqkv + (b * s + j) * 3 * h + 2 * h + a * d;
  for (size_t i = j; i < s; ++i) {
    const float pij = probs[(row0 + i) * s + j], dsij = ds[(row0 + i) * s + j];
    const float* go = dout + (b * s + i) * h + a * d;
    const float* q = qkv + (b * s + i) * 3 * h + a * d;
    for (size_t e = 0; e < d; ++e) {
      dv[e] += pij * go[e];
      dk[e] += dsij * q[e];
    }
  }
}

// The vocabulary-parallel cross-entropy (gpt_workload.cc after Megatron's
// _VocabParallelCrossEntropy), a thread per token t over this rank's
// `vl` logits of the row: the largest (all-reduced max by the caller)...
STRATA_HD inline float VocabRowMax(const float* logits, size_t vl, size_t t) {
  const float* z = logits + t * vl;
  float mx = z[0];
  for (size_t c = 1; c < vl; ++c) mx = z[c] > mx ? z[c] : mx;
  return mx;
}
// ... then stats[t] = the target's logit where this rank holds its row (0
// elsewhere) and stats[tokens + t] = the sum of exp(logit - max), both
// all-reduced (summed) by the caller ...
STRATA_HD inline void VocabRowStats(const float* logits, const int32_t* targets, const float* row_max, size_t first,
                                    size_t vl, size_t tokens, float* stats, size_t t) {
  const float* z = logits + t * vl;
  float sum = 0;
  for (size_t c = 0; c < vl; ++c) sum += expf(z[c] - row_max[t]);
  stats[tokens + t] = sum;
  const size_t target = static_cast<size_t>(targets[t]);
  stats[t] = target >= first && target < first + vl ? z[target - first] : 0.0f;
}
// ... then the row's loss (returned; the mean is the caller's, tokens in
// order) and this rank's logits' gradient, scaled by scale / tokens.
STRATA_HD inline float VocabRowGrad(const float* logits, const int32_t* targets, const float* row_max,
                                    const float* stats, size_t first, size_t vl, size_t tokens, float scale,
                                    float* dlogits, void* low, int fmt, size_t t) {
  const float log_sum = logf(stats[tokens + t]) + row_max[t];
  const float* z = logits + t * vl;
  for (size_t c = 0; c < vl; ++c) {
    const float p = expf(z[c] - log_sum);
    const bool target = first + c == static_cast<size_t>(targets[t]);
    const float g = (p - (target ? 1.0f : 0.0f)) * scale / static_cast<float>(tokens);
    dlogits[t * vl + c] = g;
    if (low != nullptr) StoreAs(low, t * vl + c, g, fmt);
  }
  return log_sum - stats[t];
}

}  // namespace strata::exec::dm
