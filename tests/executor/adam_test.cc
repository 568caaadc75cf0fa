// The fused CPU Adam against the plain scalar reference: bit for bit in fp32
// and in the fp16/bf16 copies, for every length, thread count and option.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <random>
#include <string>
#include <vector>

#include "strata/executor/cpu_adam.h"

namespace strata::exec {
namespace {

struct State {
  std::vector<float> p, g, m, v;
  std::vector<uint16_t> out;
  AdamTile Tile(Precision prec, bool with_out) {
    return {p.data(), g.data(), m.data(), v.data(), with_out ? out.data() : nullptr, prec, p.size()};
  }
};

State MakeState(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  State s;
  s.p.resize(n);
  s.g.resize(n);
  s.m.resize(n);
  s.v.resize(n);
  s.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    s.p[i] = normal(rng) * 0.05f;
    s.g[i] = normal(rng) * (i % 7 == 0 ? 1e-4f : 1.0f) * 1024.0f;  // scaled by a loss scale
    s.m[i] = normal(rng) * 0.01f;
    s.v[i] = std::abs(normal(rng)) * 1e-4f;
  }
  return s;
}

uint32_t Bits(float f) { return FloatBits(f); }

// On every SIMD target the build dispatches to here (the best, and lesser
// ones such as SSE4 without hardware fp16 conversion).
TEST(CpuAdam, MatchesTheScalarReferenceBitForBit) {
  for (AdamPrefetch prefetch : {AdamPrefetch::kOn, AdamPrefetch::kOff})
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      SetCpuAdamPrefetch(prefetch);
      hwy::SetSupportedTargetsForTest(target);
      SCOPED_TRACE(std::string(hwy::TargetName(target)) +
                   (prefetch == AdamPrefetch::kOn ? " prefetch" : " no prefetch"));
      for (size_t n : {size_t{1}, size_t{7}, size_t{16}, size_t{1000}, size_t{4099}, size_t{100'003}})
        for (int threads : {1, 3})
          for (bool adamw : {true, false})
            for (Precision prec : {Precision::kFp16, Precision::kBf16}) {
              AdamConfig cfg;
              cfg.lr = 3e-4f;
              cfg.weight_decay = 0.01f;
              cfg.adamw = adamw;
              State a = MakeState(n, 42), b = MakeState(n, 42);
              for (int step = 1; step <= 3; ++step) {
                const AdamStepConsts c = MakeAdamStep(cfg, step, 1.0f / 1024.0f);
                CpuAdamStep(a.Tile(prec, true), c, threads);
                ReferenceAdamStep(b.Tile(prec, true), c);
              }
              for (size_t i = 0; i < n; ++i) {
                ASSERT_EQ(Bits(a.p[i]), Bits(b.p[i])) << "n " << n << " i " << i << " threads " << threads;
                ASSERT_EQ(Bits(a.m[i]), Bits(b.m[i])) << i;
                ASSERT_EQ(Bits(a.v[i]), Bits(b.v[i])) << i;
                ASSERT_EQ(a.out[i], b.out[i]) << "copy-out " << i << " " << PrecisionName(prec);
              }
            }
    }
  hwy::SetSupportedTargetsForTest(0);
  SetCpuAdamPrefetch(AdamPrefetch::kAuto);
}

// The setting in effect follows what is forced. Under kAuto the first six
// large steps alternate with and without prefetch and then one is kept:
// the weights are the reference's bits through all of it.
TEST(CpuAdam, PrefetchSettingIsHonouredAndTuningKeepsTheBits) {
  SetCpuAdamPrefetch(AdamPrefetch::kOn);
  EXPECT_TRUE(CpuAdamPrefetching());
  SetCpuAdamPrefetch(AdamPrefetch::kOff);
  EXPECT_FALSE(CpuAdamPrefetching());
  SetCpuAdamPrefetch(AdamPrefetch::kAuto);
  const size_t n = (size_t{4} << 20) + 17;  // large enough to be a trial
  State a = MakeState(n, 7), b = MakeState(n, 7);
  bool kept = false;
  for (int step = 1; step <= 8; ++step) {
    const AdamStepConsts c = MakeAdamStep(AdamConfig{}, step, 1.0f / 1024.0f);
    CpuAdamStep(a.Tile(Precision::kBf16, true), c, step % 2 + 1);
    ReferenceAdamStep(b.Tile(Precision::kBf16, true), c);
    if (step == 7) kept = CpuAdamPrefetching();
  }
  EXPECT_EQ(CpuAdamPrefetching(), kept);  // decided after six, kept
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(Bits(a.p[i]), Bits(b.p[i])) << i;
    ASSERT_EQ(Bits(a.m[i]), Bits(b.m[i])) << i;
    ASSERT_EQ(Bits(a.v[i]), Bits(b.v[i])) << i;
    ASSERT_EQ(a.out[i], b.out[i]) << i;
  }
}

// The reference itself against a textbook double-precision Adam.
TEST(CpuAdam, ReferenceIsAdam) {
  AdamConfig cfg;
  cfg.lr = 0.1f;
  float p = 1.0f, m = 0, v = 0;
  double pd = 1.0, md = 0, vd = 0;
  for (int t = 1; t <= 5; ++t) {
    const float g = 0.5f * static_cast<float>(t);
    AdamElement(p, g, m, v, MakeAdamStep(cfg, t));
    md = 0.9 * md + 0.1 * g;
    vd = 0.999 * vd + 0.001 * g * g;
    const double mh = md / (1 - std::pow(0.9, t)), vh = vd / (1 - std::pow(0.999, t));
    pd -= 0.1 * mh / (std::sqrt(vh) + 1e-8);
  }
  EXPECT_NEAR(p, pd, 1e-5);
}

TEST(CpuAdam, HalfAndBf16RoundToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);                 // ties to even: overflow to inf
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);       // halfway, even stays
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);       // halfway, odd rounds up
  EXPECT_EQ(FloatToHalf(5.9604644775390625e-8f), 0x0001);   // smallest subnormal
  EXPECT_EQ(FloatToHalf(2.98023223876953125e-8f), 0x0000);  // half of it: ties to even (zero)
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(BitsFloat(0x3f808000u)), 0x3f80);  // tie, even
  EXPECT_EQ(FloatToBf16(BitsFloat(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  for (uint32_t h = 0; h < 0x7c00; ++h) EXPECT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h);
  // The vector conversion agrees everywhere on finite values, subnormals included.
  std::vector<float> vals;
  for (uint32_t u = 0x33000000u; u < 0x47800000u; u += 0x1f3u) vals.push_back(BitsFloat(u));
  const size_t n = vals.size();
  std::vector<float> zeros(n, 0.0f), ones(n, 1.0f);
  std::vector<uint16_t> out(n), ref(n);
  AdamStepConsts c = MakeAdamStep(AdamConfig{}, 1);
  c.step_size = 0;  // leave p unchanged: p - 0 * (m / denom)
  std::vector<float> p1 = vals, p2 = vals, m1 = zeros, m2 = zeros, v1 = ones, v2 = ones;
  CpuAdamStep({p1.data(), zeros.data(), m1.data(), v1.data(), out.data(), Precision::kFp16, n}, c);
  ReferenceAdamStep({p2.data(), zeros.data(), m2.data(), v2.data(), ref.data(), Precision::kFp16, n}, c);
  EXPECT_EQ(out, ref);
  EXPECT_NE(std::string(CpuAdamTarget()), "");
}

}  // namespace
}  // namespace strata::exec
