// The planner's parameter caches (scenario "policy" section).
#include <gtest/gtest.h>

#include "strata/plan/validator.h"
#include "strata/planner/eviction.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata {
namespace {

// Stage 3 with the partitions on NVMe (those of 1 MiB or more; the
// LayerNorms stay in CPU memory, as zero.Init keeps them) and two micro
// steps: each group is used four times per iteration, so caches have
// something to keep.
Scenario Offloaded(int gpus = 1) {
  Scenario s = testing::MidGpt(3, gpus);
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_param.max_in_cpu = Elements(0);
  s.zero.offload_optimizer.device = OffloadDevice::kCpu;
  s.zero.stage3_max_reuse_distance = Elements(0);
  s.training.gradient_accumulation_steps = 2;
  return s;
}

Plan MustPlan(const Scenario& s) {
  auto r = BuildPlan(s);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return *r;
}

int64_t ParamBytes(const Plan& p, OpKind k) {
  int64_t n = 0;
  for (const auto& op : p.ops)
    if (op.kind == k && op.name.find("fetch") != std::string::npos) n += op.bytes.v;
  return n;
}

TEST(PlannerCache, DefaultIsDeepSpeedBehaviour) {
  const Plan p = MustPlan(Offloaded());
  EXPECT_EQ(p.cache.gpu_accesses, 0);
  EXPECT_EQ(p.cache.cpu_accesses, 0);
  EXPECT_EQ(p.cache.fetch_nvme_read.v, ParamBytes(p, OpKind::kNvmeRead));
  EXPECT_GT(p.cache.fetch_nvme_read.v, 2 * p.cache.compulsory_nvme_read.v);  // refetched every use
}

TEST(PlannerCache, AmpleGpuCacheFetchesEachGroupOnce) {
  for (EvictionKind k : kAllEvictions) {
    Scenario s = Offloaded();
    s.policy.eviction = k;
    s.policy.gpu_cache = Bytes(1LL << 30);
    const Plan p = MustPlan(s);
    const auto rep = ValidatePlan(p);
    for (const auto& v : rep.violations) ADD_FAILURE() << EvictionName(k) << ": " << v.message;
    EXPECT_EQ(p.cache.fetch_nvme_read, p.cache.compulsory_nvme_read) << EvictionName(k);
    EXPECT_EQ(p.cache.fetch_h2d, p.cache.compulsory_h2d) << EvictionName(k);
    EXPECT_EQ(ParamBytes(p, OpKind::kNvmeRead), p.cache.fetch_nvme_read.v);
    EXPECT_GT(p.cache.gpu_hits, 0);
    int64_t persistent = 0;
    for (const auto& g : p.param_groups) persistent += g.persistent;
    EXPECT_EQ(p.cache.gpu_accesses - p.cache.gpu_hits, static_cast<int64_t>(p.param_groups.size()) - persistent);
  }
}

TEST(PlannerCache, TightCachesValidateForEveryPolicyAndStageMatrix) {
  for (EvictionKind k : kAllEvictions)
    for (int gpus : {1, 2})
      for (int64_t gpu_cache : {2'000'000, 6'000'000, 15'000'000})
        for (int64_t cpu_cache : {0, 3'000'000, 100'000'000}) {
          Scenario s = Offloaded(gpus);
          s.policy.eviction = k;
          s.policy.gpu_cache = Bytes(gpu_cache);
          s.policy.cpu_cache = Bytes(cpu_cache);
          s.zero.stage3_prefetch_bucket_size = Elements(4'000'000);
          const Plan p = MustPlan(s);
          const auto rep = ValidatePlan(p);
          for (const auto& v : rep.violations)
            ADD_FAILURE() << EvictionName(k) << " gpus " << gpus << " gpu " << gpu_cache << " cpu " << cpu_cache << ": "
                          << v.message;
          EXPECT_GE(p.cache.fetch_nvme_read, p.cache.compulsory_nvme_read);
          EXPECT_LE(p.cache.gpu_hits, p.cache.gpu_accesses);
          EXPECT_LE(p.cache.cpu_hits, p.cache.cpu_accesses);
          EXPECT_EQ(p.cache.fetch_nvme_read.v, ParamBytes(p, OpKind::kNvmeRead));
        }
}

TEST(PlannerCache, CpuCacheSavesNvmeReads) {
  Scenario s = Offloaded();
  s.policy.cpu_cache = Bytes(1LL << 30);
  const Plan p = MustPlan(s);
  EXPECT_EQ(p.cache.fetch_nvme_read, p.cache.compulsory_nvme_read);
  EXPECT_GT(p.cache.fetch_h2d.v, p.cache.compulsory_h2d.v);  // still copied up every use
  EXPECT_GT(p.cache.cpu_hits, 0);
  EXPECT_TRUE(ValidatePlan(p).ok());
}

TEST(PlannerCache, GpuCacheMemoryStaysWithinItsCapacity) {
  Scenario s = Offloaded();
  s.policy.prefetch = PrefetchKind::kWindow;  // the caches' fetch order, without them
  const Plan base = MustPlan(s);
  s.policy.gpu_cache = Bytes(10'000'000);
  s.policy.eviction = EvictionKind::kBelady;
  const Plan cached = MustPlan(s);
  const auto a = ValidatePlan(base), b = ValidatePlan(cached);
  EXPECT_LE(b.memory.peak[0].v, a.memory.peak[0].v + 10'000'000);
  EXPECT_LT(cached.cache.fetch_nvme_read.v, base.cache.fetch_nvme_read.v);
}

TEST(PlannerCache, BeladyFetchesNoMoreThanOtherPoliciesHere) {
  Scenario s = Offloaded();
  s.policy.gpu_cache = Bytes(8'000'000);
  int64_t belady = 0;
  std::vector<int64_t> others;
  for (EvictionKind k : kAllEvictions) {
    s.policy.eviction = k;
    const Plan p = MustPlan(s);
    if (k == EvictionKind::kBelady) belady = p.cache.fetch_nvme_read.v;
    if (k != EvictionKind::kCostAware) others.push_back(p.cache.fetch_nvme_read.v);
  }
  for (int64_t o : others) EXPECT_LE(belady, o);
}

}  // namespace
}  // namespace strata
