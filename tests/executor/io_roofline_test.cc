// The NVMe roofline probe moves exactly one iteration's NVMe traffic of the
// plan, on shadow files of its own (removed when it goes), and reports I/O
// failures with the path; and the runner's per-step hook and step times
// that the overlap benchmark builds on.
#include "strata/executor/io_roofline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/executor/runner.h"
#include "strata/planner/planner.h"
#include "test_paths.h"
#include "test_util.h"

namespace strata::exec {
namespace {

const std::string kDir = std::string(testing::BinaryDir()) + "/tmp/roofline_test_nvme";

struct DirectionBytes {
  int64_t read = 0, write = 0;
};
DirectionBytes NvmeBytes(const Plan& p) {
  DirectionBytes b;
  for (const Op& op : p.ops)
    for (const Move& m : op.moves) {
      if (op.kind == OpKind::kNvmeRead) b.read += m.src.bytes.v;
      if (op.kind == OpKind::kNvmeWrite) b.write += m.dst.bytes.v;
    }
  return b;
}

std::string Shadow(const Buffer& b) { return kDir + "/strata-roofline-rank0-" + b.name + ".swp"; }

TEST(IoRoofline, MovesOneIterationsNvmeBytesOnShadowFiles) {
  auto env = NewMemEnv();
  const Scenario s = testing::Builtin("seed");
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  const DirectionBytes want = NvmeBytes(*plan);
  ASSERT_GT(want.read, 0);
  ASSERT_GT(want.write, 0);
  std::vector<std::string> shadows;
  for (const Buffer& b : plan->buffers)
    if (b.tier == Tier::kNvme) shadows.push_back(Shadow(b));
  ASSERT_FALSE(shadows.empty());
  {
    auto probe = IoRooflineProbe::Open(*plan, {kDir, 0, IoEngineKind::kSync, env.get()});
    ASSERT_TRUE(probe.ok()) << probe.status().message();
    for (const std::string& f : shadows) EXPECT_TRUE(env->OpenFile(f, false).ok()) << f;
    for (int pass = 0; pass < 2; ++pass) {
      auto r = probe->Measure();
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->read_bytes, want.read);
      EXPECT_EQ(r->write_bytes, want.write);
      EXPECT_GE(r->concurrent_s, 0);
      EXPECT_GE(r->ordered_s, 0);
      EXPECT_GE(r->turns_s, 0);
      EXPECT_LE(r->seconds(), r->turns_s);
      EXPECT_LE(r->seconds(), r->concurrent_s);
      EXPECT_LE(r->seconds(), r->ordered_s);
    }
  }
  for (const std::string& f : shadows) EXPECT_FALSE(env->OpenFile(f, false).ok()) << f << " left behind";
}

TEST(IoRoofline, IoFailuresNameTheFile) {
  auto mem = NewMemEnv();
  FaultInjectionEnv env(mem.get());
  const Scenario s = testing::Builtin("seed");
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  env.Inject({FaultSpec::Kind::kNoSpace, 0});
  auto full = IoRooflineProbe::Open(*plan, {kDir, 0, IoEngineKind::kSync, &env});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), Status::Code::kIOError);
  EXPECT_NE(full.status().message().find("strata-roofline-rank0-"), std::string::npos) << full.status().message();
  EXPECT_NE(full.status().message().find("ENOSPC"), std::string::npos) << full.status().message();

  env.Inject({});
  auto probe = IoRooflineProbe::Open(*plan, {kDir, 0, IoEngineKind::kSync, &env});
  ASSERT_TRUE(probe.ok()) << probe.status().message();
  for (auto kind : {FaultSpec::Kind::kIoError, FaultSpec::Kind::kShortRead}) {
    env.Inject({kind, 3});
    auto r = probe->Measure();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kIOError);
    EXPECT_NE(r.status().message().find("strata-roofline-rank0-"), std::string::npos) << r.status().message();
  }
  env.Inject({});
  EXPECT_TRUE(probe->Measure().ok());  // nothing is left half done
}

TEST(Run, BeforeStepRunsOutsideEachStepAndStopsOnError) {
  auto env = NewMemEnv();
  const Scenario s = testing::Builtin("seed");
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  RunOptions o;
  o.steps = 3;
  o.env = env.get();
  o.engine = IoEngineKind::kSync;
  o.nvme_dir = kDir;
  std::vector<int> seen;
  o.before_step = [&](int step) {
    seen.push_back(step);
    return Status::Ok();
  };
  auto r = RunTraining(*plan, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(r->step_time_s.size(), 3u);
  // The mean leaves out the first step, a warm-up.
  EXPECT_NEAR((r->step_time_s[1] + r->step_time_s[2]) / 2, r->iteration_time_s, 1e-12);

  o.before_step = [](int step) { return step == 1 ? Status::IOError("probe failed") : Status::Ok(); };
  auto failed = RunTraining(*plan, o);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "probe failed");
}

}  // namespace
}  // namespace strata::exec
