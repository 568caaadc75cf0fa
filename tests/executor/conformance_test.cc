// The backend conformance suite (issue #17): what backend.h promises, checked
// through the interface alone, for every backend. Memory is only reached by
// stream copies to and from host vectors, so the suite runs unchanged on a
// backend whose device memory the host cannot address: the host backend,
// the opaque-device wrapper, the host backend with the device model on
// emulated kernels (devmodel/), and the CUDA backend where there is a device
// (skipped with the reason otherwise: no driver, no GPU, or a build
// without it).
//  - copies between every tier and the host, zeroing;
//  - accumulation rounded to the precision, overflow flagged;
//  - conversions to and from fp32;
//  - the collectives on one rank (the contract's sum over ranks, divided by
//    the ranks, rounded; accumulate adds);
//  - the Adam step bit for bit against the scalar reference (adam_math.h);
//  - a short training run: every placement of the states gives one digest.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "../../executor/devmodel/device_model.h"
#include "../../executor/host/convert.h"
#include "random_vectors.h"
#include "strata/executor/backend.h"
#include "strata/executor/cpu_adam.h"
#include "strata/executor/env.h"
#include "strata/executor/runner.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata::exec {
namespace {

// A backend under test, with whatever it wraps kept alive.
struct Under {
  std::unique_ptr<Backend> base, backend;
  std::string skip;  // why it cannot run here ("" when it can)
};
Under Make(const std::string& name) {
  Under u;
  if (name == "host") {
    u.backend = NewHostBackend({});
  } else if (name == "opaque") {
    u.base = NewHostBackend({});
    u.backend = NewOpaqueDeviceBackend(u.base.get());
  } else if (name == "emulated") {
    u.base = NewHostBackend({});
    u.backend = NewEmulatedDeviceBackend(u.base.get());
  } else if (name == "cuda") {
    // Skipped only where there is no device (or no backend in the build);
    // any other failure to make it is a failure.
    auto b = NewCudaBackend({});
    if (b.ok())
      u.backend = std::move(*b);
    else if (b.status().message().rfind("no CUDA device", 0) == 0)
      u.skip = b.status().message();
    else
      ADD_FAILURE() << "NewCudaBackend: " << b.status().message();
  }
  return u;
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    u_ = Make(GetParam());
    if (!u_.skip.empty()) GTEST_SKIP() << u_.skip;
    ASSERT_NE(u_.backend, nullptr) << GetParam();
    auto st = be().NewStream(Stream::kCompute);
    ASSERT_TRUE(st.ok()) << st.status().message();
    st_ = std::move(*st);
  }
  Backend& be() { return *u_.backend; }
  void Sync() {
    auto ev = st_->Record();
    ASSERT_TRUE(ev.ok()) << ev.status().message();
    ASSERT_TRUE((*ev)->Synchronize().ok());
  }
  // A block of tier t holding `bytes` (copied in from the host).
  template <typename T>
  Memory Put(Tier t, const std::vector<T>& v) {
    auto m = be().Allocate(t, v.size() * sizeof(T));
    if (!m.ok()) {
      ADD_FAILURE() << m.status().message();
      return Memory();
    }
    EXPECT_TRUE(st_->Copy(m->data(), v.data(), v.size() * sizeof(T)).ok());
    Sync();
    return std::move(*m);
  }
  template <typename T>
  std::vector<T> Get(const Memory& m, size_t n) {
    std::vector<T> v(n);
    EXPECT_TRUE(st_->Copy(v.data(), m.data(), n * sizeof(T)).ok());
    Sync();
    return v;
  }

  Under u_;
  std::unique_ptr<DeviceStream> st_;
};

using testing::Normal;
std::vector<uint16_t> Low(const std::vector<float>& f, Precision p) {
  std::vector<uint16_t> h(f.size());
  FloatToLow(f.data(), h.data(), f.size(), p);
  return h;
}
float Widen(uint16_t h, Precision p) {
  float f;
  LowToFloat(&h, &f, 1, p);
  return f;
}

// Pageable CPU memory (a plan buffer with pin_memory off): zeroed, host
// addressable, copied to and from the GPU tier like pinned memory.
TEST_P(Conformance, PageableMemoryCopiesToAndFromTheGpu) {
  const std::vector<float> v = Normal(4099, 3);
  auto pageable = be().AllocatePageable(v.size() * 4, /*zeroed=*/true);
  ASSERT_TRUE(pageable.ok()) << pageable.status().message();
  ASSERT_TRUE(be().HostAccessible(pageable->tier()));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pageable->data()) % 4096, 0u);  // O_DIRECT's alignment
  const float* f = reinterpret_cast<const float*>(pageable->data());
  EXPECT_EQ(std::vector<float>(f, f + v.size()), std::vector<float>(v.size(), 0.0f));
  std::memcpy(pageable->data(), v.data(), v.size() * 4);
  auto gpu = be().Allocate(Tier::kGpu, v.size() * 4, /*zeroed=*/false);
  ASSERT_TRUE(gpu.ok());
  ASSERT_TRUE(st_->Copy(gpu->data(), pageable->data(), v.size() * 4).ok());
  Sync();
  std::memset(pageable->data(), 0, v.size() * 4);
  ASSERT_TRUE(st_->Copy(pageable->data(), gpu->data(), v.size() * 4).ok());
  Sync();
  EXPECT_EQ(std::vector<float>(f, f + v.size()), v);
}

// Pageable memory that cannot be had is an error that says whose, how much
// and errno's text (ENOMEM), after the backend has given its cached blocks
// back; never a crash. 2^62 bytes: no host has them.
TEST_P(Conformance, PageableMemoryThatCannotBeHadSaysWhoAndWhy) {
  if (std::getenv("STRATA_SANITIZED") != nullptr)
    GTEST_SKIP() << "a sanitizer's allocator aborts on an impossible size instead of failing it";
  const size_t n = size_t{1} << 62;
  auto m = be().AllocatePageable(n, /*zeroed=*/false);
  ASSERT_FALSE(m.ok());
  const std::string& msg = m.status().message();
  const std::string who = GetParam() == std::string("cuda") ? "cuda backend: " : "host backend: ";
  EXPECT_EQ(msg.rfind(who, 0), 0u) << msg;
  EXPECT_NE(msg.find(std::to_string(n) + " bytes of pageable memory: " + std::strerror(ENOMEM)), std::string::npos)
      << msg;
}

// Pageable memory is PyTorch's CPU memory: a block of 32 MiB or more is a
// new mapping every time (scheduler FreshPageBytes), whose pages fault in
// when first touched, as the simulator charges them, never a cached block.
// At least one fault per 2 MiB (a host with transparent huge pages always
// on maps those); a pooled block would fault none. glibc's malloc: another
// allocator preloaded may keep freed blocks mapped.
TEST_P(Conformance, PageableBlocksOf32MiBAreFreshEveryTime) {
  if (std::getenv("STRATA_SANITIZED") != nullptr) GTEST_SKIP() << "page faults are not the program's under a sanitizer";
  if (std::getenv("LD_PRELOAD") != nullptr) GTEST_SKIP() << "a preloaded allocator may reuse freed mappings";
  const size_t n = size_t{64} << 20;
  auto minor_faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<long>(u.ru_minflt);
  };
  for (int k = 0; k < 2; ++k) {
    const long before = minor_faults();
    auto m = be().AllocatePageable(n, /*zeroed=*/true);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const long faults = minor_faults() - before;
    EXPECT_GE(faults, static_cast<long>(n >> 21)) << "allocation " << k << ": " << faults << " minor faults";
  }
}

// A device reports its memory (the context already holds some); backends
// without a device say so. (What is free is the whole device's: other
// test processes change it, so it is not compared across calls.)
TEST_P(Conformance, GpuMemoryIsTheDevicesOrNone) {
  auto m = be().GpuMemory();
  if (GetParam() != std::string("cuda")) {
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("no device memory"), std::string::npos) << m.status().message();
    return;
  }
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_GT(m->total, m->free);
  auto again = be().GpuMemory();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->total, m->total);
}

TEST_P(Conformance, CopiesBetweenEveryTierAndTheHostAndZeroes) {
  const std::vector<float> v = Normal(10'001, 1);
  for (Tier from : {Tier::kGpu, Tier::kCpu})
    for (Tier to : {Tier::kGpu, Tier::kCpu}) {
      Memory a = Put(from, v);
      auto b = be().Allocate(to, v.size() * 4, /*zeroed=*/false);
      ASSERT_TRUE(b.ok());
      ASSERT_TRUE(st_->Copy(b->data(), a.data(), v.size() * 4).ok());
      Sync();
      EXPECT_EQ(Get<float>(*b, v.size()), v) << TierName(from) << " -> " << TierName(to);
      // Zero a middle range; the rest stays.
      ASSERT_TRUE(st_->Zero(b->data() + 400, 4000).ok());
      Sync();
      std::vector<float> want = v;
      std::fill(want.begin() + 100, want.begin() + 1100, 0.0f);
      EXPECT_EQ(Get<float>(*b, v.size()), want);
    }
  // Zeroed by default, also memory used before (the host backend's cache
  // hands the same block back).
  for (int round = 0; round < 2; ++round) {
    auto dirty = be().Allocate(Tier::kGpu, 4096, /*zeroed=*/false);
    ASSERT_TRUE(dirty.ok());
    const std::vector<float> junk(1024, 7.0f);
    ASSERT_TRUE(st_->Copy(dirty->data(), junk.data(), 4096).ok());
    Sync();
  }
  auto z = be().Allocate(Tier::kGpu, 4096);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(Get<float>(*z, 1024), std::vector<float>(1024, 0.0f));
}

TEST_P(Conformance, AccumulateRoundsEachSumAndFlagsOverflow) {
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    const auto a = Low(Normal(1000, 2, 100), p), b = Low(Normal(1000, 3, 100), p);
    Memory dst = Put(Tier::kGpu, a), src = Put(Tier::kGpu, b);
    bool overflow = false;
    ASSERT_TRUE(st_->Accumulate(dst.data(), src.data(), a.size(), p, &overflow).ok());
    Sync();
    EXPECT_FALSE(overflow);
    const auto got = Get<uint16_t>(dst, a.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(got[i], Low({Widen(a[i], p) + Widen(b[i], p)}, p)[0]) << PrecisionName(p) << " " << i;
  }
  const auto a = Normal(257, 4), b = Normal(257, 5);
  Memory dst = Put(Tier::kCpu, a), src = Put(Tier::kGpu, b);
  bool overflow = false;
  ASSERT_TRUE(st_->Accumulate(dst.data(), src.data(), a.size(), Precision::kFp32, &overflow).ok());
  Sync();
  const auto got = Get<float>(dst, a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(got[i], a[i] + b[i]) << i;
  Memory big = Put(Tier::kGpu, Low({60000.0f}, Precision::kFp16));
  ASSERT_TRUE(st_->Accumulate(big.data(), big.data(), 1, Precision::kFp16, &overflow).ok());
  Sync();
  EXPECT_TRUE(overflow);
  EXPECT_TRUE(std::isinf(Widen(Get<uint16_t>(big, 1)[0], Precision::kFp16)));
}

TEST_P(Conformance, ConvertsToAndFromFloat) {
  const auto f = Normal(3001, 6, 1000);
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    Memory src = Put(Tier::kGpu, f);
    auto low = be().Allocate(Tier::kGpu, f.size() * 2, false);
    auto back = be().Allocate(Tier::kCpu, f.size() * 4, false);
    ASSERT_TRUE(low.ok() && back.ok());
    ASSERT_TRUE(st_->FromFloat(low->data(), reinterpret_cast<const float*>(src.data()), f.size(), p).ok());
    ASSERT_TRUE(st_->ToFloat(reinterpret_cast<float*>(back->data()), low->data(), f.size(), p).ok());
    Sync();
    const auto want = Low(f, p);
    EXPECT_EQ(Get<uint16_t>(*low, f.size()), want) << PrecisionName(p);
    const auto wide = Get<float>(*back, f.size());
    for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(wide[i], Widen(want[i], p)) << i;
  }
}

// One rank (no mpirun): the sum over ranks is the rank's own values, rounded.
TEST_P(Conformance, CollectivesOnOneRank) {
  const Precision p = Precision::kBf16;
  const auto a = Low(Normal(512, 7), p), b = Low(Normal(512, 8), p);
  Memory src = Put(Tier::kGpu, a), dst = Put(Tier::kGpu, b);
  auto gathered = be().Allocate(Tier::kGpu, a.size() * 2);
  ASSERT_TRUE(gathered.ok());
  ASSERT_TRUE(st_->AllGather(src.data(), gathered->data(), a.size() * 2).ok());
  Sync();
  EXPECT_EQ(Get<uint16_t>(*gathered, a.size()), a);
  bool overflow = false;
  ASSERT_TRUE(st_->AllReduce(src.data(), dst.data(), a.size(), p, /*accumulate=*/true, &overflow).ok());
  Sync();
  const auto sum = Get<uint16_t>(dst, a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(sum[i], Low({Widen(b[i], p) + Widen(a[i], p)}, p)[0]) << i;
  ASSERT_TRUE(st_->ReduceScatter(src.data(), dst.data(), a.size(), p, /*accumulate=*/false, &overflow).ok());
  Sync();
  EXPECT_EQ(Get<uint16_t>(dst, a.size()), a);
  EXPECT_FALSE(overflow);
}

TEST_P(Conformance, AdamStepMatchesTheScalarReference) {
  const size_t n = 4099;
  auto w = Normal(n, 9), m = Normal(n, 10, 0.1f), v = Normal(n, 11), g = Normal(n, 12);
  for (float& x : v) x = std::abs(x);
  const AdamStepConsts c = MakeAdamStep(AdamConfig{}, 3, 1.0f / 8);
  for (bool grad_fp32 : {false, true}) {
    const auto g16 = Low(g, Precision::kBf16);
    std::vector<float> gw(n);
    for (size_t i = 0; i < n; ++i) gw[i] = grad_fp32 ? g[i] : Widen(g16[i], Precision::kBf16);
    std::vector<float> rw = w, rm = m, rv = v;
    std::vector<uint16_t> rout(n);
    ReferenceAdamStep({rw.data(), gw.data(), rm.data(), rv.data(), rout.data(), Precision::kBf16, n}, c);
    for (Tier t : {Tier::kGpu, Tier::kCpu}) {
      Memory dw = Put(t, w), dm = Put(t, m), dv = Put(t, v);
      Memory dg = grad_fp32 ? Put(t, g) : Put(t, g16);
      auto out = be().Allocate(t, n * 2, false);
      ASSERT_TRUE(out.ok());
      AdamArgs args{reinterpret_cast<float*>(dw.data()),
                    dg.data(),
                    reinterpret_cast<float*>(dm.data()),
                    reinterpret_cast<float*>(dv.data()),
                    out->data(),
                    Precision::kBf16,
                    n,
                    grad_fp32};
      ASSERT_TRUE(st_->AdamStep(args, c).ok());
      Sync();
      const std::string what = std::string(TierName(t)) + (grad_fp32 ? ", fp32 gradients" : ", bf16 gradients");
      EXPECT_EQ(Get<float>(dw, n), rw) << what;
      EXPECT_EQ(Get<float>(dm, n), rm) << what;
      EXPECT_EQ(Get<float>(dv, n), rv) << what;
      EXPECT_EQ(Get<uint16_t>(*out, n), rout) << what;
    }
  }
}

// The CPU optimizer's stream (offload_optimizer cpu or nvme) steps CPU
// memory, page-locked or pageable (pin_memory off), bit for bit as the
// reference; a skipped step's FromFloat there too. The operands arrive by
// copies queued on that stream just before (from the GPU tier, unsynced),
// so the step must wait for them. (The CUDA backend runs this stream's math
// on the host: a kernel cannot read pageable memory.) Then Zero,
// Accumulate and ToFloat into pageable memory on a device stream.
TEST_P(Conformance, CpuOptimizerStreamStepsPinnedAndPageableMemory) {
  auto cs = be().NewStream(Stream::kCpuOptim);
  ASSERT_TRUE(cs.ok()) << cs.status().message();
  DeviceStream& st = **cs;
  const size_t n = 1027;
  auto w = Normal(n, 19), m = Normal(n, 20, 0.1f), v = Normal(n, 21), g = Normal(n, 22);
  for (float& x : v) x = std::abs(x);
  const AdamStepConsts c = MakeAdamStep(AdamConfig{}, 2, 1.0f / 4);
  const auto g16 = Low(g, Precision::kFp16);
  std::vector<float> gw(n), rw = w, rm = m, rv = v;
  for (size_t i = 0; i < n; ++i) gw[i] = Widen(g16[i], Precision::kFp16);
  std::vector<uint16_t> rout(n), wout(n);
  ReferenceAdamStep({rw.data(), gw.data(), rm.data(), rv.data(), rout.data(), Precision::kFp16, n}, c);
  FloatToLow(w.data(), wout.data(), n, Precision::kFp16);
  // GPU-tier sources, filled and synced once.
  Memory sw = Put(Tier::kGpu, w), sm = Put(Tier::kGpu, m), sv = Put(Tier::kGpu, v), sg = Put(Tier::kGpu, g16),
         so = Put(Tier::kGpu, wout);
  for (bool pageable : {false, true}) {
    const std::string what = pageable ? "pageable" : "pinned";
    // CPU memory (zeroed), filled by a copy queued on the optimizer's stream.
    auto take = [&](const Memory& src, size_t bytes) {
      auto mem = pageable ? be().AllocatePageable(bytes, true) : be().Allocate(Tier::kCpu, bytes);
      EXPECT_TRUE(mem.ok()) << what;
      if (!mem.ok()) return Memory();
      EXPECT_TRUE(st.Copy(mem->data(), src.data(), bytes).ok()) << what;
      return std::move(*mem);
    };
    Memory pw = take(sw, n * 4), pm = take(sm, n * 4), pv = take(sv, n * 4), pg = take(sg, n * 2);
    Memory out = take(so, n * 2), skipped = take(so, n * 2);
    for (const Memory* mem : {&pw, &pm, &pv, &pg, &out, &skipped}) ASSERT_NE(mem->data(), nullptr) << what;
    AdamArgs args{reinterpret_cast<float*>(pw.data()),
                  pg.data(),
                  reinterpret_cast<float*>(pm.data()),
                  reinterpret_cast<float*>(pv.data()),
                  out.data(),
                  Precision::kFp16,
                  n,
                  false};
    ASSERT_TRUE(st.AdamStep(args, c).ok()) << what;
    ASSERT_TRUE(st.FromFloat(skipped.data(), reinterpret_cast<const float*>(pm.data()), n, Precision::kFp16).ok());
    auto ev = st.Record();
    ASSERT_TRUE(ev.ok());
    ASSERT_TRUE((*ev)->Synchronize().ok());
    EXPECT_EQ(Get<float>(pw, n), rw) << what;
    EXPECT_EQ(Get<float>(pm, n), rm) << what;
    EXPECT_EQ(Get<float>(pv, n), rv) << what;
    EXPECT_EQ(Get<uint16_t>(out, n), rout) << what;
    EXPECT_EQ(Get<uint16_t>(skipped, n), Low(rm, Precision::kFp16)) << what;
  }
  // Device-stream math into pageable memory from pinned memory (the staged
  // accumulation of a pageable move, a widening into it, zeroing it).
  auto sum = be().AllocatePageable(n * 2, true), wide = be().AllocatePageable(n * 4, true);
  auto pinned = be().Allocate(Tier::kCpu, n * 2);
  ASSERT_TRUE(sum.ok() && wide.ok() && pinned.ok());
  const auto a16 = Low(m, Precision::kFp16);
  std::vector<uint16_t> expect = wout;
  AccumulateLow(expect.data(), a16.data(), n, Precision::kFp16);
  std::vector<float> widened(n);
  LowToFloat(a16.data(), widened.data(), n, Precision::kFp16);
  ASSERT_TRUE(st_->Copy(sum->data(), wout.data(), n * 2).ok());
  ASSERT_TRUE(st_->Copy(pinned->data(), a16.data(), n * 2).ok());
  bool overflow = false;
  ASSERT_TRUE(st_->Accumulate(sum->data(), pinned->data(), n, Precision::kFp16, &overflow).ok());
  ASSERT_TRUE(st_->ToFloat(reinterpret_cast<float*>(wide->data()), pinned->data(), n, Precision::kFp16).ok());
  Sync();
  EXPECT_EQ(Get<uint16_t>(*sum, n), expect);
  EXPECT_EQ(Get<float>(*wide, n), widened);
  EXPECT_FALSE(overflow);
  ASSERT_TRUE(st_->Zero(wide->data(), n * 4).ok());
  Sync();
  EXPECT_EQ(Get<float>(*wide, n), std::vector<float>(n, 0.0f));
}

// The digest matrix: the same weights after two steps whatever the ZeRO
// stage and the placement of parameters and optimizer states (one rank,
// one micro step, where every placement computes the same sums).
TEST_P(Conformance, EveryPlacementTrainsTheSameWeights) {
  struct Placement {
    int stage;
    OffloadDevice param, optim;
    int fsdp = 0;  // 1: framework fsdp (FSDP2's casting gathers and widening reductions), 2: with CPU offload
  };
  for (const char* name : {"seed", "gpt-tiny"}) {
    std::string first;
    for (const Placement& pl : {Placement{0, OffloadDevice::kNone, OffloadDevice::kNone},
                                Placement{1, OffloadDevice::kNone, OffloadDevice::kCpu},
                                Placement{2, OffloadDevice::kNone, OffloadDevice::kCpu},
                                Placement{3, OffloadDevice::kNone, OffloadDevice::kNone},
                                Placement{3, OffloadDevice::kCpu, OffloadDevice::kCpu},
                                Placement{3, OffloadDevice::kNvme, OffloadDevice::kNvme},
                                Placement{3, OffloadDevice::kNone, OffloadDevice::kNone, 1},
                                Placement{3, OffloadDevice::kCpu, OffloadDevice::kCpu, 2}}) {
      Scenario s = testing::Builtin(name);
      s.zero.stage = pl.stage;
      s.zero.offload_param.device = pl.param;
      s.zero.offload_optimizer.device = pl.optim;
      if (pl.fsdp > 0) {
        s.framework = Framework::kFsdp;
        s.zero = ZeroConfig{};
        s.fsdp.offload_cpu = pl.fsdp == 2;
      }
      s.training.gradient_accumulation_steps = 1;
      s.hardware.gpu.memory = Bytes(8LL << 30);
      const std::string what = std::string(name) + " stage " + std::to_string(pl.stage) + " param " +
                               std::string(OffloadDeviceName(pl.param)) + " optimizer " +
                               std::string(OffloadDeviceName(pl.optim)) + (pl.fsdp > 0 ? " (fsdp)" : "");
      ASSERT_TRUE(CheckScenario(s).empty()) << what;
      auto plan = BuildPlan(s);
      ASSERT_TRUE(plan.ok()) << what << ": " << plan.status().message();
      auto env = NewMemEnv();
      RunOptions o;
      o.steps = 2;
      o.env = env.get();
      o.backend = &be();
      o.nvme_dir = "/mem/nvme";
      auto r = RunTraining(*plan, o);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().message();
      if (first.empty()) first = r->weights_digest;
      EXPECT_EQ(r->weights_digest, first) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::Values("host", "opaque", "emulated", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace strata::exec
