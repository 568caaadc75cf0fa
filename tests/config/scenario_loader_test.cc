#include "strata/config/scenario_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "strata/core/model.h"
#include "test_paths.h"

namespace strata::config {
namespace {

const char* kMinimal = R"(name: t
model:
  kind: transformer
  layers: 2
  hidden_size: 64
  num_heads: 4
hardware:
  gpu: {memory: 16GiB, peak_flops: 100TFLOPS, efficiency: 1.0}
  cpu: {memory: 64GiB}
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

// Parses and expects an InvalidArgument whose message contains `needle`.
std::string ExpectError(const std::string& yaml, const std::string& needle) {
  auto r = ParseScenario(yaml, "s.yaml");
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  return r.status().message();
}

TEST(ScenarioLoader, ParsesMinimalWithDefaults) {
  auto r = ParseScenario(kMinimal, "s.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->name, "t");
  EXPECT_EQ(r->model.hidden_size, 64);
  EXPECT_EQ(r->model.ffn(), 256);
  EXPECT_EQ(r->hardware.gpu.memory.v, 16LL << 30);
  EXPECT_EQ(r->zero.stage, 0);
  EXPECT_FALSE(r->zero.overlap_comm);  // DeepSpeed: false below stage 3
  EXPECT_EQ(r->zero.stage3_prefetch_bucket_size.v, 50'000'000);
  EXPECT_EQ(r->aio.block_size.v, 1048576);
  // Megatron's fusions on, as Megatron-LM's defaults; the checkpointing
  // refinements off.
  EXPECT_TRUE(r->model.masked_softmax_fusion && r->model.bias_gelu_fusion && r->model.bias_dropout_fusion);
  EXPECT_FALSE(r->training.split_transformers || r->training.synchronize_checkpoint_boundary);
  EXPECT_FALSE(r->policy.prefetch_checkpoints);
  LoadOptions o;
  o.overrides = {{"model.bias_gelu_fusion", "false"},
                 {"training.split_transformers", "true"},
                 {"training.synchronize_checkpoint_boundary", "true"},
                 {"policy.prefetch_checkpoints", "true"}};
  r = ParseScenario(kMinimal, "s.yaml", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->model.bias_gelu_fusion);
  EXPECT_TRUE(r->model.bias_dropout_fusion);
  EXPECT_TRUE(r->training.split_transformers && r->training.synchronize_checkpoint_boundary);
  EXPECT_TRUE(r->policy.prefetch_checkpoints);
}

TEST(ScenarioLoader, ParsesLatenciesAndSharedNvme) {
  auto r = ParseScenario(std::string(kMinimal) +
                             "  pcie: {bandwidth: 16GB/s, latency: 10us}\n"
                             "  nvme: {capacity: 1TB, read_bandwidth: 3GB/s, write_bandwidth: 2GB/s, "
                             "readwrite_bandwidth: 3GB/s, latency: 0.2ms}\n",
                         "s.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->hardware.pcie.latency.v, 10e-6);
  EXPECT_DOUBLE_EQ(r->hardware.nvme.latency.v, 2e-4);
  EXPECT_DOUBLE_EQ(r->hardware.nvme.readwrite_bandwidth.bytes_per_s, 3e9);
  EXPECT_DOUBLE_EQ(r->hardware.network.latency.v, 0);
  EXPECT_DOUBLE_EQ(r->hardware.gpu.reduction_bandwidth.bytes_per_s, 0);  // free unless given
  ExpectError(std::string(kMinimal) + "  nvme: {latency: 3GB}\n", "s.yaml:10:19: hardware.nvme.latency");
}

TEST(ScenarioLoader, OverlapCommDefaultsToTrueAtStage3) {
  auto r = ParseScenario(std::string(kMinimal) + "zero_optimization: {stage: 3}\n", "s.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->zero.overlap_comm);
}

TEST(ScenarioLoader, EveryShippedScenarioLoads) {
  const auto names = BuiltinScenarioNames();
  EXPECT_GE(names.size(), 5u);
  for (const auto& n : names) {
    auto r = LoadScenarioFile("builtin:" + n);
    EXPECT_TRUE(r.ok()) << n << ": " << r.status().message();
    auto f = LoadScenarioFile(std::string(testing::SourceDir()) + "/scenarios/" + n + ".yaml");
    EXPECT_TRUE(f.ok()) << n << ": " << f.status().message();
  }
}

TEST(ScenarioLoader, SeedIsTheIssueExample) {
  auto r = LoadScenarioFile(kDefaultScenario);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model.kind, ModelKind::kMlp);
  EXPECT_EQ(r->model.sizes, (std::vector<int64_t>{1000, 1000, 10}));
  EXPECT_EQ(r->zero.stage, 3);
  EXPECT_EQ(r->zero.offload_param.device, OffloadDevice::kNvme);
  EXPECT_EQ(r->zero.offload_optimizer.device, OffloadDevice::kNvme);
  EXPECT_EQ(r->training.micro_batch_size, 4);
  EXPECT_EQ(r->training.precision, Precision::kFp16);
}

TEST(ScenarioLoader, WrongTypeNamesKeyAndPosition) {
  ExpectError(Replace(kMinimal, "layers: 2", "layers: two"),
              "s.yaml:4:11: model.layers: expected an integer, got 'two'");
  ExpectError(Replace(kMinimal, "memory: 16GiB", "memory: [16]"), "s.yaml:8:17: hardware.gpu.memory: expected a size");
  ExpectError(Replace(kMinimal, "memory: 16GiB", "memory: 16GB/s"), "hardware.gpu.memory: '16GB/s' is not a size");
  ExpectError(std::string(kMinimal) + "training: {activation_checkpointing: maybe}\n",
              "s.yaml:10:38: training.activation_checkpointing: expected true or false");
}

TEST(ScenarioLoader, MissingRequiredKey) {
  ExpectError(Replace(kMinimal, "  hidden_size: 64\n", ""), "s.yaml:3:3: missing required key 'model.hidden_size'");
  ExpectError(Replace(kMinimal, "  cpu: {memory: 64GiB}\n", ""), "missing required section 'hardware.cpu'");
  ExpectError(Replace(kMinimal, "  kind: transformer\n", ""), "missing required key 'model.kind'");
}

TEST(ScenarioLoader, UnknownKeySuggestsTheClosestOne) {
  ExpectError(Replace(kMinimal, "num_heads", "num_haeds"),
              "s.yaml:6:3: unknown key 'model.num_haeds'; did you mean 'num_heads'?");
  ExpectError(
      std::string(kMinimal) + "zero_optimization:\n  stage: 3\n  offload_param: {device: nvme, bufer_count: 4}\n",
      "unknown key 'zero_optimization.offload_param.bufer_count'; did you mean 'buffer_count'?");
  ExpectError(Replace(kMinimal, "kind: transformer", "kind: transfromer"),
              "model.kind: 'transfromer' is not one of transformer mlp; did you mean 'transformer'?");
}

TEST(ScenarioLoader, DuplicateKeyIsAnError) {
  ExpectError(Replace(kMinimal, "  layers: 2\n", "  layers: 2\n  layers: 3\n"),
              "s.yaml:5:3: duplicate key 'model.layers'");
}

// Swap files in a system tree: refused at the key (core/paths.h), in the
// YAML and in a DeepSpeed config alike.
TEST(ScenarioLoader, NvmePathInASystemTreeIsRefusedAtItsKey) {
  ExpectError(
      std::string(kMinimal) + "zero_optimization:\n  stage: 3\n  offload_param: {device: nvme, nvme_path: /etc}\n",
      "s.yaml:12:44: zero_optimization.offload_param.nvme_path: the swap directory '/etc' is a system location");
  ExpectError(std::string(kMinimal) + "zero_optimization:\n  stage: 3\n  offload_optimizer: {nvme_path: /usr/x}\n",
              "zero_optimization.offload_optimizer.nvme_path: the swap directory '/usr/x' is a system location");
  auto ok = ParseScenario(
      std::string(kMinimal) + "zero_optimization:\n  stage: 3\n  offload_param: {nvme_path: /mnt/nvme}\n", "s.yaml");
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

// A second YAML document would be dropped by the parser without a word:
// refused at its line. A leading "---", comments and a document end with
// nothing after it are one document.
TEST(ScenarioLoader, ASecondDocumentIsRefusedAtItsLine) {
  const std::string one(kMinimal);
  const int lines = static_cast<int>(std::count(one.begin(), one.end(), '\n'));
  ExpectError(one + "---\nmodel: {layers: 9}\n", "s.yaml:" + std::to_string(lines + 1) + ":1: a second YAML document");
  ExpectError(one + "...\nmodel: {layers: 9}\n", "s.yaml:" + std::to_string(lines + 2) + ":1: a second YAML document");
  ExpectError(one + "--- # again\n", "a second YAML document");
  for (const std::string& ok : {"%YAML 1.2\n---\n" + one + "...\n# the end\n", "# a scenario\n--- \n" + one,
                                one + "name: \"---\"\nnotes: |\n  ---\n  ...\n"}) {
    auto r = ParseScenario(ok, "s.yaml");
    EXPECT_TRUE(r.ok() || r.status().message().find("second YAML document") == std::string::npos)
        << ok << ": " << r.status().message();
  }
}

// A path key takes a string: an unquoted value YAML (or JSON) reads as a
// number or boolean is refused rather than made a directory "./5".
TEST(ScenarioLoader, APathKeyTakesAString) {
  ExpectError(std::string(kMinimal) + "zero_optimization:\n  stage: 3\n  offload_param: {device: nvme, nvme_path: 5}\n",
              "zero_optimization.offload_param.nvme_path: expected a path, got '5', which reads as a number; quote it");
  ExpectError(std::string(kMinimal) + "zero_optimization:\n  stage: 3\n  offload_optimizer: {nvme_path: true}\n",
              "which reads as a boolean");
  auto ok = ParseScenario(
      std::string(kMinimal) + "zero_optimization:\n  stage: 3\n  offload_param: {nvme_path: \"5\"}\n", "s.yaml");
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

TEST(ScenarioLoader, ImpossibleValues) {
  ExpectError(Replace(kMinimal, "  cpu: {memory: 64GiB}\n", "  cpu: {memory: 64GiB}\n  pcie: {bandwidth: -16GB/s}\n"),
              "s.yaml:10:21: hardware.pcie.bandwidth: must be positive");
  ExpectError(
      Replace(kMinimal, "  cpu: {memory: 64GiB}\n", "  cpu: {memory: 64GiB}\n  pcie: {bandwidth: 5e-300GB/s}\n"),
      "s.yaml:10:21: hardware.pcie.bandwidth: must be at least 1 (got ");
  ExpectError(std::string(kMinimal) + "zero_optimization: {stage: 5}\n",
              "s.yaml:10:28: zero_optimization.stage: ZeRO stage must be 0, 1, 2 or 3 (got 5)");
  ExpectError(
      std::string(kMinimal) + "zero_optimization:\n  stage: 2\n  offload_param: {device: nvme}\n",
      "s.yaml:12:27: zero_optimization.offload_param.device: offload_param (nvme) requires zero_optimization.stage 3");
  ExpectError(Replace(kMinimal, "num_heads: 4", "num_heads: 5"), "hidden_size 64 is not divisible by num_heads 5");
  ExpectError(std::string(kMinimal) + "aio: {block_size: 1000}\n", "aio.block_size: must be a multiple of 512");
  // Each factor in range, the product not: the swap pool's bytes would wrap.
  ExpectError(std::string(kMinimal) +
                  "zero_optimization:\n  stage: 3\n  offload_param: {buffer_count: 4096, "
                  "buffer_size: 1125899906842624}\n",
              "zero_optimization.offload_param.buffer_size: buffer_count x buffer_size must be at most 2^50 elements "
              "(got 4096 x 1125899906842624");
}

// policy.aligned_trace picks one of two codes of the v0.3-v0.5 releases:
// a value no code of the chosen release had is refused where it is written.
// The deprecated policy.v05_aligned_trace does the same, with a warning
// that names its replacement.
TEST(ScenarioLoader, AlignedTraceOnlyWhereTheReleaseHasOne) {
  for (const std::string key : {"aligned_trace", "v05_aligned_trace"}) {
    SCOPED_TRACE(key);
    const std::string y = std::string(kMinimal) + "policy:\n  deepspeed_stage3: RELEASE\n  " + key + ": VALUE\n";
    auto with = [&](const char* release, const char* value) {
      return Replace(Replace(y, "RELEASE", release), "VALUE", value);
    };
    const std::string at = "s.yaml:12:" + std::to_string(key.size() + 5) + ": policy." + key + ": " + key;
    ExpectError(with("current", "true"), at + " applies to");
    ExpectError(with("current", "false"), "current DeepSpeed's fetch queue (PR #1453) has none");
    ExpectError(with("v0.3.13", "false"), at + " false under");
    for (const char* ok : {"v0.5", "v0.3"})
      for (const char* value : {"true", "false"}) {
        LoadOptions opts;
        std::vector<std::string> warnings;
        opts.warnings = &warnings;
        auto r = ParseScenario(with(ok, value), "s.yaml", opts);
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_EQ(r->policy.aligned_trace, std::string(value) == "true");
        if (key == "aligned_trace") {
          EXPECT_TRUE(warnings.empty());
        } else {
          ASSERT_EQ(warnings.size(), 1u);
          EXPECT_EQ(warnings[0],
                    "policy.v05_aligned_trace is deprecated: use policy.aligned_trace (the release "
                    "profile's flag, docs/policies.md)");
        }
      }
    auto r = ParseScenario(with("v0.3.13", "true"), "s.yaml");
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  EXPECT_TRUE(ParseScenario(std::string(kMinimal) + "policy: {deepspeed_stage3: current}\n", "s.yaml").ok());
}

TEST(ScenarioLoader, ReportsEveryProblemNotJustTheFirst) {
  std::string y = Replace(kMinimal, "layers: 2", "layers: x");
  y = Replace(y, "num_heads", "num_hedas");
  const std::string msg = ExpectError(y, "model.layers");
  EXPECT_NE(msg.find("num_hedas"), std::string::npos) << msg;
}

TEST(ScenarioLoader, SyntaxErrorHasPosition) {
  ExpectError("model: {kind: mlp\nhardware: [\n", "s.yaml:");
  ExpectError("- a\n- b\n", "expected a mapping of keys at the top level");
}

TEST(ScenarioLoader, MissingFileIsBadInput) {
  auto r = LoadScenarioFile("/nonexistent/x.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("/nonexistent/x.yaml"), std::string::npos);
  EXPECT_FALSE(LoadScenarioFile("builtin:nope").ok());
}

class DeepSpeedConfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() / ("strata_ds_" + std::to_string(::getpid()) + ".json");
    std::ofstream(path_) << text;
    return path_.string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(DeepSpeedConfigTest, ZeroAndAioSectionsOverrideTheScenario) {
  const std::string ds = Write(R"({
  "train_batch_size": 16,
  "fp16": {"enabled": true},
  "zero_optimization": {
    "stage": 3,
    "offload_param": {"device": "cpu", "pin_memory": true},
    "offload_optimizer": {"device": "cpu"},
    "contiguous_gradients": true,
    "stage3_prefetch_bucket_size": 1e7,
    "sub_group_size": 1e8
  },
  "aio": {"block_size": 262144, "queue_depth": 32, "thread_count": 2}
})");
  LoadOptions opts;
  opts.deepspeed_config = ds;
  auto r =
      ParseScenario(std::string(kMinimal) + "zero_optimization: {stage: 1, reduce_bucket_size: 1e6}\n", "s.yaml", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.stage, 3);
  EXPECT_EQ(r->zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_EQ(r->zero.stage3_prefetch_bucket_size.v, 10'000'000);
  EXPECT_EQ(r->zero.sub_group_size.v, 100'000'000);
  EXPECT_EQ(r->zero.reduce_bucket_size.v, 500'000'000);  // the JSON's section replaces the scenario's
  EXPECT_TRUE(r->zero.overlap_comm);
  EXPECT_EQ(r->aio.block_size.v, 262144);
  EXPECT_EQ(r->aio.queue_depth, 32);
  EXPECT_EQ(r->aio.intra_op_parallelism, 2);
}

// --set wins over --deepspeed: a sweep of an offload device or the micro
// batch with a DeepSpeed config varies what it says (it silently did not).
TEST_F(DeepSpeedConfigTest, SetOverridesWinOverTheFile) {
  const std::string ds = Write(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
    "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/n"}},
    "aio": {"queue_depth": 8}})");
  LoadOptions opts;
  opts.deepspeed_config = ds;
  opts.overrides = {{"zero_optimization.offload_optimizer.device", "cpu"},
                    {"aio.queue_depth", "32"},
                    {"training.micro_batch_size", "2"},
                    {"training.precision", "fp16"}};
  auto r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.stage, 3);  // the rest of the file's section stands
  EXPECT_EQ(r->zero.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_EQ(r->aio.queue_depth, 32);
  EXPECT_EQ(r->training.micro_batch_size, 2);
  EXPECT_EQ(r->training.gradient_accumulation_steps, 2);
  EXPECT_EQ(r->training.precision, Precision::kFp16);
  // A section the file does not have: the scenario's, with the override.
  const std::string bare = Write(R"({"train_micro_batch_size_per_gpu": 4})");
  opts.deepspeed_config = bare;
  opts.overrides = {{"zero_optimization.stage", "2"}};
  r = ParseScenario(std::string(kMinimal) + "zero_optimization: {stage: 1}\n", "s.yaml", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.stage, 2);
  EXPECT_EQ(r->training.micro_batch_size, 4);
}

TEST_F(DeepSpeedConfigTest, ErrorsPointIntoTheJsonFile) {
  const std::string ds = Write("{\n  \"zero_optimization\": {\n    \"stage\": 4,\n    \"offload_parm\": {}\n  }\n}\n");
  LoadOptions opts;
  opts.deepspeed_config = ds;
  auto r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                ds + ":4:5: unknown key 'zero_optimization.offload_parm'; did you mean 'offload_param'?"),
            std::string::npos)
      << r.status().message();
}

// "zero_optimization": null: DeepSpeed raises (get_zero_config unpacks it
// as keyword arguments); Strata says so at the key instead of stage 0.
TEST_F(DeepSpeedConfigTest, NullZeroSectionIsRefusedAsDeepSpeedRefusesIt) {
  const std::string ds = Write("{\n  \"zero_optimization\": null\n}\n");
  LoadOptions opts;
  opts.deepspeed_config = ds;
  auto r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find(ds + ":2:24: zero_optimization: null is refused by DeepSpeed"), std::string::npos)
      << r.status().message();
}

// JSON is strict (DeepSpeed reads the file with json.load): a trailing
// comma, single quotes or trailing text are refused at their line and
// column, though YAML would take them.
TEST_F(DeepSpeedConfigTest, InvalidJsonIsRefusedWhereItIs) {
  LoadOptions opts;
  for (const auto& [text, where] : std::vector<std::pair<std::string, std::string>>{
           {"{\n  \"zero_optimization\": {\"stage\": 3,}\n}\n", ":2:36: not valid JSON"},
           {"{'zero_optimization': {'stage': 3}}", ":1:2: not valid JSON"},
           {"{\"zero_optimization\": {\"stage\": 3}} trailing", ":1:39: not valid JSON"},
           // A number past double's range (deepspeed_fuzz: an uncaught exception).
           {"{\"train_batch_size\": 1e999}", ": not valid JSON (number overflow parsing '1e999')"}}) {
    opts.deepspeed_config = Write(text);
    auto r = ParseScenario(kMinimal, "s.yaml", opts);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(opts.deepspeed_config + where), std::string::npos) << r.status().message();
  }
}

TEST_F(DeepSpeedConfigTest, ImpossibleStageLocatedInJson) {
  const std::string ds = Write("{\"zero_optimization\": {\"stage\": 4}}");
  LoadOptions opts;
  opts.deepspeed_config = ds;
  auto r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(ds + ":1:33: zero_optimization.stage: ZeRO stage must be"), std::string::npos)
      << r.status().message();
}

// The Hugging Face Trainer's "auto" (integrations/deepspeed.py
// trainer_config_finalize): from the hidden size (64) reduce_bucket_size =
// 64^2 = 4096, stage3_prefetch_bucket_size = int(0.9 x 4096) = 3686,
// stage3_param_persistence_threshold = 10 x 64 = 640; batch and precision
// keys from the scenario. An MLP has no hidden size: its "auto" is an error.
TEST_F(DeepSpeedConfigTest, AutoValuesFollowTheTrainer) {
  const std::string ds = Write(R"({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "train_batch_size": "auto", "fp16": {"enabled": "auto"},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                          "stage3_param_persistence_threshold": "auto"}})");
  LoadOptions opts;
  opts.deepspeed_config = ds;
  auto r = ParseScenario(std::string(kMinimal) + "training: {micro_batch_size: 3, gradient_accumulation_steps: 2}\n",
                         "s.yaml", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.reduce_bucket_size.v, 4096);
  EXPECT_EQ(r->zero.stage3_prefetch_bucket_size.v, 3686);
  EXPECT_EQ(r->zero.stage3_param_persistence_threshold.v, 640);
  EXPECT_EQ(r->training.micro_batch_size, 3);
  EXPECT_EQ(r->training.gradient_accumulation_steps, 2);
  EXPECT_EQ(r->training.precision, Precision::kFp16);
  const std::string mlp =
      "model: {kind: mlp, sizes: [8, 4]}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS}\n"
      "  cpu: {memory: 8GiB}\n";
  Write(R"({"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"}})");
  r = ParseScenario(mlp, "m.yaml", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'auto' is filled in by the Hugging Face Trainer"), std::string::npos);
}

// runtime/config.py _set_batch_related_parameters on 2 GPUs: train 32 and
// micro 4 give accumulation 32 / 4 / 2 = 4; train 32 with accumulation 2
// gives micro 32 / 2 / 2 = 8; three inconsistent values fail with
// DeepSpeed's message, pointing at the file; accumulation alone fails.
TEST_F(DeepSpeedConfigTest, BatchKeysFollowDeepSpeedsRule) {
  const std::string two = std::string(kMinimal) + "  gpus_per_node: 2\n";
  LoadOptions opts;
  opts.deepspeed_config = Write(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})");
  auto r = ParseScenario(two, "s.yaml", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->training.micro_batch_size, 4);
  EXPECT_EQ(r->training.gradient_accumulation_steps, 4);
  Write(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})");
  r = ParseScenario(two, "s.yaml", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->training.micro_batch_size, 8);
  Write(
      "{\n  \"train_batch_size\": 16,\n  \"train_micro_batch_size_per_gpu\": 4,\n  \"gradient_accumulation_steps\": "
      "4\n}");
  r = ParseScenario(two, "s.yaml", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find(opts.deepspeed_config +
                                ":2:23: Check batch related parameters. train_batch_size is "
                                "not equal to micro_batch_per_gpu * gradient_acc_step * world_size 16 != 4 * 4 * 2"),
      std::string::npos)
      << r.status().message();
  Write(R"({"gradient_accumulation_steps": 4})");
  r = ParseScenario(two, "s.yaml", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"),
            std::string::npos);
}

// fp16/bf16 set the precision (both: DeepSpeed's error); the
// activation_checkpointing section turns checkpointing on; optimizer.type
// must be one Strata models.
TEST_F(DeepSpeedConfigTest, PrecisionCheckpointingAndOptimizer) {
  LoadOptions opts;
  opts.deepspeed_config = Write(R"({"bf16": {"enabled": true}, "activation_checkpointing": {"cpu_checkpointing": true,
    "partition_activations": false, "synchronize_checkpoint_boundary": true},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})");
  auto r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->training.precision, Precision::kBf16);
  EXPECT_TRUE(r->training.activation_checkpointing);
  EXPECT_TRUE(r->training.cpu_checkpointing);
  EXPECT_TRUE(r->training.synchronize_checkpoint_boundary);
  Write(R"({"fp16": {"enabled": false}})");
  r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->training.precision, Precision::kFp32);
  Write(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})");
  r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bfloat16 and fp16 modes cannot be simultaneously enabled"), std::string::npos);
  Write(R"({"optimizer": {"type": "Lamb"}})");
  r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("optimizer.type 'Lamb' is not modelled"), std::string::npos);
}

// Keys that change nothing Strata models are accepted and listed in one
// warning, grouped by reason; a misspelt key is listed too; a knob at
// DeepSpeed's default (reduce_scatter: true) is what Strata plans: silent.
TEST_F(DeepSpeedConfigTest, NotModelledKeysAreListedInOneWarning) {
  LoadOptions opts;
  std::vector<std::string> warnings;
  opts.warnings = &warnings;
  opts.deepspeed_config = Write(R"({"train_batch_size": 8, "steps_per_print": 10, "wall_clock_breakdown": false,
    "scheduler": {"type": "WarmupLR"}, "fp16": {"enabled": true, "loss_scale": 0},
    "optimizer": {"type": "Adam", "params": {"lr": 1e-4}}, "gradient_clipping": 1.0, "trian_micro_batch": 2,
    "zero_optimization": {"stage": 2, "contiguous_gradients": false, "reduce_scatter": true}})");
  auto r = ParseScenario(kMinimal, "s.yaml", opts);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(warnings.size(), 1u);
  const std::string& w = warnings[0];
  for (const char* key : {"steps_per_print, wall_clock_breakdown: logging and profiling",
                          "scheduler:", "fp16.loss_scale: loss scaling", "optimizer.params:", "gradient_clipping:",
                          "trian_micro_batch: not a key Strata knows", "zero_optimization.contiguous_gradients:"})
    EXPECT_NE(w.find(key), std::string::npos) << key << "\n" << w;
  EXPECT_EQ(w.find("reduce_scatter"), std::string::npos) << "at DeepSpeed's default: what Strata plans\n" << w;
  EXPECT_EQ(r->training.micro_batch_size, 8);
}

// A scenario's deepspeed: key names the config, relative to its own file.
TEST_F(DeepSpeedConfigTest, ScenarioKeyNamesTheConfig) {
  const std::string ds = Write(R"({"zero_optimization": {"stage": 2}})");
  const std::filesystem::path dir = std::filesystem::path(ds).parent_path();
  const std::string yaml = dir / ("strata_scenario_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(yaml) << kMinimal << "deepspeed: " << std::filesystem::path(ds).filename().string() << "\n";
  auto r = LoadScenarioFile(yaml);
  std::filesystem::remove(yaml);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->zero.stage, 2);
}

// Hugging Face configs as shipped (scenarios/models/): the parameter count
// is the published one, exactly (worked out in the comments).
Elements HfCount(const std::string& json_path, Scenario* out = nullptr) {
  const std::string yaml = "model: {kind: transformer, hf_config: " + json_path +
                           "}\nhardware:\n  gpu: {memory: 80GiB, peak_flops: 312TFLOPS}\n  cpu: {memory: 1TiB}\n";
  auto r = ParseScenario(yaml, "s.yaml");
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return Elements(0);
  if (out != nullptr) *out = *r;
  return *CountParameters(r->model);
}

TEST(HfConfig, ParameterCountsAreThePublishedOnes) {
  const std::string dir = std::string(testing::SourceDir()) + "/scenarios/models/";
  // Llama-2-7B: untied 32000 x 4096 tables twice; per layer q, k, v, o
  // 4 x 4096^2, SwiGLU 3 x 4096 x 11008, two RMSNorms 2 x 4096; x 32; the
  // final norm 4096: 6,738,415,616 (6.74B).
  Scenario s;
  EXPECT_EQ(HfCount(dir + "llama-2-7b.json", &s).v, 6'738'415'616);
  EXPECT_EQ(s.model.mlp, MlpKind::kSwiGlu);
  EXPECT_EQ(s.model.norm, NormKind::kRmsNorm);
  EXPECT_FALSE(s.model.tie_embeddings);
  EXPECT_EQ(s.model.seq_length, 4096);
  // Llama-2-13B: 2 x 32000 x 5120 + 40 x (4 x 5120^2 + 3 x 5120 x 13824 + 2 x 5120) + 5120 = 13,015,864,320.
  EXPECT_EQ(HfCount(dir + "llama-2-13b.json").v, 13'015'864'320);
  // GPT-2 XL: wte 50257 x 1600, wpe 1024 x 1600, 48 layers of 30,740,800
  // (LayerNorms, c_attn, c_proj, c_fc, c_proj with biases), ln_f 3200; tied
  // head: 1,557,611,200 (1.56B).
  EXPECT_EQ(HfCount(dir + "gpt2-xl.json", &s).v, 1'557'611'200);
  EXPECT_TRUE(s.model.Gpt2Style());
  // OPT-13B: 50272 x 5120 tokens, (2048 + 2) x 5120 positions, 40 layers of
  // 4 x (5120^2 + 5120) + (5120 x 20480 + 20480) + (20480 x 5120 + 5120) +
  // 4 x 5120, the final LayerNorm 10,240: 12,853,473,280 (12.9B).
  EXPECT_EQ(HfCount(dir + "opt-13b.json").v, 12'853'473'280);
  // Mixtral-8x7B: per layer q, o 2 x 4096^2, k, v 2 x 4096 x 1024, the
  // router 4096 x 8, 8 experts of 3 x 4096 x 14336, two RMSNorms; x 32;
  // untied 2 x 32000 x 4096; the final norm: 46,702,792,704 (46.7B).
  EXPECT_EQ(HfCount(dir + "mixtral-8x7b.json", &s).v, 46'702'792'704);
  EXPECT_EQ(s.model.num_experts, 8);
  EXPECT_EQ(s.model.top_k(), 2);
  // More experts per token than experts is refused by key.
  auto r = ParseScenario("model: {hf_config: " + dir +
                             "mixtral-8x7b.json, experts_per_token: 9}\n"
                             "hardware:\n  gpu: {memory: 80GiB, peak_flops: 1TFLOPS}\n  cpu: {memory: 1TiB}\n",
                         "s.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("experts_per_token 9 exceeds num_experts 8"), std::string::npos)
      << r.status().message();
}

// Grouped-query attention (Mistral-7B: 32 heads, 8 K/V heads): K and V are
// 4096 x 1024 each; 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 +
// 2 x 4096) + 2 x 32000 x 4096 + 4096 = 7,241,732,096 (7.24B). An unknown
// model_type is named.
TEST_F(DeepSpeedConfigTest, HfGroupedQueryAttentionAndUnknownTypes) {
  const std::string path = Write(R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "vocab_size": 32000, "tie_word_embeddings": false})");
  Scenario s;
  EXPECT_EQ(HfCount(path, &s).v, 7'241'732'096);
  EXPECT_EQ(s.model.kv_heads(), 8);
  // A number written as a string: transformers would keep the string.
  Write(R"({"model_type": "mistral", "hidden_size": "4096", "intermediate_size": 14336,
    "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
    "vocab_size": 32000, "tie_word_embeddings": "false"})");
  auto quoted = ParseScenario("model: {kind: transformer, hf_config: " + path +
                                  "}\nhardware:\n  gpu: {memory: 80GiB, peak_flops: 1TFLOPS}\n  cpu: {memory: 1TiB}\n",
                              "s.yaml");
  ASSERT_FALSE(quoted.ok());
  EXPECT_NE(quoted.status().message().find(":1:42: hidden_size: expected a JSON number, got the string \"4096\""),
            std::string::npos)
      << quoted.status().message();
  EXPECT_NE(
      quoted.status().message().find("tie_word_embeddings: expected a JSON true or false, got the string \"false\""),
      std::string::npos)
      << quoted.status().message();
  Write(R"({"model_type": "bert", "hidden_size": 768})");
  auto r = ParseScenario("model: {kind: transformer, hf_config: " + path +
                             "}\nhardware:\n  gpu: {memory: 80GiB, peak_flops: 1TFLOPS}\n  cpu: {memory: 1TiB}\n",
                         "s.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model_type 'bert' is not one Strata reads"), std::string::npos)
      << r.status().message();
}

// --set ranges: A:B:STEP in A's unit, A:B:*FACTOR geometric; the bounds
// are included; values in base units for the sweep's numeric columns.
TEST(SetArgument, RangesExpandInTheirUnit) {
  auto r = ParseSetArgument("hardware.pcie.bandwidth=2GB/s:8GB/s:2GB/s,32GB/s");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->second, (std::vector<std::string>{"2GB/s", "4GB/s", "6GB/s", "8GB/s", "32GB/s"}));
  r = ParseSetArgument("zero_optimization.sub_group_size=1e6:8e6:*2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->second, (std::vector<std::string>{"1000000", "2000000", "4000000", "8000000"}));
  r = ParseSetArgument("k=0.1:0.3:0.1");  // floating steps keep the end
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->second.size(), 3u);
  for (const char* bad : {"k=1GB/s:2GiB/s:1GB/s", "k=2:1:1", "k=1:4:0", "k=1:4:*1", "k=1:4", "k=a:b:c"})
    EXPECT_FALSE(ParseSetArgument(bad).ok()) << bad;
  // Paths joined by ':' (policy.stripe_paths) are no range.
  r = ParseSetArgument("policy.stripe_paths=/mnt/a:/mnt/b");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->second, (std::vector<std::string>{"/mnt/a:/mnt/b"}));
  EXPECT_DOUBLE_EQ(*SetValueNumber("12GB/s"), 12e9);
  EXPECT_DOUBLE_EQ(*SetValueNumber("2GiB"), 2147483648.0);
  EXPECT_DOUBLE_EQ(*SetValueNumber("125TFLOPS"), 125e12);
  EXPECT_DOUBLE_EQ(*SetValueNumber("5e8"), 5e8);
  EXPECT_FALSE(SetValueNumber("nvme").has_value());
}

// Presets (issue #15): a machine (hardware.preset) or a GPU (gpu.model)
// fills the fields; keys beside it override them; unknown names are errors
// at the key; a GPU with neither a preset nor an efficiency is warned about.
TEST(ScenarioLoader, HardwareAndGpuPresets) {
  const char* dgx2 = R"(name: t
model: {kind: transformer, layers: 2, hidden_size: 64, num_heads: 4}
hardware:
  preset: dgx2
  nvme: {drives: 4}
)";
  std::vector<std::string> warnings;
  LoadOptions o;
  o.warnings = &warnings;
  auto r = ParseScenario(dgx2, "s.yaml", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(warnings.empty());
  const HardwareSpec& h = r->hardware;
  EXPECT_EQ(h.gpus_per_node, 16);
  EXPECT_EQ(h.gpu.sms, 80);
  EXPECT_EQ(h.gpu.memory.v, 32510LL << 20);          // nvidia-smi's total for a V100-32GB
  EXPECT_EQ(h.gpu.reserved_memory.v, 1000LL << 20);  // the CUDA context before lazy loading
  EXPECT_NEAR(h.gpu.efficiency, 83.0 / 125, 1e-12);
  EXPECT_EQ(h.pcie.gpus_per_switch, 2);
  EXPECT_EQ(h.network.nics, 8);
  EXPECT_EQ(h.nvme.drives, 4);                                   // overridden
  EXPECT_DOUBLE_EQ(h.nvme.read_bandwidth.bytes_per_s, 3.125e9);  // the preset's, per drive

  auto a100 = ParseScenario(Replace(kMinimal, "gpu: {memory: 16GiB, peak_flops: 100TFLOPS, efficiency: 1.0}",
                                    "gpu: {model: a100-80gb, efficiency: 0.7}"),
                            "s.yaml");
  ASSERT_TRUE(a100.ok()) << a100.status().message();
  // What CUDA reports (PyTorch's "79.35 GiB total capacity"), less the
  // lazily loaded CUDA context of CUDA 11.7 and later.
  EXPECT_EQ(a100->hardware.gpu.memory.v, static_cast<int64_t>(79.35 * (1LL << 30)));
  EXPECT_EQ(a100->hardware.gpu.reserved_memory.v, 300LL << 20);
  EXPECT_DOUBLE_EQ(a100->hardware.gpu.peak_flops.flops_per_s, 312e12);
  EXPECT_DOUBLE_EQ(a100->hardware.gpu.efficiency, 0.7);
  EXPECT_EQ(a100->hardware.gpu.sms, 108);

  auto reserved =
      ParseScenario(Replace(kMinimal, "efficiency: 1.0}", "efficiency: 1.0, reserved_memory: 1GiB}"), "s.yaml");
  ASSERT_TRUE(reserved.ok()) << reserved.status().message();
  EXPECT_EQ(reserved->hardware.gpu.reserved_memory.v, 1LL << 30);
  ExpectError(Replace(kMinimal, "efficiency: 1.0}", "efficiency: 1.0, reserved_memory: 16GiB}"),
              "hardware.gpu.reserved_memory: must be less than hardware.gpu.memory (16.00 GiB; got 16.00 GiB; if a GPU "
              "preset set it, give reserved_memory beside memory)");
  // A smaller memory beside a preset keeps the preset's context.
  auto small = ParseScenario(Replace(kMinimal, "gpu: {memory: 16GiB, peak_flops: 100TFLOPS, efficiency: 1.0}",
                                     "gpu: {model: v100-32gb, memory: 16GiB}"),
                             "s.yaml");
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(small->hardware.gpu.memory.v, 16LL << 30);
  EXPECT_EQ(small->hardware.gpu.reserved_memory.v, 1000LL << 20);
  ExpectError(Replace(kMinimal, "gpu: {memory: 16GiB, peak_flops: 100TFLOPS, efficiency: 1.0}",
                      "gpu: {model: v100-32gb, memory: 900MiB}"),
              "hardware.gpu.reserved_memory: must be less than hardware.gpu.memory (900.00 MiB; got 1000.00 MiB");
  ExpectError(Replace(dgx2, "preset: dgx2", "preset: dgx3"),
              "s.yaml:4:11: hardware.preset: unknown hardware preset 'dgx3' (known: dgx2)");
  ExpectError(Replace(kMinimal, "gpu: {memory: 16GiB, peak_flops: 100TFLOPS, efficiency: 1.0}", "gpu: {model: v100}"),
              "hardware.gpu.model: unknown GPU model 'v100' (known: v100-32gb");
  ExpectError(Replace(kMinimal, "efficiency: 1.0}", "efficiency: 1.0, compute_model: exact}"),
              "hardware.gpu.compute_model");
  ExpectError(Replace(dgx2, "nvme: {drives: 4}", "nvme: {drives: 0}"), "hardware.nvme.drives: must be at least 1");
  ExpectError(Replace(dgx2, "nvme: {drives: 4}", "pcie: {gpus_per_switch: 2, switch_bandwidth: 0}"),
              "hardware.pcie.switch_bandwidth: gpus_per_switch is set");

  // Neither a preset nor an efficiency: compute at peak, said out loud.
  warnings.clear();
  ASSERT_TRUE(ParseScenario(Replace(kMinimal, ", efficiency: 1.0}", "}"), "s.yaml", o).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("hardware.gpu: no model preset and no efficiency: compute runs at 100% of peak_flops"),
            std::string::npos)
      << warnings[0];
}

// hardware.cpu.cores scales adam_core_rate only: alone, it is said to
// change nothing.
TEST(ScenarioLoader, CoresWithoutAnAdamRateWarn) {
  std::vector<std::string> warnings;
  LoadOptions o;
  o.warnings = &warnings;
  const std::string yaml = Replace(kMinimal, "cpu: {memory: 64GiB}", "cpu: {memory: 64GiB, cores: 8}");
  ASSERT_TRUE(ParseScenario(yaml, "s.yaml", o).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("hardware.cpu.cores: used only with adam_core_rate"), std::string::npos) << warnings[0];
  warnings.clear();
  ASSERT_TRUE(
      ParseScenario(Replace(kMinimal, "cpu: {memory: 64GiB}", "cpu: {memory: 64GiB, cores: 8, adam_core_rate: 1e9}"),
                    "s.yaml", o)
          .ok());
  EXPECT_TRUE(warnings.empty());
}

// A bad --set value is located at the argument, not at the line of the
// file whose value it replaced.
TEST(ScenarioLoader, SetErrorsNameTheArgument) {
  LoadOptions o;
  o.overrides = {{"training.micro_batch_size", "abc"}};
  auto r = ParseScenario(std::string(kMinimal) + "training: {micro_batch_size: 2}\n", "s.yaml", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "--set 'training.micro_batch_size=abc': training.micro_batch_size: expected an integer, got 'abc'");
  o.overrides = {{"zero_optimization.stage", "7"}};  // a semantic check, located by path
  r = ParseScenario(kMinimal, "s.yaml", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("--set 'zero_optimization.stage=7': zero_optimization.stage:", 0), 0u)
      << r.status().message();
  o.overrides = {{"training.micro_batch_sise", "2"}};
  r = ParseScenario(kMinimal, "s.yaml", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("--set 'training.micro_batch_sise=2': unknown key", 0), 0u)
      << r.status().message();
}

}  // namespace
}  // namespace strata::config
