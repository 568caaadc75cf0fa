// The host backend's Linear layers on low-precision weights against the
// plain path they replace: widen to fp32, LinearForward / LinearBackward
// (mlp_kernels.h), add the fp32 gradient into the low-precision one. Bit for
// bit, on every SIMD target the build dispatches to, for shapes that cross
// the kernels' tile and chunk boundaries and end in partial vectors.
#include "../../executor/host/linear_low.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "../../executor/host/convert.h"
#include "../../executor/host/worker_pool.h"
#include "strata/executor/mlp_kernels.h"

namespace strata::exec {
namespace {

std::vector<float> Normal(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<std::byte> Low(const std::vector<float>& f, Precision p) {
  std::vector<std::byte> out(f.size() * BytesPerElement(p));
  FloatToLow(f.data(), out.data(), f.size(), p);
  return out;
}

std::vector<float> Wide(const std::vector<std::byte>& l, Precision p) {
  std::vector<float> out(l.size() / BytesPerElement(p));
  LowToFloat(l.data(), out.data(), out.size(), p);
  return out;
}

TEST(LinearLow, SameBitsAsWideningToFp32) {
  struct Shape {
    size_t batch, in, out;
  };
  // Rows of x 3 and 4 KiB apart (copied per chunk), more than a panel of
  // outputs, batches past a tile.
  const Shape shapes[] = {{1, 7, 3},    {4, 16, 5},    {3, 1000, 10}, {2, 2048, 2},
                          {5, 4099, 3}, {11, 768, 37}, {9, 1024, 70}, {17, 64, 65}};
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (Precision p : {Precision::kFp16, Precision::kBf16, Precision::kFp32})
      for (const Shape& s : shapes) {
        SCOPED_TRACE(std::string(PrecisionName(p)) + " batch " + std::to_string(s.batch) + " in " +
                     std::to_string(s.in) + " out " + std::to_string(s.out));
        const size_t nw = s.in * s.out;
        const auto wl = Low(Normal(nw + s.out, 1, 0.05f), p);  // W then b, as in a group
        const std::vector<float> wf = Wide(wl, p);
        const auto x = Normal(s.batch * s.in, 2, 1.0f);
        const auto dy = Normal(s.batch * s.out, 3, 0.01f);
        // Forward.
        std::vector<float> want(s.batch * s.out), got(s.batch * s.out);
        LinearForward(x.data(), wf.data(), wf.data() + nw, want.data(), s.batch, s.in, s.out);
        LinearForwardLow(x.data(), wl.data(), wl.data() + nw * BytesPerElement(p), got.data(), s.batch, s.in, s.out, p);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
        // Backward into a gradient that already holds a partial sum.
        const auto g0 = Low(Normal(nw + s.out, 4, 0.01f), p);
        std::vector<float> dw(nw + s.out, 0.0f), dx_want(s.batch * s.in), dx_got(s.batch * s.in, 1.0f);
        LinearBackward(x.data(), wf.data(), dy.data(), dx_want.data(), dw.data(), dw.data() + nw, s.batch, s.in, s.out);
        auto g_want = g0, g_got = g0;
        const bool of_want = AccumulateFloatsToLow(g_want.data(), dw.data(), dw.size(), p);
        const bool of_got = LinearBackwardLow(x.data(), wl.data(), dy.data(), dx_got.data(), g_got.data(),
                                              g_got.data() + nw * BytesPerElement(p), s.batch, s.in, s.out, p);
        EXPECT_EQ(of_got, of_want);
        ASSERT_EQ(0, std::memcmp(dx_want.data(), dx_got.data(), dx_want.size() * 4));
        ASSERT_EQ(g_want, g_got);
        // No input gradient asked for: the weight gradient is the same.
        auto g_nodx = g0;
        LinearBackwardLow(x.data(), wl.data(), dy.data(), nullptr, g_nodx.data(),
                          g_nodx.data() + nw * BytesPerElement(p), s.batch, s.in, s.out, p);
        ASSERT_EQ(g_want, g_nodx);
        // Overwriting a fresh buffer (garbage in it) gives what accumulating
        // onto zeros gives.
        std::vector<std::byte> g_zero(g0.size()), g_fresh(g0.size(), std::byte{0xa5});
        const bool of_zero = AccumulateFloatsToLow(g_zero.data(), dw.data(), dw.size(), p);
        const bool of_fresh = LinearBackwardLow(x.data(), wl.data(), dy.data(), nullptr, g_fresh.data(),
                                                g_fresh.data() + nw * BytesPerElement(p), s.batch, s.in, s.out, p,
                                                /*overwrite=*/true);
        EXPECT_EQ(of_fresh, of_zero);
        ASSERT_EQ(g_zero, g_fresh);
      }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Each output is one chain of fused multiply-adds in increasing index, in
// the reference and in the kernels on every target. The products
// -(1 + 2^-20)(1 + 2^-7) and (1 + 2^-20)(1 + 2^-7) cancel but for 2^-27,
// which one rounding of the second keeps: 2^-27 in that order, -2^-27 in
// the reverse one, 0 with separate multiplies and adds or in separate
// partial sums (the terms here are 25 apart, and zeros between them add
// nothing).
TEST(LinearLow, EachOutputIsOneFusedChainInOrder) {
  const float a = 1.0f + 0x1p-20f, b = 1.0f + 0x1p-7f, want = 0x1p-27f;
  const size_t in = 37, out = 3, batch = 2, k1 = 5, k2 = 30;
  std::vector<float> x(batch * in, 0.0f), wf(out * in + out, 0.0f), dy(batch * out, 0.0f);
  for (size_t i = 0; i < batch; ++i) {  // forward: x[i] . w[o] for each o
    x[i * in + k1] = -a;
    x[i * in + k2] = a;
  }
  for (size_t o = 0; o < out; ++o) wf[o * in + k1] = wf[o * in + k2] = b;
  // Backward: dx[i][k] sums dy[i][o] w[o][k] over o; rows 0 and 1 of W at
  // column k1 are b, so dy[i] = (-a, a, 0) leaves 2^-27 there.
  for (size_t i = 0; i < batch; ++i) {
    dy[i * out + 0] = -a;
    dy[i * out + 1] = a;
  }
  for (size_t k = 0; k < in; ++k) wf[0 * in + k] = wf[1 * in + k] = b;
  std::vector<float> want_y(batch * out), ref_dx(batch * in), ref_dw(out * in + out, 0.0f);
  LinearForward<float>(x.data(), wf.data(), nullptr, want_y.data(), batch, in, out);
  LinearBackward<float>(x.data(), wf.data(), dy.data(), ref_dx.data(), ref_dw.data(), nullptr, batch, in, out);
  ASSERT_EQ(ref_dx[k1], want);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
      SCOPED_TRACE(PrecisionName(p));
      const auto wl = Low(wf, p);  // b and 0 are exact in each
      std::vector<float> y(batch * out), dx(batch * in);
      LinearForwardLow(x.data(), wl.data(), nullptr, y.data(), batch, in, out, p);
      EXPECT_EQ(want_y[2], want);
      EXPECT_EQ(y[2], want);
      std::vector<std::byte> g(wl.size());
      LinearBackwardLow(x.data(), wl.data(), dy.data(), dx.data(), g.data(), nullptr, batch, in, out, p,
                        /*overwrite=*/true);
      for (size_t i = 0; i < batch; ++i) EXPECT_EQ(dx[i * in + k1], want) << "dx row " << i;
      ASSERT_EQ(0, std::memcmp(dx.data(), ref_dx.data(), dx.size() * 4));
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  // dW[o][k] sums over the batch: dy[:, 2] = (-b, b) against x[:, k2] =
  // (a, a) gives 2^-27 at dW[2][k2] (an fp32 gradient keeps it).
  std::vector<float> dy2(batch * out, 0.0f);
  dy2[0 * out + 2] = -b;
  dy2[1 * out + 2] = b;
  std::vector<float> dw_ref(out * in, 0.0f), dw(out * in, 0.0f);
  LinearBackward<float>(x.data(), wf.data(), dy2.data(), nullptr, dw_ref.data(), nullptr, batch, in, out);
  LinearBackwardLow(x.data(), wf.data(), dy2.data(), nullptr, dw.data(), nullptr, batch, in, out, Precision::kFp32);
  EXPECT_EQ(dw_ref[2 * in + k2], want);
  EXPECT_EQ(dw[2 * in + k2], want);
}

// Split among threads, the kernels give one thread's bits, for shapes large
// enough to be split in 2 and 3 parts with ragged ends: large weights (split
// by outputs forward, input columns backward) and small ones (split by batch
// rows forward; weight rows and batch rows backward), batches that are not
// whole blocks, rows that are padded.
TEST(LinearLow, ThreadsGiveTheSameBits) {
  const SplitThresholds saved = SetSplitThresholdsForTest({0, 0});  // split even small shapes
  struct Shape {
    size_t batch, in, out;
  };
  const Shape shapes[] = {{1, 2048, 300}, {3, 1000, 1001}, {2, 4099, 257},
                          {128, 64, 64},  {201, 30, 250},  {77, 100, 130}};
  WorkerPool pool2(2), pool3(3);
  for (Precision p : {Precision::kFp16, Precision::kBf16})
    for (const Shape& s : shapes) {
      SCOPED_TRACE(std::string(PrecisionName(p)) + " in " + std::to_string(s.in) + " out " + std::to_string(s.out));
      const size_t nw = s.in * s.out, eb = BytesPerElement(p);
      const auto wl = Low(Normal(nw + s.out, 5, 0.05f), p);
      const auto x = Normal(s.batch * s.in, 6, 1.0f);
      const auto dy = Normal(s.batch * s.out, 7, 0.01f);
      const auto g0 = Low(Normal(nw + s.out, 8, 0.01f), p);
      std::vector<float> y1(s.batch * s.out), dx1(s.batch * s.in);
      auto g1 = g0;
      LinearForwardLow(x.data(), wl.data(), wl.data() + nw * eb, y1.data(), s.batch, s.in, s.out, p);
      const bool of1 = LinearBackwardLow(x.data(), wl.data(), dy.data(), dx1.data(), g1.data(), g1.data() + nw * eb,
                                         s.batch, s.in, s.out, p);
      for (WorkerPool* pool : {&pool2, &pool3}) {
        std::vector<float> y(s.batch * s.out), dx(s.batch * s.in, 3.0f);
        auto g = g0;
        LinearForwardLow(x.data(), wl.data(), wl.data() + nw * eb, y.data(), s.batch, s.in, s.out, p, pool);
        const bool of = LinearBackwardLow(x.data(), wl.data(), dy.data(), dx.data(), g.data(), g.data() + nw * eb,
                                          s.batch, s.in, s.out, p, /*overwrite=*/false, pool);
        EXPECT_EQ(of, of1);
        ASSERT_EQ(0, std::memcmp(y.data(), y1.data(), y.size() * 4)) << pool->size() << " threads";
        ASSERT_EQ(0, std::memcmp(dx.data(), dx1.data(), dx.size() * 4)) << pool->size() << " threads";
        ASSERT_EQ(g, g1) << pool->size() << " threads";
      }
    }
  SetSplitThresholdsForTest(saved);
}

// The forward splits its outputs among threads by panels where y's rows
// meet the split on cache-line boundaries (y 64-byte aligned), else small
// weights by batch rows: the same bits as one thread at every float offset
// of y within a line, and nothing written outside y. Shapes split by
// panels (at offset 0) and by rows (out not a multiple of 16, one panel, a
// large batch).
TEST(LinearLow, ForwardSplitAtEveryAlignmentOfY) {
  struct Shape {
    size_t batch, in, out;
  };
  const Shape shapes[] = {{128, 64, 64}, {128, 64, 192}, {33, 40, 256}, {5, 300, 112}, {40, 64, 24}, {600, 20, 64}};
  WorkerPool pool2(2), pool3(3);
  const SplitThresholds saved = SetSplitThresholdsForTest({0, 0});
  const float guard = -7.0f;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (const Shape& s : shapes) {
      SCOPED_TRACE("batch " + std::to_string(s.batch) + " in " + std::to_string(s.in) + " out " +
                   std::to_string(s.out));
      const size_t nw = s.in * s.out;
      const auto wf = Normal(nw + s.out, 9, 0.05f);
      const auto x = Normal(s.batch * s.in, 10, 1.0f);
      std::vector<float> want(s.batch * s.out);
      LinearForwardLow(x.data(), wf.data(), wf.data() + nw, want.data(), s.batch, s.in, s.out, Precision::kFp32);
      // 64-byte aligned storage, y at each float offset in it.
      std::vector<float> store(s.batch * s.out + 64);
      float* base = store.data();
      while (reinterpret_cast<uintptr_t>(base) % 64 != 0) ++base;
      for (size_t off = 0; off < 16; ++off)
        for (WorkerPool* pool : {&pool2, &pool3}) {
          std::fill(store.begin(), store.end(), guard);
          float* y = base + off;
          LinearForwardLow(x.data(), wf.data(), wf.data() + nw, y, s.batch, s.in, s.out, Precision::kFp32, pool);
          ASSERT_EQ(0, std::memcmp(want.data(), y, want.size() * 4))
              << "offset " << off << ", " << pool->size() << " threads";
          for (float* q = store.data(); q < y; ++q) ASSERT_EQ(*q, guard) << "written before y";
          for (float* q = y + want.size(); q < store.data() + store.size(); ++q)
            ASSERT_EQ(*q, guard) << "written after y";
        }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  SetSplitThresholdsForTest(saved);
}

TEST(WorkerPool, RunsEveryPartOnceAndWaits) {
  WorkerPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int round = 0; round < 200; ++round) {
    const int parts = 1 + round % 3;
    std::vector<int> hits(3, 0);
    pool.Run(parts, [&](int j) { ++hits[static_cast<size_t>(j)]; });
    for (int j = 0; j < 3; ++j) ASSERT_EQ(hits[static_cast<size_t>(j)], j < parts ? 1 : 0) << "round " << round;
  }
  // Past the spin (50 us) both sides sleep: the workers before a Run that
  // comes late, the caller on a worker's long part; each must be woken.
  for (int round = 0; round < 6; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 2 == 0 ? 2 : 0));
    std::vector<std::atomic<int>> hits(3);
    pool.Run(3, [&hits, round](int j) {
      if (j == 1 + round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      hits[static_cast<size_t>(j)].fetch_add(1);
    });
    for (int j = 0; j < 3; ++j) ASSERT_EQ(hits[static_cast<size_t>(j)].load(), 1) << "slow round " << round;
  }
  // The part function is copied in by value: captures read by the workers
  // are the caller's values at the call.
  std::vector<size_t> got(3, 0);
  size_t* out = got.data();
  for (size_t base = 10; base < 13; ++base) {
    pool.Run(3, [out, base](int j) { out[j] = base * 100 + static_cast<size_t>(j); });
    for (size_t j = 0; j < 3; ++j) ASSERT_EQ(got[j], base * 100 + j);
  }
  WorkerPool inline_only(1);
  int calls = 0;
  inline_only.Run(1, [&](int) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(LinearLow, OverflowingGradientIsFlagged) {
  const size_t in = 40, out = 2, batch = 1;
  const auto wl = Low(std::vector<float>(in * out + out, 0.5f), Precision::kFp16);
  const std::vector<float> x(batch * in, 300.0f), dy(batch * out, 300.0f);  // 9e4 > fp16's 65504
  std::vector<std::byte> g(wl.size());
  EXPECT_TRUE(LinearBackwardLow(x.data(), wl.data(), dy.data(), nullptr, g.data(), g.data() + in * out * 2, batch, in,
                                out, Precision::kFp16));
  const std::vector<float> small(batch * in, 1.0f);
  std::vector<std::byte> g2(wl.size());
  EXPECT_FALSE(LinearBackwardLow(small.data(), wl.data(), small.data(), nullptr, g2.data(), g2.data() + in * out * 2,
                                 batch, in, out, Precision::kFp16));
}

}  // namespace
}  // namespace strata::exec
