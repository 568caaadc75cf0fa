// GPT kernels against central finite differences, in double: for a random
// projection R, L = sum(out * R) and dL/din from backward must match.
#include "strata/executor/transformer_kernels.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

namespace strata::exec {
namespace {

std::vector<double> Random(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks analytic gradient `grad` of L(param) against finite differences.
void CheckGradient(std::vector<double>& param, const std::vector<double>& grad, const std::function<double()>& loss,
                   const char* what, double tol = 1e-6) {
  const double eps = 1e-6;
  for (size_t i = 0; i < param.size(); ++i) {
    const double keep = param[i];
    param[i] = keep + eps;
    const double up = loss();
    param[i] = keep - eps;
    const double down = loss();
    param[i] = keep;
    EXPECT_NEAR(grad[i], (up - down) / (2 * eps), tol * (1 + std::abs(grad[i]))) << what << "[" << i << "]";
  }
}

TEST(TransformerKernels, LayerNorm) {
  const size_t rows = 3, h = 6;
  auto x = Random(rows * h, 1), g = Random(h, 2), b = Random(h, 3), R = Random(rows * h, 4);
  auto loss = [&] {
    std::vector<double> y(rows * h), m(rows), s(rows);
    LayerNormForward(x.data(), g.data(), b.data(), y.data(), m.data(), s.data(), rows, h);
    return Dot(y, R);
  };
  std::vector<double> y(rows * h), m(rows), s(rows), dx(rows * h, 0), dg(h, 0), db(h, 0);
  LayerNormForward(x.data(), g.data(), b.data(), y.data(), m.data(), s.data(), rows, h);
  LayerNormBackward(x.data(), g.data(), m.data(), s.data(), R.data(), dx.data(), dg.data(), db.data(), rows, h);
  CheckGradient(x, dx, loss, "x");
  CheckGradient(g, dg, loss, "gamma");
  CheckGradient(b, db, loss, "beta");
}

TEST(TransformerKernels, Gelu) {
  auto x = Random(20, 5, 2.0), R = Random(20, 6);
  auto loss = [&] {
    std::vector<double> y(x.size());
    GeluForward(x.data(), y.data(), x.size());
    return Dot(y, R);
  };
  std::vector<double> dx(x.size(), 0);
  GeluBackward(x.data(), R.data(), dx.data(), x.size());
  CheckGradient(x, dx, loss, "x");
}

TEST(TransformerKernels, CausalAttention) {
  const size_t B = 2, s = 4, h = 6, heads = 2;
  auto qkv = Random(B * s * 3 * h, 7), R = Random(B * s * h, 8);
  auto loss = [&] {
    std::vector<double> out(B * s * h), probs(B * heads * s * s);
    AttentionForward(qkv.data(), out.data(), probs.data(), B, s, h, heads);
    return Dot(out, R);
  };
  std::vector<double> out(B * s * h), probs(B * heads * s * s), dqkv(qkv.size(), 0);
  AttentionForward(qkv.data(), out.data(), probs.data(), B, s, h, heads);
  AttentionBackward(qkv.data(), probs.data(), R.data(), dqkv.data(), B, s, h, heads);
  CheckGradient(qkv, dqkv, loss, "qkv");
  // Causality: the first token's output depends only on itself.
  std::vector<double> q2 = qkv;
  for (size_t i = 3 * h; i < s * 3 * h; ++i) q2[i] += 1.0;  // change later tokens of batch 0
  std::vector<double> out2(B * s * h);
  AttentionForward(q2.data(), out2.data(), probs.data(), B, s, h, heads);
  for (size_t e = 0; e < h; ++e) EXPECT_DOUBLE_EQ(out2[e], out[e]);
  // Each row of probabilities sums to one.
  AttentionForward(qkv.data(), out.data(), probs.data(), B, s, h, heads);
  for (size_t r = 0; r < B * heads * s; ++r) {
    double sum = 0;
    for (size_t j = 0; j < s; ++j) sum += probs[r * s + j];
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(TransformerKernels, Embedding) {
  const size_t n = 5, seq = 3, h = 4, V = 7;
  const std::vector<int32_t> tokens{1, 6, 1, 0, 3};
  auto wte = Random(V * h, 9), wpe = Random(seq * h, 10), R = Random(n * h, 11);
  auto loss = [&] {
    std::vector<double> x(n * h);
    EmbeddingForward(tokens.data(), wte.data(), wpe.data(), x.data(), n, seq, h);
    return Dot(x, R);
  };
  std::vector<double> dwte(V * h, 0), dwpe(seq * h, 0);
  EmbeddingBackward(tokens.data(), R.data(), dwte.data(), dwpe.data(), n, seq, h);
  CheckGradient(wte, dwte, loss, "wte");
  CheckGradient(wpe, dwpe, loss, "wpe");
}

}  // namespace
}  // namespace strata::exec
