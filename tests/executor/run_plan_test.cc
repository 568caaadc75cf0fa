// RunTraining runs a Plan alone: its run record (Plan::run) carries the
// model, precision, aio and the swap directories, so a plan read back from
// its JSON trains exactly as the planner's, and each NVMe buffer's file
// lives in its own section's nvme_path.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "strata/executor/runner.h"
#include "strata/plan/plan_json.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata::exec {
namespace {

Scenario NvmeSeed() {
  Scenario s = testing::Builtin("seed");
  s.zero.stage = 3;
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_optimizer.device = OffloadDevice::kNvme;
  s.zero.offload_param.nvme_path = "/mem/params";
  s.zero.offload_optimizer.nvme_path = "/mem/optim";
  return s;
}

// The swap files of `dir`'s one run directory.
std::vector<std::string> SwapFiles(Env* env, const std::string& dir) {
  auto names = env->ListDir(dir);
  EXPECT_TRUE(names.ok());
  for (const std::string& n : *names)
    if (n.rfind("strata-rank0.run-", 0) == 0) {
      auto files = env->ListDir(dir + "/" + n);
      EXPECT_TRUE(files.ok());
      return *files;
    }
  return {};
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(RunPlan, ThePlansOwnRecordRunsIt) {
  const Scenario s = NvmeSeed();
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->run.model, s.model);
  EXPECT_EQ(plan->run.precision, s.training.precision);
  EXPECT_EQ(plan->run.aio, s.aio);
  EXPECT_EQ(plan->run.nvme_dirs, (std::vector<std::string>{"/mem/params", "/mem/optim"}));
  int nvme = 0;
  for (const Buffer& b : plan->buffers) {
    if (b.tier != Tier::kNvme) {
      EXPECT_EQ(b.nvme_dir, -1) << b.name;
      continue;
    }
    ++nvme;
    EXPECT_EQ(b.nvme_dir, b.kind == StateKind::kParam16 ? 0 : 1) << b.name;
  }
  EXPECT_GT(nvme, 1);

  // Each section's states in its own directory (DeepSpeed's parameter and
  // optimizer swappers each use their section's nvme_path).
  auto env = NewMemEnv();
  RunOptions o;
  o.steps = 2;
  o.env = env.get();
  o.engine = IoEngineKind::kSync;
  o.keep_swap_files = true;
  auto direct = RunTraining(*plan, o);
  ASSERT_TRUE(direct.ok()) << direct.status().message();
  const auto params = SwapFiles(env.get(), "/mem/params");
  const auto optim = SwapFiles(env.get(), "/mem/optim");
  EXPECT_TRUE(Has(params, "param16.partition.nvme.swp")) << ::testing::PrintToString(params);
  EXPECT_FALSE(Has(params, "master32.swp"));
  EXPECT_TRUE(Has(optim, "master32.swp")) << ::testing::PrintToString(optim);
  EXPECT_FALSE(Has(optim, "param16.partition.nvme.swp"));

  // The plan read back from its JSON, no scenario: the same training.
  auto decoded = DecodePlan(EncodePlan(*plan));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(*decoded, *plan);
  auto env2 = NewMemEnv();
  o.env = env2.get();
  o.keep_swap_files = false;
  auto again = RunTraining(*decoded, o);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->weights_digest, direct->weights_digest);
  EXPECT_EQ(again->losses, direct->losses);
}

// A section on NVMe without its nvme_path: refused before anything is
// allocated, naming the buffer and both ways out; --nvme-dir then serves.
TEST(RunPlan, MissingSwapDirectoryIsNamed) {
  Scenario s = NvmeSeed();
  s.zero.offload_optimizer.nvme_path = "";
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto env = NewMemEnv();
  RunOptions o;
  o.env = env.get();
  o.engine = IoEngineKind::kSync;
  auto r = RunTraining(*plan, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("offload_optimizer.nvme_path"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("--nvme-dir"), std::string::npos);
  o.nvme_dir = "/mem/all";
  auto ok = RunTraining(*plan, o);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
}

}  // namespace
}  // namespace strata::exec
