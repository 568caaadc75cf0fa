// DeepSpeed's verdict on 25 public ds_config files (tests/config/ds-corpus,
// whose README names each file's project): each is read over the built-in
// gpt-tiny scenario (one GPU, so the batch keys agree as DeepSpeed's batch
// assertion needs) and must be accepted, or refused with the rule DeepSpeed
// refuses it by, under the release the row names (policy.deepspeed_stage3).
// docs/fidelity.md (rows "Unknown keys of a DeepSpeed config" to "Public configs") cites each rule's source.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "strata/config/scenario_loader.h"
#include "test_paths.h"

namespace strata::config {
namespace {

struct Verdict {
  const char* file;
  const char* release;  // policy.deepspeed_stage3
  // nullptr: DeepSpeed accepts it; else the rule it refuses it by, as a
  // substring of Strata's error.
  const char* refusal;
};

// Rules (DeepSpeed's source):
constexpr const char* kUnknownZeroKey = "DeepSpeed refuses unknown keys here too";  // config_utils.py extra="forbid"
constexpr const char* kMaxGradNorm = "'max_grad_norm' is not supported";  // engine.py _configure_basic_optimizer
constexpr const char* kCommType = "Invalid communication_data_type";      // config.py get_communication_data_type
constexpr const char* kNegative = "stage3_max_reuse_distance: count '-1' is negative";  // zero/config.py ge=0

const Verdict kCorpus[] = {
    // stage3_param_persitence_threshold (misspelt): a key DeepSpeedZeroConfig forbids.
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3_examples_ds_zero_stage_3_config.json", "current", kUnknownZeroKey},
    // The release line these were written for read zero_optimization from a
    // dict: the misspelt key is ignored.
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3_examples_ds_zero_stage_3_config.json", "v0.5", nullptr},
    // Misspelt persistence key, and the plural cpu_offload_params that no
    // pydantic release knows.
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3_examples_ds_zero_stage_3_config_release.json", "current",
     "unknown key 'zero_optimization.cpu_offload_params'; did you mean 'cpu_offload_param'?"},
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3_examples_ds_zero_stage_3_config_release.json", "v0.5", nullptr},
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3_examples_ds_zero_stage_infinity_config.json", "current",
     kUnknownZeroKey},
    {"DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3_examples_ds_zero_stage_infinity_config.json", "v0.5", nullptr},
    // comm_overlap (for overlap_comm): forbidden.
    {"DeepSpeedExamples__Megatron-LM_scripts_ds_zero-offload_10B_config.json", "current",
     "unknown key 'zero_optimization.comm_overlap'"},
    {"DeepSpeedExamples__Megatron-LM_scripts_ds_zero-offload_10B_config.json", "v0.5", nullptr},
    {"DeepSpeedExamples__Megatron-LM_scripts_ds_zero2_config.json", "current", nullptr},
    // cpu_offload: the deprecated spelling of offload_optimizer cpu.
    {"DeepSpeedExamples__Megatron-LM_scripts_ds_zero2_cpu_offload_config.json", "current", nullptr},
    {"DeepSpeedExamples__Megatron-LM_scripts_ds_zero3_config.json", "current", nullptr},
    // train_micro_batch_size_per_gpu "auto": filled by the HF Trainer.
    {"DeepSpeedExamples__autotuning_hf_dsconfigs_ds_config_fp16_z3.json", "current", nullptr},
    {"DeepSpeedExamples__autotuning_hf_dsconfigs_ds_config_z3.json", "current", nullptr},
    {"DeepSpeedExamples__bing_bert_deepspeed_bsz4096_adam_config.json", "current", kMaxGradNorm},
    {"DeepSpeedExamples__bing_bert_deepspeed_bsz4096_adam_config.json", "v0.5", kMaxGradNorm},
    // fp16_master_weights_and_grads with ZeRO-2 and cpu_offload: allowed
    // (config.py _do_error_check, stage_1_and_2.py _enforce_cpu_offload).
    {"DeepSpeedExamples__cifar_ds_config.json", "current", nullptr},
    // stage3_max_reuse_distance -1 (Field(ge=0)) and
    // _stage3_param_persistence_threshold (forbidden).
    {"DeepSpeedExamples__inference_huggingface_ds_config_cpu.json", "current", kNegative},
    {"DeepSpeedExamples__inference_huggingface_ds_config_nvme.json", "current", kNegative},
    {"DeepSpeedExamples__training_alpaca-lora-zero3_ds_config.json", "current", nullptr},
    {"DeepSpeed__DeepSpeedExamples_Megatron-LM_scripts_ds_zero-offload_config.json", "current", nullptr},
    // A template the autotuner completes (autotuner.py _generate_experiments
    // adds train_micro_batch_size_per_gpu); the scenario's batch stands.
    {"DeepSpeed__deepspeed_autotuning_config_templates_template_zero3.json", "current", nullptr},
    {"LLaMA-Factory__examples_deepspeed_ds_z3_offload_config.json", "current", nullptr},
    // bfp16: v0.5's name for bf16, refused since; and bfloat16.loss_scale,
    // a key DeepSpeedBF16Config forbids.
    {"Megatron-DeepSpeed__ds_zero2_config_bf16.json", "current", kCommType},
    {"Megatron-DeepSpeed__ds_zero2_config_bf16.json", "v0.5", nullptr},
    {"Megatron-DeepSpeed__examples_deepspeed_sequence_parallel_ds_config_gbs16_mbs1_log1_zero3.json", "current",
     nullptr},
    {"Megatron-DeepSpeed__tmp_deepspeed.json", "current", nullptr},
    {"accelerate__tests_deepspeed_ds_config_zero2.json", "current", nullptr},
    {"accelerate__tests_deepspeed_ds_config_zero3.json", "current", nullptr},
    {"accelerate__tests_deepspeed_ds_config_zero3_model_only.json", "current", nullptr},
    {"transformers__tests_deepspeed_ds_config_zero2.json", "current", nullptr},
    // reduce_bucket_size 0 and stage3_prefetch_bucket_size 0: Field(ge=0).
    {"transformers__tests_deepspeed_ds_config_zero3.json", "current", nullptr},
};

std::string CorpusFile(const char* name) {
  return std::string(strata::testing::SourceDir()) + "/tests/config/ds-corpus/" + name;
}

Result<Scenario> Load(const char* file, const char* release) {
  LoadOptions o;
  o.deepspeed_config = CorpusFile(file);
  o.overrides = {{"policy.deepspeed_stage3", release}};
  return LoadScenarioFile("builtin:gpt-tiny", o);
}

TEST(DsCorpus, EveryFileGetsDeepSpeedsVerdict) {
  for (const Verdict& v : kCorpus) {
    SCOPED_TRACE(std::string(v.file) + " under " + v.release);
    auto r = Load(v.file, v.release);
    if (v.refusal == nullptr) {
      EXPECT_TRUE(r.ok()) << r.status().message();
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().ExitCode(), 2);
    EXPECT_NE(r.status().message().find(v.refusal), std::string::npos) << r.status().message();
  }
}

// Every shipped file is in the table.
TEST(DsCorpus, TheTableCoversTheCorpus) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(CorpusFile("")))
    if (e.path().extension() == ".json") {
      ++files;
      bool listed = false;
      for (const Verdict& v : kCorpus) listed = listed || e.path().filename() == v.file;
      EXPECT_TRUE(listed) << e.path();
    }
  EXPECT_EQ(files, 25);
}

// What the accepted files mean, where a release reads them differently.
TEST(DsCorpus, OffloadKeysAreReadAsTheReleaseReadsThem) {
  // Megatron-LM v1.1.5's ZeRO-3 release config: cpu_offload and
  // cpu_offload_params (v0.5.10 runtime/zero/config.py _initialize) put the
  // optimizer and the parameters on the CPU.
  auto v05 = Load("DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3_examples_ds_zero_stage_3_config_release.json", "v0.5");
  ASSERT_TRUE(v05.ok()) << v05.status().message();
  EXPECT_EQ(v05->zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_EQ(v05->zero.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_FALSE(v05->zero.offload_param.pin_memory);  // cpu_offload_use_pin_memory only warns in v0.5
  EXPECT_EQ(v05->zero.sub_group_size.v, 400'000'000);
  // transformers' ZeRO-3 test config: buckets of 0 elements.
  auto hf = Load("transformers__tests_deepspeed_ds_config_zero3.json", "current");
  ASSERT_TRUE(hf.ok()) << hf.status().message();
  EXPECT_EQ(hf->zero.reduce_bucket_size.v, 0);
  EXPECT_EQ(hf->zero.stage3_prefetch_bucket_size.v, 0);
  EXPECT_EQ(hf->zero.offload_param.device, OffloadDevice::kCpu);
  // Megatron-LM's ZeRO-2 offload script: cpu_offload is offload_optimizer cpu.
  auto z2 = Load("DeepSpeedExamples__Megatron-LM_scripts_ds_zero2_cpu_offload_config.json", "current");
  ASSERT_TRUE(z2.ok()) << z2.status().message();
  EXPECT_EQ(z2->zero.offload_optimizer.device, OffloadDevice::kCpu);
}

}  // namespace
}  // namespace strata::config
