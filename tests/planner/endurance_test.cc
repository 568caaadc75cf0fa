// NVMe wear of a plan (cost/endurance.h, docs/endurance.md): one node's
// writes per drive, their NAND bytes, drive writes a day and days to the
// rated writes, against a hand count of the plan's write ops.
#include "strata/cost/endurance.h"

#include <gtest/gtest.h>

#include <cmath>

#include "strata/config/scenario_loader.h"
#include "strata/planner/planner.h"

namespace strata {
namespace {

TEST(Endurance, WriteAmplificationFromTheWriteSize) {
  EXPECT_DOUBLE_EQ(DefaultWriteAmplification(1 << 20), 1.0);
  EXPECT_DOUBLE_EQ(DefaultWriteAmplification(128 * 1024), 1.0);
  EXPECT_DOUBLE_EQ(DefaultWriteAmplification(4096), 4.5);  // five halvings of 0.7
  EXPECT_DOUBLE_EQ(DefaultWriteAmplification(64 * 1024), 1.7);
  EXPECT_DOUBLE_EQ(DefaultWriteAmplification(512), 4.5);  // capped
}

// The seed (ZeRO-Infinity, one GPU): every NVMe write op's bytes, on two
// drives of a node, at one iteration a second.
TEST(Endurance, PerDriveBytesRateAndDaysAreTheHandCount) {
  auto s = config::LoadScenarioFile("builtin:seed");
  ASSERT_TRUE(s.ok());
  s->hardware.nvme.drives = 2;
  s->hardware.nvme.capacity = Bytes(int64_t{2} << 30);  // 1 GiB a drive
  s->hardware.nvme.rated_dwpd = 3;
  auto plan = BuildPlan(*s);
  ASSERT_TRUE(plan.ok());
  double bytes = 0, nand = 0;
  int64_t requests = 0;
  const int64_t block = plan->run.aio.block_size.v;
  for (const Op& op : plan->ops)
    if (op.kind == OpKind::kNvmeWrite) {
      bytes += static_cast<double>(op.bytes.v);
      for (const Move& m : op.moves) {
        const int64_t n = m.dst.bytes.v;
        requests += (n + block - 1) / block;
        // Each request amplified by its own size: full blocks, then the rest.
        const double full = static_cast<double>(n / block * block), rest = static_cast<double>(n % block);
        nand += full * DefaultWriteAmplification(static_cast<double>(block)) +
                (rest > 0 ? rest * DefaultWriteAmplification(rest) : 0.0);
      }
    }
  ASSERT_GT(bytes, 0);
  const DriveWear w = NvmeWear(*plan, s->hardware.nvme, 1.0);
  EXPECT_EQ(w.drives, 2);
  EXPECT_DOUBLE_EQ(w.host_bytes, bytes / 2);
  EXPECT_EQ(w.writes, (requests + 1) / 2);
  EXPECT_DOUBLE_EQ(w.write_amplification, nand / bytes);
  EXPECT_DOUBLE_EQ(w.dwpd, bytes / 2 * 86400 / static_cast<double>(int64_t{1} << 30));
  // 3 drive writes a day for 5 years of 1 GiB, over NAND bytes a day.
  const double rated = 3.0 * static_cast<double>(int64_t{1} << 30) * 365 * 5;
  EXPECT_DOUBLE_EQ(w.days, rated / (w.nand_bytes * 86400));
  EXPECT_TRUE(w.short_of_warranty());
  const std::vector<std::string> lines = WearLines(w, "", "at this rate");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("nvme wear (per drive): ", 0), 0u);
  EXPECT_NE(lines[1].find("warning [nvme_endurance]"), std::string::npos);
  // A given amplification wins; no rate, no days; no rating, no warning.
  s->hardware.nvme.write_amplification = 2;
  EXPECT_DOUBLE_EQ(NvmeWear(*plan, s->hardware.nvme, 1.0).nand_bytes, bytes);
  EXPECT_TRUE(std::isinf(NvmeWear(*plan, s->hardware.nvme, 0).days));
  s->hardware.nvme.rated_dwpd = 0;
  EXPECT_EQ(WearLines(NvmeWear(*plan, s->hardware.nvme, 1.0), "", "at this rate").size(), 1u);
  // Nothing on NVMe: no drives worn.
  s->zero.offload_param.device = OffloadDevice::kCpu;
  s->zero.offload_optimizer.device = OffloadDevice::kCpu;
  auto cpu = BuildPlan(*s);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(NvmeWear(*cpu, s->hardware.nvme, 1.0).drives, 0);
}

}  // namespace
}  // namespace strata
