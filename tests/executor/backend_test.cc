// The backend interface: the host backend's kernels against plain scalar
// references, and the interpreter driving a backend whose device memory the
// host cannot dereference (as on CUDA), with the same weights as the host.
#include "strata/executor/backend.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <sched.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "../../executor/host/convert.h"
#include "../../executor/host/low_precision.h"
#include "strata/executor/cpu_adam.h"
#include "strata/executor/runner.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata::exec {
namespace {

std::vector<uint16_t> Halves(const std::vector<float>& f, Precision p) {
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = p == Precision::kBf16 ? FloatToBf16(f[i]) : FloatToHalf(f[i]);
  return h;
}
float Widen(uint16_t h, Precision p) { return p == Precision::kBf16 ? Bf16ToFloat(h) : HalfToFloat(h); }

// Values that exercise every rounding path: random magnitudes over the whole
// fp16/bf16 ranges, halfway cases, subnormals, overflow, inf and NaN.
std::vector<float> Awkward(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v;
  for (float f : {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 65519.0f, -70000.0f, 6.0e-8f, 3.0e-8f, 2.98e-8f, 1e-40f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 3.4e38f, 1.00048828125f, 1.000732421875f})
    v.push_back(f);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<float> e(-30, 20);
  while (v.size() < n) {
    if (v.size() % 3 == 0) {
      uint32_t u = bits(rng);
      float f;
      std::memcpy(&f, &u, 4);
      v.push_back(f);
    } else {
      v.push_back((bits(rng) & 1 ? -1.0f : 1.0f) * std::exp2(e(rng)));
    }
  }
  return v;
}

bool SameBits(const std::vector<std::byte>& a, const std::vector<std::byte>& b) { return a == b; }

// Every SIMD target this build dispatches to (the machine's best and every
// lesser one it supports, e.g. SSE4 where F16C is missing), not only the best.
TEST(Convert, VectorKernelsGiveTheScalarResults) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (Precision p : {Precision::kFp16, Precision::kBf16, Precision::kFp32}) {
      const LowPrecision lp(p);
      for (size_t n : {size_t{1}, size_t{15}, size_t{64}, size_t{1001}}) {
        const std::vector<float> a = Awkward(n, 1 + static_cast<uint32_t>(n)), b = Awkward(n, 99);
        // FloatToLow
        std::vector<std::byte> want(n * lp.bytes), got(n * lp.bytes);
        for (size_t i = 0; i < n; ++i) lp.Store(want.data(), i, a[i]);
        FloatToLow(a.data(), got.data(), n, p);
        ASSERT_TRUE(SameBits(got, want)) << PrecisionName(p) << " n " << n;
        // LowToFloat
        std::vector<float> wf(n), gf(n);
        for (size_t i = 0; i < n; ++i) wf[i] = lp.Load(want.data(), i);
        LowToFloat(want.data(), gf.data(), n, p);
        ASSERT_EQ(0, std::memcmp(wf.data(), gf.data(), n * 4)) << PrecisionName(p);
        // AccumulateFloatsToLow and AccumulateLow
        std::vector<std::byte> src(n * lp.bytes);
        for (size_t i = 0; i < n; ++i) lp.Store(src.data(), i, b[i]);
        std::vector<std::byte> acc_f = want, acc_l = want, ref_f = want, ref_l = want;
        bool ref_of_f = false, ref_of_l = false;
        for (size_t i = 0; i < n; ++i) {
          lp.Store(ref_f.data(), i, lp.Load(ref_f.data(), i) + lp.Round(b[i]));
          ref_of_f |= !std::isfinite(lp.Load(ref_f.data(), i));
          lp.Store(ref_l.data(), i, lp.Load(ref_l.data(), i) + lp.Load(src.data(), i));
          ref_of_l |= !std::isfinite(lp.Load(ref_l.data(), i));
        }
        EXPECT_EQ(AccumulateFloatsToLow(acc_f.data(), b.data(), n, p), ref_of_f);
        // onto_zeros: what adding into zeros gives, dst unread.
        std::vector<std::byte> zeros(n * lp.bytes), stored(n * lp.bytes, std::byte{0x7b});
        const bool of_zeros = AccumulateFloatsToLow(zeros.data(), b.data(), n, p);
        EXPECT_EQ(AccumulateFloatsToLow(stored.data(), b.data(), n, p, /*onto_zeros=*/true), of_zeros);
        ASSERT_TRUE(SameBits(stored, zeros)) << PrecisionName(p) << " n " << n;
        EXPECT_EQ(AccumulateLow(acc_l.data(), src.data(), n, p), ref_of_l);
        ASSERT_TRUE(SameBits(acc_f, ref_f)) << PrecisionName(p) << " n " << n;
        ASSERT_TRUE(SameBits(acc_l, ref_l)) << PrecisionName(p) << " n " << n;
      }
    }
    // Finite inputs whose sum overflows are flagged (no inf in the inputs).
    std::vector<float> big(64, 40000.0f);
    std::vector<uint16_t> h(64, FloatToHalf(40000.0f));
    EXPECT_TRUE(AccumulateFloatsToLow(h.data(), big.data(), 64, Precision::kFp16));
    std::vector<float> small(64, 1.0f);
    std::vector<uint16_t> h2(64, FloatToHalf(1.0f));
    EXPECT_FALSE(AccumulateFloatsToLow(h2.data(), small.data(), 64, Precision::kFp16));
  }
  hwy::SetSupportedTargetsForTest(0);  // back to the machine's best
}

TEST(HostBackend, AccumulateRoundsEachSumAndFlagsOverflow) {
  auto be = NewHostBackend({});
  auto st = be->NewStream(Stream::kCompute);
  ASSERT_TRUE(st.ok());
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0, 100);
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    std::vector<float> a(1000), b(1000);
    for (size_t i = 0; i < a.size(); ++i) a[i] = d(rng), b[i] = d(rng);
    auto dst = Halves(a, p);
    const auto src = Halves(b, p);
    bool overflow = false;
    ASSERT_TRUE((*st)->Accumulate(dst.data(), src.data(), dst.size(), p, &overflow).ok());
    auto ev = (*st)->Record();
    ASSERT_TRUE(ev.ok() && (*ev)->Synchronize().ok());
    EXPECT_FALSE(overflow);
    for (size_t i = 0; i < a.size(); ++i) {
      const float want = Widen(Halves({Widen(Halves({a[i]}, p)[0], p) + Widen(src[i], p)}, p)[0], p);
      ASSERT_EQ(Widen(dst[i], p), want) << i;
    }
  }
  std::vector<uint16_t> big = Halves({60000.0f}, Precision::kFp16);
  bool overflow = false;
  ASSERT_TRUE((*st)->Accumulate(big.data(), big.data(), 1, Precision::kFp16, &overflow).ok());
  EXPECT_TRUE(overflow);
  EXPECT_TRUE(std::isinf(HalfToFloat(big[0])));
}

TEST(HostBackend, AdamStepMatchesTheScalarReference) {
  auto be = NewHostBackend({nullptr, 2, 2});
  auto st = be->NewStream(Stream::kCpuOptim);
  ASSERT_TRUE(st.ok());
  const size_t n = 4099;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> w(n), m(n), v(n), g(n);
  for (size_t i = 0; i < n; ++i) w[i] = d(rng), m[i] = 0.1f * d(rng), v[i] = std::abs(d(rng)), g[i] = d(rng);
  const AdamStepConsts c = MakeAdamStep(AdamConfig{}, 3, 1.0f / 8);
  const std::vector<uint16_t> g16 = Halves(g, Precision::kBf16);
  std::vector<float> gw(n);
  for (size_t i = 0; i < n; ++i) gw[i] = Bf16ToFloat(g16[i]);
  std::vector<float> rw = w, rm = m, rv = v;
  std::vector<uint16_t> rout(n), out(n);
  ReferenceAdamStep({rw.data(), gw.data(), rm.data(), rv.data(), rout.data(), Precision::kBf16, n}, c);
  ASSERT_TRUE((*st)->AdamStep({w.data(), g16.data(), m.data(), v.data(), out.data(), Precision::kBf16, n}, c).ok());
  ASSERT_TRUE((*(*st)->Record())->Synchronize().ok());
  EXPECT_EQ(0, std::memcmp(w.data(), rw.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(m.data(), rm.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(v.data(), rv.data(), n * 4));
  EXPECT_EQ(out, rout);
}

TEST(HostBackend, MemoryIsZeroedAlignedAndReleased) {
  auto be = NewHostBackend({});
  for (Tier t : {Tier::kGpu, Tier::kCpu}) {
    auto m = be->Allocate(t, 10'001);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % 4096, 0u);
    for (size_t i = 0; i < m->size(); ++i) ASSERT_EQ(m->data()[i], std::byte{0});
    Memory moved = std::move(*m);
    EXPECT_EQ(moved.size(), 10'001u);
    EXPECT_EQ(m->data(), nullptr);
  }
  EXPECT_FALSE(be->Allocate(Tier::kNvme, 16).ok());
}

// A large block (zeroed lazily: a fresh mapping, or its pages dropped when
// the cached block is handed out again) reads as zeros both times, also
// where the last user wrote; unzeroed, the cached block keeps its bytes.
TEST(HostBackend, LargeBlocksAreZeroedAgainWhenReused) {
  auto be = NewHostBackend({});
  const size_t n = (size_t{64} << 20) + 12'345;
  auto zero_at = [](const Memory& m) {
    for (size_t i : {size_t{0}, size_t{4095}, m.size() / 2, m.size() - 1})
      if (m.data()[i] != std::byte{0}) return false;
    return true;
  };
  std::byte* first = nullptr;
  {
    auto m = be->Allocate(Tier::kGpu, n);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % 4096, 0u);
    EXPECT_TRUE(zero_at(*m));
    std::memset(m->data(), 0x5a, m->size());
    first = m->data();
  }
  {
    auto m = be->Allocate(Tier::kGpu, n);  // the cached block, zeroed again
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->data(), first);
    EXPECT_TRUE(zero_at(*m));
    for (size_t i = 0; i < m->size(); i += 4096) ASSERT_EQ(m->data()[i], std::byte{0}) << i;
    m->data()[n - 1] = std::byte{0x33};
  }
  auto m = be->Allocate(Tier::kGpu, n, /*zeroed=*/false);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->data()[n - 1], std::byte{0x33});
}

// The threads of the host device's CPU work are batch threads (they do not
// preempt the NVMe and MPI workers that wake them); those of the streams
// that wait on the disk or on peers keep the policy they started with.
TEST(HostBackend, DeviceWorkThreadsAreCpuBound) {
  auto be = NewHostBackend({});
  const int inherited = sched_getscheduler(0);  // what a new thread starts with
  for (Stream kind : {Stream::kCompute, Stream::kH2D, Stream::kD2H, Stream::kCpuOptim, Stream::kNvmeRead,
                      Stream::kNvmeWrite, Stream::kComm}) {
    auto st = be->NewStream(kind);
    ASSERT_TRUE(st.ok());
    int policy = -1;
    std::thread t([&] {
      (*st)->OnWorkerThread();
      policy = sched_getscheduler(0);
    });
    t.join();
    const bool cpu = kind != Stream::kNvmeRead && kind != Stream::kNvmeWrite && kind != Stream::kComm;
    EXPECT_EQ(policy, cpu ? SCHED_BATCH : inherited) << StreamName(kind);
  }
}

// The opaque backend's device addresses really fault when dereferenced, so
// the run below would crash if the interpreter touched device memory.
TEST(OpaqueBackendDeathTest, DeviceAddressesFaultOnTheHost) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto host = NewHostBackend({});
  auto be = NewOpaqueDeviceBackend(host.get());
  EXPECT_FALSE(be->HostAccessible(Tier::kGpu));
  EXPECT_TRUE(be->HostAccessible(Tier::kCpu));
  auto m = be->Allocate(Tier::kGpu, 64);
  ASSERT_TRUE(m.ok());
  volatile std::byte* p = m->data();
  EXPECT_DEATH({ (void)*p; }, "");
}

Result<std::string> Digest(const Scenario& s, Backend* backend) {
  STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s));
  auto env = NewMemEnv();
  RunOptions o;
  o.steps = 2;
  o.env = env.get();
  o.backend = backend;
  o.nvme_dir = "/mem/nvme";
  STRATA_ASSIGN_OR_RETURN(auto r, RunTraining(plan, o));
  return r.weights_digest;
}

TEST(OpaqueBackend, InterpreterReachesDeviceMemoryOnlyThroughTheBackend) {
  auto host = NewHostBackend({});
  auto opaque = NewOpaqueDeviceBackend(host.get());
  struct Case {
    const char* scenario;
    int stage;
    OffloadDevice param, optim;
  };
  for (const Case& c : {Case{"seed", 0, OffloadDevice::kNone, OffloadDevice::kNone},
                        Case{"seed", 2, OffloadDevice::kNone, OffloadDevice::kCpu},
                        Case{"seed", 3, OffloadDevice::kNvme, OffloadDevice::kNvme},
                        Case{"seed", 3, OffloadDevice::kCpu, OffloadDevice::kNone},
                        Case{"gpt-tiny", 3, OffloadDevice::kNvme, OffloadDevice::kCpu}}) {
    Scenario s = testing::Builtin(c.scenario);
    s.zero.stage = c.stage;
    s.zero.offload_param.device = c.param;
    s.zero.offload_optimizer.device = c.optim;
    s.training.gradient_accumulation_steps = 2;
    ASSERT_TRUE(CheckScenario(s).empty()) << c.scenario << " stage " << c.stage;
    auto want = Digest(s, host.get());
    auto got = Digest(s, opaque.get());
    ASSERT_TRUE(want.ok()) << want.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, *want) << c.scenario << " stage " << c.stage;
  }
}

}  // namespace
}  // namespace strata::exec
