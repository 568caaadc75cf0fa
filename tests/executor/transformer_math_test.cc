// transformer_math.h's per-thread functions (what the device model's GPT
// kernels run) against the plain loops of transformer_kernels.h, bit for
// bit: every thread run in turn, the outputs compared element by element;
// the vocabulary-parallel loss against the whole vocabulary's softmax
// cross-entropy (mlp_kernels.h), to rounding.
#include "strata/executor/transformer_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../../executor/host/convert.h"
#include "random_vectors.h"
#include "strata/executor/mlp_kernels.h"
#include "strata/executor/transformer_kernels.h"

namespace strata::exec {
namespace {

using testing::Normal;
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(FloatBits(got[i]), FloatBits(want[i])) << what << " element " << i << ": " << got[i] << " vs " << want[i];
}

TEST(TransformerMath, EmbeddingForwardAndBackward) {
  const size_t V = 11, S = 5, h = 6, T = 3 * S;
  std::vector<int32_t> tokens(T);
  for (size_t t = 0; t < T; ++t) tokens[t] = static_cast<int32_t>((t * 7 + 3) % V);
  tokens[4] = tokens[9] = 2;  // a token twice: its row's sums add in token order
  const std::vector<float> wte = Normal(V * h, 1), wpe = Normal(S * h, 2), dx = Normal(T * h, 3);
  std::vector<float> ref(T * h), got(T * h);
  EmbeddingForward<float>(tokens.data(), wte.data(), wpe.data(), ref.data(), T, S, h);
  for (size_t i = 0; i < T * h; ++i)
    dm::EmbeddingElement(tokens.data(), wte.data(), wpe.data(), dm::kFp32, 0, V, got.data(), S, h, i);
  ExpectSameBits(got, ref, "embedding");
  std::vector<float> dwte(V * h, 0.0f), dwpe(S * h, 0.0f), gwte(V * h, 0.0f), gwpe(S * h, 0.0f);
  EmbeddingBackward<float>(tokens.data(), dx.data(), dwte.data(), dwpe.data(), T, S, h);
  for (size_t i = 0; i < h; ++i)
    dm::EmbeddingBackwardChannel(tokens.data(), dx.data(), gwte.data(), gwpe.data(), 0, V, T, S, h, i);
  ExpectSameBits(gwte, dwte, "dwte");
  ExpectSameBits(gwpe, dwpe, "dwpe");
  // Vocabulary-parallel: two ranks' rows, the positions added after the
  // sum, give the whole table's; each rank's gradient rows are the whole's.
  const size_t vl = 6;  // rows [0, 6) and [6, 12): the second padded past V
  std::vector<float> padded = wte;
  padded.resize(2 * vl * h, 0.0f);
  std::vector<float> sum(T * h, 0.0f);
  for (size_t q = 0; q < 2; ++q) {
    std::vector<float> part(T * h),
        rows(padded.begin() + static_cast<long>(q * vl * h), padded.begin() + static_cast<long>((q + 1) * vl * h));
    for (size_t i = 0; i < T * h; ++i)
      dm::EmbeddingElement(tokens.data(), rows.data(), nullptr, dm::kFp32, q * vl, vl, part.data(), S, h, i);
    for (size_t i = 0; i < T * h; ++i) sum[i] += part[i];
    std::vector<float> g(vl * h, 0.0f);
    for (size_t i = 0; i < h; ++i)
      dm::EmbeddingBackwardChannel(tokens.data(), dx.data(), g.data(), nullptr, q * vl, vl, T, S, h, i);
    for (size_t r = 0; r < vl && q * vl + r < V; ++r)
      for (size_t i = 0; i < h; ++i) ASSERT_EQ(FloatBits(g[r * h + i]), FloatBits(dwte[(q * vl + r) * h + i]));
  }
  for (size_t i = 0; i < T * h; ++i) dm::AddPositionElement(sum.data(), wpe.data(), dm::kFp32, S, h, i);
  ExpectSameBits(sum, ref, "vocabulary-parallel embedding");
  // The residual: base + (y + bias).
  std::vector<float> y = Normal(T * h, 13), base = Normal(T * h, 14), bias = Normal(h, 15), out(T * h);
  for (size_t i = 0; i < T * h; ++i)
    dm::ResidualElement(base.data(), y.data(), bias.data(), dm::kFp32, h, out.data(), i);
  for (size_t i = 0; i < T * h; ++i) ASSERT_EQ(FloatBits(out[i]), FloatBits(base[i] + (y[i] + bias[i % h])));
}

TEST(TransformerMath, LayerNormForwardAndBackward) {
  const size_t rows = 7, h = 24;
  const std::vector<float> x = Normal(rows * h, 4, 2.0f), gamma = Normal(h, 5), beta = Normal(h, 6),
                           dy = Normal(rows * h, 7);
  std::vector<float> y(rows * h), mean(rows), rstd(rows), gy(rows * h), gmean(rows), grstd(rows);
  LayerNormForward<float>(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, h);
  std::vector<uint16_t> low(rows * h);
  for (size_t r = 0; r < rows; ++r)
    dm::LayerNormRow(x.data(), gamma.data(), beta.data(), dm::kFp32, gy.data(), nullptr, gmean.data(), grstd.data(), h,
                     1e-5f, r);
  ExpectSameBits(gy, y, "y");
  ExpectSameBits(gmean, mean, "mean");
  ExpectSameBits(grstd, rstd, "rstd");
  // 16-bit parameters are widened exactly; the low copy is y rounded.
  std::vector<uint16_t> gl(h), bl(h);
  FloatToLow(gamma.data(), gl.data(), h, Precision::kBf16);
  FloatToLow(beta.data(), bl.data(), h, Precision::kBf16);
  std::vector<float> gw(h), bw(h), y16(rows * h), y16ref(rows * h);
  LowToFloat(gl.data(), gw.data(), h, Precision::kBf16);
  LowToFloat(bl.data(), bw.data(), h, Precision::kBf16);
  LayerNormForward<float>(x.data(), gw.data(), bw.data(), y16ref.data(), mean.data(), rstd.data(), rows, h);
  for (size_t r = 0; r < rows; ++r)
    dm::LayerNormRow(x.data(), gl.data(), bl.data(), dm::kBf16, y16.data(), low.data(), gmean.data(), grstd.data(), h,
                     1e-5f, r);
  ExpectSameBits(y16, y16ref, "y from bf16 parameters");
  std::vector<uint16_t> want_low(rows * h);
  FloatToLow(y16ref.data(), want_low.data(), rows * h, Precision::kBf16);
  EXPECT_EQ(low, want_low);

  std::vector<float> dx(rows * h, 0.5f), dgamma(h, 0.0f), dbeta(h, 0.0f);
  std::vector<float> gdx(rows * h, 0.5f), gdgamma(h), gdbeta(h);
  LayerNormBackward<float>(x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dgamma.data(),
                           dbeta.data(), rows, h);
  for (size_t r = 0; r < rows; ++r)
    dm::LayerNormBackwardRow(x.data(), gamma.data(), dm::kFp32, mean.data(), rstd.data(), dy.data(), gdx.data(), h, r);
  for (size_t i = 0; i < h; ++i)
    dm::LayerNormParamColumn(x.data(), mean.data(), rstd.data(), dy.data(), rows, h, i, &gdgamma[i], &gdbeta[i]);
  ExpectSameBits(gdx, dx, "dx");
  ExpectSameBits(gdgamma, dgamma, "dgamma");
  ExpectSameBits(gdbeta, dbeta, "dbeta");
}

TEST(TransformerMath, GeluForwardAndBackward) {
  const size_t n = 1000;
  const std::vector<float> x = Normal(n, 8, 3.0f), dy = Normal(n, 9);
  std::vector<float> y(n), gy(n), dx(n, 0.25f), gdx(n, 0.25f);
  GeluForward<float>(x.data(), y.data(), n);
  GeluBackward<float>(x.data(), dy.data(), dx.data(), n);
  for (size_t i = 0; i < n; ++i) {
    dm::GeluElement(x.data(), gy.data(), nullptr, dm::kFp32, i);
    dm::GeluBackwardElement(x.data(), dy.data(), gdx.data(), i);
  }
  ExpectSameBits(gy, y, "gelu");
  ExpectSameBits(gdx, dx, "gelu backward");
}

TEST(TransformerMath, CausalAttentionForwardAndBackward) {
  const size_t B = 2, s = 9, h = 12, heads = 3;
  const std::vector<float> qkv = Normal(B * s * 3 * h, 10), dout = Normal(B * s * h, 11);
  std::vector<float> out(B * s * h), probs(B * heads * s * s), gout(B * s * h), gprobs(B * heads * s * s);
  AttentionForward<float>(qkv.data(), out.data(), probs.data(), B, s, h, heads);
  for (size_t idx = 0; idx < B * heads * s; ++idx)
    dm::AttentionQuery(qkv.data(), gout.data(), nullptr, dm::kFp32, gprobs.data(), s, h, heads, idx);
  ExpectSameBits(gout, out, "attention output");
  ExpectSameBits(gprobs, probs, "probabilities");
  std::vector<float> dqkv(qkv.size(), 0.0f), gdqkv(qkv.size(), 0.0f), ds(B * heads * s * s);
  AttentionBackward<float>(qkv.data(), probs.data(), dout.data(), dqkv.data(), B, s, h, heads);
  for (size_t idx = 0; idx < B * heads * s; ++idx)
    dm::AttentionBackwardQuery(qkv.data(), probs.data(), dout.data(), ds.data(), gdqkv.data(), s, h, heads, idx);
  for (size_t idx = 0; idx < B * heads * s; ++idx)
    dm::AttentionBackwardKey(qkv.data(), probs.data(), dout.data(), ds.data(), gdqkv.data(), s, h, heads, idx);
  ExpectSameBits(gdqkv, dqkv, "dqkv");
}

// Two ranks' shards of a vocabulary-parallel loss, their statistics reduced
// as the plan's all-reduces do, give the whole vocabulary's softmax
// cross-entropy (mlp_kernels.h's) to rounding, and each shard of the
// gradient.
TEST(TransformerMath, VocabularyParallelLossIsTheWholeSoftmax) {
  const size_t T = 6, V = 16, vl = V / 2;
  const std::vector<float> z = Normal(T * V, 12, 2.0f);
  std::vector<int32_t> targets = {0, 15, 7, 8, 3, 12};
  std::vector<float> whole(T * V);
  const float ref = SoftmaxCrossEntropy<float>(z.data(), targets.data(), whole.data(), T, V, 8.0f);
  std::vector<float> shard[2], mx(T, -1e30f), stats(2 * T, 0.0f);
  for (size_t q = 0; q < 2; ++q) {
    shard[q].resize(T * vl);
    for (size_t t = 0; t < T; ++t)
      for (size_t c = 0; c < vl; ++c) shard[q][t * vl + c] = z[t * V + q * vl + c];
    for (size_t t = 0; t < T; ++t) mx[t] = std::max(mx[t], dm::VocabRowMax(shard[q].data(), vl, t));
  }
  for (size_t q = 0; q < 2; ++q) {
    std::vector<float> mine(2 * T);
    for (size_t t = 0; t < T; ++t)
      dm::VocabRowStats(shard[q].data(), targets.data(), mx.data(), q * vl, vl, T, mine.data(), t);
    for (size_t k = 0; k < 2 * T; ++k) stats[k] += mine[k];
  }
  float loss = 0;
  for (size_t q = 0; q < 2; ++q) {
    std::vector<float> g(T * vl);
    float rank_loss = 0;
    for (size_t t = 0; t < T; ++t)
      rank_loss += dm::VocabRowGrad(shard[q].data(), targets.data(), mx.data(), stats.data(), q * vl, vl, T, 8.0f,
                                    g.data(), nullptr, dm::kFp32, t);
    if (q == 0) loss = rank_loss / static_cast<float>(T);
    EXPECT_NEAR(rank_loss / static_cast<float>(T), loss, 0.0f);  // every rank computes the same loss
    for (size_t t = 0; t < T; ++t)
      for (size_t c = 0; c < vl; ++c) EXPECT_NEAR(g[t * vl + c], whole[t * V + q * vl + c], 1e-6) << t << " " << c;
  }
  EXPECT_NEAR(loss, ref, 1e-6 * std::abs(ref));
}

}  // namespace
}  // namespace strata::exec
