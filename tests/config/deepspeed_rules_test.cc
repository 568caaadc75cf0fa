// DeepSpeed's config rules, one by one, as the release named by
// policy.deepspeed_stage3 applies them (docs/fidelity.md, rows "Unknown keys of a
// DeepSpeed config" to "Refusals outside the ZeRO section"). The corpus test
// (ds_corpus_test.cc) checks whole public configs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "strata/config/scenario_loader.h"

namespace strata::config {
namespace {

const char* kScenario = R"(name: t
model: {kind: transformer, layers: 2, hidden_size: 64, num_heads: 4}
hardware:
  gpu: {memory: 16GiB, peak_flops: 100TFLOPS}
  cpu: {memory: 64GiB}
  nvme: {capacity: 1TiB, read_bandwidth: 3GB/s, write_bandwidth: 2GB/s}
)";

class DeepSpeedRules : public ::testing::Test {
 protected:
  // Reads `json` as the DeepSpeed config over kScenario under `release`.
  Result<Scenario> Read(const std::string& json, const std::string& release = "current") {
    path_ = std::filesystem::temp_directory_path() / ("strata_rules_" + std::to_string(::getpid()) + ".json");
    std::ofstream(path_) << json;
    LoadOptions o;
    o.deepspeed_config = path_.string();
    o.warnings = &warnings_;
    warnings_.clear();
    return ParseScenario(std::string(kScenario) + "policy: {deepspeed_stage3: " + release + "}\n", "s.yaml", o);
  }
  // Expects a refusal (exit 2) whose message has `needle`.
  void ExpectRefused(const std::string& json, const std::string& needle, const std::string& release = "current") {
    auto r = Read(json, release);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().ExitCode(), 2);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  }
  bool Warned(const std::string& needle) const {
    for (const auto& w : warnings_)
      if (w.find(needle) != std::string::npos) return true;
    return false;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
  std::vector<std::string> warnings_;
};

// runtime/zero/config.py: Field(ge=0) for each.
TEST_F(DeepSpeedRules, BucketAndSubGroupSizesTakeZero) {
  auto r = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "reduce_bucket_size": 0,
    "allgather_bucket_size": 0, "sub_group_size": 0}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.reduce_bucket_size.v, 0);
  EXPECT_EQ(r->zero.allgather_bucket_size.v, 0);
  EXPECT_EQ(r->zero.sub_group_size.v, 0);
}

// Current DeepSpeed: the singular cpu_offload_param is offload_param cpu
// (true) or none (false); with offload_param too it is an assertion; the
// plural is a key the model forbids.
TEST_F(DeepSpeedRules, DeprecatedOffloadSpellingsInTheCurrentRelease) {
  auto r = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "cpu_offload_param": true,
    "cpu_offload": true}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_EQ(r->zero.offload_optimizer.device, OffloadDevice::kCpu);
  ExpectRefused(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "cpu_offload_param": false,
    "offload_param": {"device": "cpu"}}})",
                "Cannot provide deprecated parameter 'cpu_offload_param' and replacing parameter 'offload_param'");
  ExpectRefused(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "cpu_offload_params": true}})",
                "did you mean 'cpu_offload_param'? DeepSpeed refuses unknown keys here too");
  ASSERT_TRUE(Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "cpu_offload_use_pin_memory": true,
    "offload_param": {"device": "cpu"}}})")
                  .ok());
  EXPECT_TRUE(Warned("cpu_offload_use_pin_memory: deprecated"));
}

// Before v0.7.0 (dict-read config): the plural offloads the parameters and
// replaces the offload_param section; the singular is not read; a
// misspelt key is ignored; v0.3.13 pins with cpu_offload_use_pin_memory.
TEST_F(DeepSpeedRules, DeprecatedOffloadSpellingsInOldReleases) {
  auto r = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "cpu_offload": true,
    "cpu_offload_params": true, "offload_param": {"device": "nvme", "nvme_path": "/tmp"}, "sub_grup_size": 5}})",
                "v0.5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_TRUE(Warned("zero_optimization.offload_param: DeepSpeed v0.5 reads cpu_offload_params instead"));
  EXPECT_TRUE(Warned("zero_optimization.sub_grup_size: DeepSpeed v0.5 ignores keys it does not read"));
  auto singular = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "cpu_offload": true,
    "cpu_offload_param": true}})",
                       "v0.5");
  ASSERT_TRUE(singular.ok()) << singular.status().message();
  EXPECT_EQ(singular->zero.offload_param.device, OffloadDevice::kNone);
  EXPECT_TRUE(Warned("cpu_offload_param: DeepSpeed before v0.7.0 reads the plural"));
  auto pinned = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "cpu_offload": true,
    "cpu_offload_params": true, "cpu_offload_use_pin_memory": true}})",
                     "v0.3.13");
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_TRUE(pinned->zero.offload_param.pin_memory);
  EXPECT_TRUE(pinned->zero.offload_optimizer.pin_memory);
}

// runtime/zero/config.py read_zero_config_deprecated.
TEST_F(DeepSpeedRules, BooleanZeroOptimizationIsStageOneOrZero) {
  auto on = Read(R"({"train_batch_size": 1, "zero_optimization": true, "allgather_size": 2e8})");
  ASSERT_TRUE(on.ok()) << on.status().message();
  EXPECT_EQ(on->zero.stage, 1);
  EXPECT_EQ(on->zero.allgather_bucket_size.v, 200'000'000);
  EXPECT_TRUE(Warned("DeepSpeed's deprecated form"));
  auto off = Read(R"({"train_batch_size": 1, "zero_optimization": false})");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(off->zero.stage, 0);
}

// engine.py _configure_basic_optimizer, in every release.
TEST_F(DeepSpeedRules, MaxGradNormIsRefused) {
  for (const char* release : {"current", "v0.5"})
    ExpectRefused(R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"max_grad_norm": 1.0}}})",
                  "switch to using the deepspeed parameter 'gradient_clipping'", release);
}

// runtime/config.py get_communication_data_type: fp16, bf16, fp32 (v0.5.x:
// bfp16 for bf16; before v0.5 the key is not read).
TEST_F(DeepSpeedRules, CommunicationDataTypeAsTheReleaseNamesIt) {
  ExpectRefused(R"({"train_batch_size": 1, "communication_data_type": "bfp16"})",
                "Supported data types: ['fp16', 'bf16', 'fp32']. Got: bfp16");
  EXPECT_TRUE(Read(R"({"train_batch_size": 1, "bf16": {"enabled": true}, "communication_data_type": "BF16"})").ok());
  EXPECT_TRUE(Read(R"({"train_batch_size": 1, "communication_data_type": "bfp16"})", "v0.5").ok());
  ExpectRefused(R"({"train_batch_size": 1, "communication_data_type": "bf16"})", "Got: bf16", "v0.5");
  EXPECT_TRUE(Read(R"({"train_batch_size": 1, "communication_data_type": "int8"})", "v0.3").ok());
  EXPECT_TRUE(Warned("communication_data_type: DeepSpeed v0.3 does not read it"));
}

// runtime/zero/config.py offload_ratio_check; ratio in [0, 1].
TEST_F(DeepSpeedRules, PartialOffloadOnlyUnderStageThree) {
  ExpectRefused(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
    "offload_optimizer": {"device": "cpu", "ratio": 0.3}}})",
                "Partial offloading only supported for ZeRO Stage 3.");
  ExpectRefused(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
    "offload_optimizer": {"device": "cpu", "ratio": 1.5}}})",
                "must be in [0, 1]");
  auto r = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
    "offload_optimizer": {"device": "cpu", "ratio": 0.3}}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->zero.offload_optimizer.ratio, 0.3);
  EXPECT_FALSE(Warned("ratio"));  // planned (Fidelity.PartialOptimizerOffload)
  // With the optimizer on NVMe it is listed as not planned; a release
  // before the key reads it as nothing.
  ASSERT_TRUE(Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
    "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp", "ratio": 0.3}}})")
                  .ok());
  EXPECT_TRUE(Warned("ratio: partial offload with the optimizer on NVMe is not planned"));
  auto v05 = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
    "offload_optimizer": {"device": "cpu", "ratio": 0.3}}})",
                  "v0.5");
  ASSERT_TRUE(v05.ok()) << v05.status().message();
  EXPECT_DOUBLE_EQ(v05->zero.offload_optimizer.ratio, 1.0);
  EXPECT_TRUE(Warned("ratio: DeepSpeed v0.5 has no partial offload"));
}

// bf16 and fp16 are pydantic models too (runtime/precision_config.py).
TEST_F(DeepSpeedRules, UnknownPrecisionKeysAreRefusedAsDeepSpeedRefusesThem) {
  ExpectRefused(R"({"train_batch_size": 1, "bf16": {"enabled": true, "loss_scale": 1.0}})",
                "unknown key 'bf16.loss_scale' DeepSpeed refuses unknown keys here too");
  EXPECT_TRUE(Read(R"({"train_batch_size": 1, "bf16": {"enabled": true, "loss_scale": 1.0}})", "v0.5").ok());
}

// ZeRO++ (runtime/zero/config.py): read under the current release, with
// what DeepSpeed refuses (utils/groups.py's divisibility, stage3.py's
// reduce_scatter assertion); v0.5 has no ZeRO++ (v0.9.5).
TEST_F(DeepSpeedRules, ZeroPlusPlusKeys) {
  auto r = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 1,
    "zero_quantized_weights": true, "zero_quantized_gradients": true}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->zero.zero_quantized_weights && r->zero.zero_quantized_gradients);
  // hpZ's groups: min(hpz, world) ranks (one rank: 3 is 1), which must divide the world.
  EXPECT_TRUE(Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 3}})").ok());
  std::ofstream(path_) << R"({"train_batch_size": 4, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 3}})";
  LoadOptions o;
  o.deepspeed_config = path_.string();
  std::string four = kScenario;
  four.replace(four.find("hardware:\n"), 10, "hardware:\n  gpus_per_node: 4\n");
  auto refused = ParseScenario(four, "s.yaml", o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("\"4 is not divisible by 3\""), std::string::npos)
      << refused.status().message();
  ExpectRefused(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "zero_quantized_gradients": true,
    "reduce_scatter": false}})",
                "zero_quantized_gradients needs reduce_scatter");
  r = Read(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "zero_quantized_weights": true}})", "v0.5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->zero.zero_quantized_weights);
  EXPECT_TRUE(Warned("DeepSpeed v0.5 has no ZeRO++"));
}

// The scenario's own zero_optimization and aio sections give way to the
// DeepSpeed config's: said with their place in the file, not silently.
TEST_F(DeepSpeedRules, ScenarioSectionsTheConfigReplacesAreSaid) {
  path_ = std::filesystem::temp_directory_path() / ("strata_rules_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path_) << R"({"train_batch_size": 1, "zero_optimization": {"stage": 3}})";
  LoadOptions o;
  o.deepspeed_config = path_.string();
  o.warnings = &warnings_;
  auto r = ParseScenario(std::string(kScenario) + "zero_optimization: {stage: 1}\n", "s.yaml", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.stage, 3);
  EXPECT_TRUE(Warned("s.yaml:")) << (warnings_.empty() ? "" : warnings_[0]);
  EXPECT_TRUE(Warned("zero_optimization is replaced by the DeepSpeed config's"));
  warnings_.clear();
  ASSERT_TRUE(ParseScenario(kScenario, "s.yaml", o).ok());
  EXPECT_FALSE(Warned("is replaced by"));
  // A config without the section replaces nothing: the scenario's stands.
  std::ofstream(path_) << R"({"train_batch_size": 1})";
  warnings_.clear();
  r = ParseScenario(std::string(kScenario) + "zero_optimization: {stage: 1}\n", "s.yaml", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.stage, 1);
  EXPECT_FALSE(Warned("is replaced by"));
}

}  // namespace
}  // namespace strata::config
