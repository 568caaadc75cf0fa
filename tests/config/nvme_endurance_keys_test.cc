// hardware.nvme's endurance keys and drive presets (docs/endurance.md):
// read, the other rating derived, and bad values refused with their key.
#include <gtest/gtest.h>

#include <tuple>

#include "strata/config/scenario_loader.h"

namespace strata::config {
namespace {

Result<Scenario> Parse(const std::string& nvme) {
  return ParseScenario(
      "name: e\nmodel: {kind: mlp, sizes: [64, 64]}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS, "
      "efficiency: 1.0}\n  cpu: {memory: 8GiB}\n  nvme: " +
          nvme + "\n",
      "e.yaml");
}

TEST(NvmeEnduranceKeys, RatingsAndPresetsAreRead) {
  auto d = Parse("{capacity: 8TB, drives: 2, rated_dwpd: 1, warranty_years: 3}");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_DOUBLE_EQ(d->hardware.nvme.rated_bytes(), 4e12 * 365 * 3);  // DWPD x a drive's 4 TB x the warranty
  auto t = Parse("{capacity: 4TB, rated_tbw: 1200TB, write_amplification: 1.5}");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_DOUBLE_EQ(t->hardware.nvme.rated_bytes(), 1200e12);
  EXPECT_DOUBLE_EQ(t->hardware.nvme.write_amplification, 1.5);
  // A preset fills a drive's rates and rating; capacity is drives x its size.
  auto p = Parse("{model: samsung-pm1733-7.68tb, drives: 2}");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->hardware.nvme.capacity.v, static_cast<int64_t>(2 * 7.68e12));
  EXPECT_DOUBLE_EQ(p->hardware.nvme.rated_dwpd, 1);
  EXPECT_DOUBLE_EQ(p->hardware.nvme.write_bandwidth.bytes_per_s, 3.8e9);
  // A key beside it wins, a rating replaces the preset's.
  auto o = Parse("{model: samsung-980-pro-2tb, rated_dwpd: 0.3, write_bandwidth: 2GB/s}");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_DOUBLE_EQ(o->hardware.nvme.rated_bytes(), 0.3 * 2e12 * 365 * 5);
  EXPECT_DOUBLE_EQ(o->hardware.nvme.write_bandwidth.bytes_per_s, 2e9);
}

TEST(NvmeEnduranceKeys, BadValuesNameTheirKey) {
  for (auto [nvme, key] : std::initializer_list<std::pair<const char*, const char*>>{
           {"{capacity: 1TB, rated_dwpd: 0}", "hardware.nvme.rated_dwpd"},
           {"{capacity: 1TB, rated_dwpd: -1}", "hardware.nvme.rated_dwpd"},
           {"{capacity: 1TB, rated_tbw: 0}", "hardware.nvme.rated_tbw"},
           {"{capacity: 1TB, rated_dwpd: 1, rated_tbw: 1PB}", "hardware.nvme.rated_tbw"},
           {"{capacity: 1TB, warranty_years: 0}", "hardware.nvme.warranty_years"},
           {"{capacity: 1TB, write_amplification: 0.5}", "hardware.nvme.write_amplification"},
           {"{model: no-such-drive}", "hardware.nvme.model"}}) {
    auto r = Parse(nvme);
    ASSERT_FALSE(r.ok()) << nvme;
    EXPECT_EQ(r.status().ExitCode(), 2) << nvme;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("e.yaml:"), std::string::npos) << r.status().message();
  }
}

// policy.stripe_paths (docs/endurance.md, Striping): a list, or paths
// joined by ':'; a bad entry refused at its position.
TEST(NvmeEnduranceKeys, StripePathsAreAListOrJoinedByColons) {
  const std::string head =
      "name: e\nmodel: {kind: mlp, sizes: [64, 64]}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS, "
      "efficiency: 1.0}\n  cpu: {memory: 8GiB}\n  nvme: {capacity: 8TB, drives: 2}\n"
      "zero_optimization:\n  stage: 3\n  offload_optimizer: {device: nvme, nvme_path: /tmp/x}\npolicy:\n"
      "  stripe_paths: ";
  for (const char* v : {"[/mnt/a, /mnt/b]", "/mnt/a:/mnt/b"}) {
    auto s = ParseScenario(head + v + "\n", "e.yaml");
    ASSERT_TRUE(s.ok()) << v << ": " << s.status().message();
    EXPECT_EQ(s->policy.stripe_paths, (std::vector<std::string>{"/mnt/a", "/mnt/b"})) << v;
  }
  auto bad = ParseScenario(head + "[/mnt/a, [x]]\n", "e.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("e.yaml:11:26"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("stripe_paths"), std::string::npos) << bad.status().message();
  auto system = ParseScenario(head + "[/mnt/a, /etc]\n", "e.yaml");
  ASSERT_FALSE(system.ok());
  EXPECT_NE(system.status().message().find("stripe_paths"), std::string::npos) << system.status().message();
}

// policy.delayed_update (docs/dpu.md): read with its warm-up, refused
// by key (exit 2, file:line:column) without the CPU optimizer it moves off
// the critical path, under stage 3 and with a warm-up out of range.
TEST(NvmeEnduranceKeys, DelayedUpdateNeedsTheCpuOptimizer) {
  auto parse = [](const std::string& zero, const std::string& dpu) {
    return ParseScenario(
        "name: e\nmodel: {kind: mlp, sizes: [64, 64]}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS, "
        "efficiency: 1.0}\n  cpu: {memory: 8GiB}\nzero_optimization: " +
            zero + "\npolicy:\n  delayed_update: " + dpu + "\n",
        "e.yaml");
  };
  const std::string offload = "{stage: 2, offload_optimizer: {device: cpu}}";
  auto on = parse(offload, "{warmup_steps: 40}");
  ASSERT_TRUE(on.ok()) << on.status().message();
  EXPECT_EQ(on->policy.delayed_update_warmup, 40);
  auto off = parse(offload, "");  // an empty section: off
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(off->policy.delayed_update_warmup, -1);
  for (auto [zero, dpu, what] : std::initializer_list<std::tuple<const char*, const char*, const char*>>{
           {"{stage: 2}", "{warmup_steps: 1}", "offload_optimizer.device: cpu"},
           {"{stage: 3, offload_optimizer: {device: nvme, nvme_path: /tmp/x}}", "{warmup_steps: 1}", "on NVMe"},
           {"{stage: 3, offload_optimizer: {device: cpu}}", "{warmup_steps: 1}", "stages 1-2"},
           {"{stage: 2, offload_optimizer: {device: cpu}}", "{warmup_steps: -1}", "warmup_steps"},
           {"{stage: 2, offload_optimizer: {device: cpu}}", "{}", "warmup_steps"},
           {"{stage: 2, offload_optimizer: {device: cpu}}", "{warmup: 3}", "warmup"}}) {
    auto r = parse(zero, dpu);
    ASSERT_FALSE(r.ok()) << zero << " " << dpu;
    EXPECT_EQ(r.status().ExitCode(), 2);
    EXPECT_NE(r.status().message().find("policy.delayed_update"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("e.yaml:"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace strata::config
