// The device model (issue #17): model_math.h's per-thread functions, which
// the CUDA kernels run, against the plain references (mlp_kernels.h, the
// host's conversions), bit for bit where they perform the same operations
// in the same order; and the device model's whole logic on the host's
// emulation of its kernels (--backend emulated): the MLP and the GPT train,
// deterministically, and agree with the host workloads within the rounding
// of the device's mixed precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../../executor/devmodel/model_kernels.h"
#include "../../executor/host/convert.h"
#include "random_vectors.h"
#include "strata/executor/env.h"
#include "strata/executor/mlp_kernels.h"
#include "strata/executor/model_math.h"
#include "strata/executor/runner.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata::exec {
namespace {

using testing::Normal;
uint32_t Bits(float f) { return FloatBits(f); }

TEST(ModelMath, SoftmaxXentRowsAreTheReferenceBitForBit) {
  const size_t batch = 5, classes = 37;
  std::vector<float> z = Normal(batch * classes, 1, 3.0f);
  std::vector<int32_t> labels = {0, 36, 7, 7, 20};
  std::vector<float> ref(batch * classes), got(batch * classes);
  const float ref_loss = SoftmaxCrossEntropy<float>(z.data(), labels.data(), ref.data(), batch, classes, 1024.0f);
  std::vector<uint16_t> low(batch * classes);
  float sum = 0.0f;
  for (size_t r = 0; r < batch; ++r)
    sum += dm::SoftmaxXentRow(z.data(), labels.data(), got.data(), low.data(), dm::kFp16, batch, classes, 1024.0f, r);
  EXPECT_EQ(Bits(sum / static_cast<float>(batch)), Bits(ref_loss));
  std::vector<uint16_t> ref_low(batch * classes);
  FloatToLow(ref.data(), ref_low.data(), ref.size(), Precision::kFp16);
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(Bits(got[i]), Bits(ref[i])) << i;
    ASSERT_EQ(low[i], ref_low[i]) << i;
  }
}

TEST(ModelMath, BiasReluAndColumnSumsAreTheLinearReference) {
  const size_t batch = 6, in = 19, out = 11;
  std::vector<float> x = Normal(batch * in, 2), w = Normal(out * in, 3), b = Normal(out, 4);
  // y without its bias (a GEMM's output), then the bias and ReLU per element.
  std::vector<float> y(batch * out), ref(batch * out);
  LinearForward<float>(x.data(), w.data(), nullptr, y.data(), batch, in, out);
  LinearForward<float>(x.data(), w.data(), b.data(), ref.data(), batch, in, out);
  ReluForward(ref.data(), ref.size());
  std::vector<float> low(batch * out);
  for (size_t i = 0; i < y.size(); ++i) dm::BiasActElement(y.data(), low.data(), b.data(), dm::kFp32, out, true, i);
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(Bits(y[i]), Bits(ref[i])) << i;
    ASSERT_EQ(Bits(low[i]), Bits(ref[i])) << i;
  }
  // The bias's gradient: LinearBackward adds dy row by row.
  std::vector<float> dy = Normal(batch * out, 5), dw(out * in, 0.0f), db(out, 0.0f);
  LinearBackward<float>(x.data(), w.data(), dy.data(), nullptr, dw.data(), db.data(), batch, in, out);
  for (size_t c = 0; c < out; ++c) EXPECT_EQ(Bits(dm::ColumnSum(dy.data(), batch, out, c)), Bits(db[c])) << c;
  // ReLU backward masks by the output.
  std::vector<float> g = Normal(batch * out, 6), gref = g;
  ReluBackward(ref.data(), gref.data(), gref.size());
  for (size_t i = 0; i < g.size(); ++i) dm::ReluBackwardElement(ref.data(), g.data(), nullptr, dm::kFp32, i);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(Bits(g[i]), Bits(gref[i])) << i;
}

// The three GEMMs of a Linear layer in BLAS's column-major convention, as
// the device model calls them, against double-precision references.
TEST(ModelMath, GemmElementComputesTheLinearLayersProducts) {
  const size_t batch = 5, in = 13, out = 7;
  std::vector<float> x = Normal(batch * in, 7), w = Normal(out * in, 8), dy = Normal(batch * out, 9);
  std::vector<float> y(batch * out), dw(in * out), dx(batch * in);
  for (size_t j = 0; j < batch; ++j)
    for (size_t i = 0; i < out; ++i)
      dm::GemmElement(true, false, in, w.data(), in, x.data(), in, y.data(), out, dm::kFp32, false, i, j);
  for (size_t j = 0; j < out; ++j)
    for (size_t i = 0; i < in; ++i)
      dm::GemmElement(false, true, batch, x.data(), in, dy.data(), out, dw.data(), in, dm::kFp32, false, i, j);
  for (size_t j = 0; j < batch; ++j)
    for (size_t i = 0; i < in; ++i)
      dm::GemmElement(false, false, out, w.data(), in, dy.data(), out, dx.data(), in, dm::kFp32, false, i, j);
  for (size_t r = 0; r < batch; ++r)
    for (size_t o = 0; o < out; ++o) {
      double s = 0;
      for (size_t k = 0; k < in; ++k) s += double(x[r * in + k]) * w[o * in + k];
      EXPECT_NEAR(y[r * out + o], s, 1e-5 * (1 + std::abs(s)));
    }
  for (size_t o = 0; o < out; ++o)
    for (size_t k = 0; k < in; ++k) {
      double s = 0;
      for (size_t r = 0; r < batch; ++r) s += double(dy[r * out + o]) * x[r * in + k];
      EXPECT_NEAR(dw[o * in + k], s, 1e-5 * (1 + std::abs(s)));
    }
  for (size_t r = 0; r < batch; ++r)
    for (size_t k = 0; k < in; ++k) {
      double s = 0;
      for (size_t o = 0; o < out; ++o) s += double(dy[r * out + o]) * w[o * in + k];
      EXPECT_NEAR(dx[r * in + k], s, 1e-5 * (1 + std::abs(s)));
    }
  // Accumulate adds onto C; 16-bit operands are widened exactly.
  std::vector<uint16_t> wl(w.size()), xl(x.size());
  FloatToLow(w.data(), wl.data(), w.size(), Precision::kBf16);
  FloatToLow(x.data(), xl.data(), x.size(), Precision::kBf16);
  std::vector<float> wr(w.size()), xr(x.size());
  LowToFloat(wl.data(), wr.data(), w.size(), Precision::kBf16);
  LowToFloat(xl.data(), xr.data(), x.size(), Precision::kBf16);
  std::vector<float> c1(batch * out, 0.5f), c2(batch * out, 0.0f);
  for (size_t j = 0; j < batch; ++j)
    for (size_t i = 0; i < out; ++i) {
      dm::GemmElement(true, false, in, wl.data(), in, xl.data(), in, c1.data(), out, dm::kBf16, true, i, j);
      dm::GemmElement(true, false, in, wr.data(), in, xr.data(), in, c2.data(), out, dm::kFp32, false, i, j);
    }
  for (size_t i = 0; i < c1.size(); ++i) EXPECT_EQ(Bits(c1[i]), Bits(0.5f + c2[i])) << i;
}

// The host emulation's GEMM (widened operands, DotInOrder) is
// GemmElement's, bit for bit, in every transpose, format and mode.
TEST(ModelMath, EmulatedGemmIsGemmElementBitForBit) {
  const size_t m = 7, n = 5, k = 11, ld = 13;  // ld > every dimension: strided operands
  auto kernels = NewEmulatedKernels(nullptr);  // Gemm touches no backend memory
  for (int fmt : {dm::kFp16, dm::kBf16, dm::kFp32})
    for (int mode = 0; mode < 8; ++mode) {
      const bool ta = mode & 1, tb = mode & 2, acc = mode & 4;
      std::vector<float> af = Normal(ld * ld, 20 + mode, 3.0f), bf = Normal(ld * ld, 30 + mode, 3.0f);
      std::vector<uint16_t> al(af.size()), bl(bf.size());
      const void *a = af.data(), *b = bf.data();
      if (fmt != dm::kFp32) {
        FloatToLow(af.data(), al.data(), af.size(), static_cast<Precision>(fmt));
        FloatToLow(bf.data(), bl.data(), bf.size(), static_cast<Precision>(fmt));
        a = al.data(), b = bl.data();
      }
      std::vector<float> got = Normal(ld * n, 40 + mode), want = got;
      ASSERT_TRUE(kernels->Gemm(ta, tb, m, n, k, a, ld, b, ld, got.data(), ld, fmt, acc).ok());
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < m; ++i) dm::GemmElement(ta, tb, k, a, ld, b, ld, want.data(), ld, fmt, acc, i, j);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(Bits(got[i]), Bits(want[i])) << fmt << " " << mode << " " << i;
    }
}

TEST(ModelMath, GradientsAddAsTheHostsAccumulation) {
  std::vector<float> src = Normal(64, 10, 100.0f);
  src[3] = 1e30f;  // overflows fp16 and bf16? fp16 only
  src[5] = -0.0f;  // fresh: -0 onto +0 gives +0
  src[7] = 3e38f;  // bf16 rounds to inf
  for (Precision p : {Precision::kFp16, Precision::kBf16, Precision::kFp32}) {
    const int fmt = static_cast<int>(p);
    const size_t eb = static_cast<size_t>(BytesPerElement(p));
    for (bool fresh : {false, true}) {
      std::vector<float> start = Normal(64, 11, 10.0f);
      std::vector<std::byte> ref(64 * eb), got(64 * eb);
      if (p == Precision::kFp32)
        std::memcpy(ref.data(), start.data(), ref.size());
      else
        FloatToLow(start.data(), ref.data(), 64, p);
      got = ref;
      const bool ref_overflow = AccumulateFloatsToLow(ref.data(), src.data(), 64, p, fresh);
      bool overflow = false;
      for (size_t i = 0; i < 64; ++i) overflow |= !dm::Finite(dm::AddToGrad(got.data(), i, src[i], fmt, fresh));
      EXPECT_EQ(got, ref) << "precision " << fmt << " fresh " << fresh;
      EXPECT_EQ(overflow, ref_overflow) << "precision " << fmt << " fresh " << fresh;
    }
  }
}

// A builtin scenario's run with the states placed as given (or everything
// on the GPU), in precision p, on backend `kind`.
Result<RunResult> Run(const char* builtin, BackendKind kind, Precision p, int steps, int stage = 0,
                      OffloadDevice place = OffloadDevice::kNone, bool checkpointing = false) {
  Scenario s = testing::Builtin(builtin);
  s.training.precision = p;
  s.training.activation_checkpointing = checkpointing;
  s.zero.stage = stage;
  s.zero.offload_param.device = place;
  s.zero.offload_optimizer.device = place;
  s.hardware.gpu.memory = Bytes(8LL << 30);
  STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s));
  auto env = NewMemEnv();
  RunOptions o;
  o.steps = steps;
  o.env = env.get();
  o.backend_kind = kind;
  o.nvme_dir = "/mem/nvme";
  return RunTraining(plan, o);
}
Result<RunResult> RunSeed(BackendKind kind, Precision p, int steps) { return Run("seed", kind, p, steps); }
Result<RunResult> RunGpt(BackendKind kind, Precision p, int steps, bool checkpointing = false) {
  return Run("gpt-tiny", kind, p, steps, 0, OffloadDevice::kNone, checkpointing);
}

TEST(DeviceModel, TrainsTheMlpAsTheHostWorkloadDoesWithinItsRounding) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    auto dev = RunSeed(BackendKind::kEmulated, p, 6);
    auto host = RunSeed(BackendKind::kHost, p, 6);
    ASSERT_TRUE(dev.ok()) << dev.status().message();
    ASSERT_TRUE(host.ok()) << host.status().message();
    ASSERT_EQ(dev->losses.size(), 6u);
    // The same model, weights and samples; the device rounds activations to
    // the precision for its GEMMs (the host keeps them in fp32) and sums in
    // another order: the losses agree to that rounding.
    const double tol = p == Precision::kFp32 ? 1e-5 : 2e-2;
    for (size_t i = 0; i < dev->losses.size(); ++i)
      EXPECT_NEAR(dev->losses[i], host->losses[i], tol * std::abs(host->losses[i]))
          << "step " << i << " precision " << static_cast<int>(p);
    EXPECT_LT(dev->losses.back(), dev->losses.front());
    if (p == Precision::kFp32) {
      EXPECT_NE(dev->weights_digest, host->weights_digest);  // its own sums, not a copy
    }
    // Deterministic: the same bits again.
    auto again = RunSeed(BackendKind::kEmulated, p, 6);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->weights_digest, dev->weights_digest);
  }
}

// The GPT on the device model: the host workload's losses to the rounding
// of the device's mixed precision (measured over 10 steps: fp32 9.0e-8,
// bf16 2.6e-5), the same bits twice, and with activation checkpointing
// (the recompute rebuilds the dropped activations bit for bit).
TEST(DeviceModel, TrainsTheGptAsTheHostWorkloadDoesWithinItsRounding) {
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    auto dev = RunGpt(BackendKind::kEmulated, p, 4);
    auto host = RunGpt(BackendKind::kHost, p, 4);
    ASSERT_TRUE(dev.ok()) << dev.status().message();
    ASSERT_TRUE(host.ok()) << host.status().message();
    ASSERT_EQ(dev->losses.size(), 4u);
    ASSERT_EQ(host->losses.size(), 4u);
    const double tol = p == Precision::kFp32 ? 1e-6 : 1e-3;
    for (size_t i = 0; i < dev->losses.size(); ++i)
      EXPECT_NEAR(dev->losses[i], host->losses[i], tol * host->losses[i]) << "step " << i;
    EXPECT_LT(dev->losses.back(), dev->losses.front());
    auto again = RunGpt(BackendKind::kEmulated, p, 4);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->weights_digest, dev->weights_digest);
    if (p == Precision::kBf16) {
      auto ckpt = RunGpt(BackendKind::kEmulated, p, 4, /*checkpointing=*/true);
      ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
      EXPECT_EQ(ckpt->weights_digest, dev->weights_digest);
    }
  }
}

}  // namespace
}  // namespace strata::exec
