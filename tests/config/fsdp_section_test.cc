// framework: fsdp's section (docs/fsdp.md): each form read, each refusal
// with its key and position.
#include <gtest/gtest.h>

#include "strata/config/scenario_loader.h"

namespace strata::config {
namespace {

// Two nodes of four GPUs, a 4-layer transformer.
const char* kBase = R"(name: f
model: {kind: transformer, layers: 4, hidden_size: 64, num_heads: 4}
hardware:
  nodes: 2
  gpus_per_node: 4
  gpu: {memory: 16GiB, peak_flops: 100TFLOPS, efficiency: 1.0}
  cpu: {memory: 64GiB}
training: {precision: bf16}
)";

Result<Scenario> Parse(const std::string& extra) { return ParseScenario(std::string(kBase) + extra, "f.yaml"); }

void ExpectError(const std::string& extra, const std::string& needle, const std::string& where) {
  auto r = Parse(extra);
  ASSERT_FALSE(r.ok()) << extra;
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(where), std::string::npos) << r.status().message();
}

TEST(Fsdp, DefaultsAreFsdp2s) {
  auto r = Parse("framework: fsdp\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->framework, Framework::kFsdp);
  EXPECT_TRUE(r->fsdp.units.empty());
  EXPECT_FALSE(r->fsdp.root_only);
  EXPECT_EQ(r->fsdp.reshard_after_forward, -1);
  EXPECT_FALSE(r->fsdp.param_dtype.has_value());
  EXPECT_FALSE(r->fsdp.offload_cpu);
  EXPECT_EQ(r->fsdp.forward_prefetch, 0);
  EXPECT_EQ(r->fsdp.backward_prefetch, 1);
  auto d = Parse("");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->framework, Framework::kDeepSpeed);
}

TEST(Fsdp, ReadsEveryKey) {
  auto r = Parse(R"(framework: fsdp
fsdp:
  units: [1, 3]
  reshard_after_forward: 2
  mp_policy: {param_dtype: bf16, reduce_dtype: float32, output_dtype: bf16, cast_forward_inputs: false}
  offload_policy: cpu
  pin_memory: false
  forward_prefetch: 1
  backward_prefetch: 2
  mesh: {replicate: 2, shard: 4}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const FsdpSpec& f = r->fsdp;
  EXPECT_EQ(f.units, (std::vector<int>{1, 3}));
  EXPECT_EQ(f.reshard_after_forward, 2);
  EXPECT_EQ(f.param_dtype, Precision::kBf16);
  EXPECT_EQ(f.reduce_dtype, Precision::kFp32);
  EXPECT_TRUE(f.offload_cpu);
  EXPECT_FALSE(f.pin_memory);
  EXPECT_EQ(f.forward_prefetch, 1);
  EXPECT_EQ(f.backward_prefetch, 2);
  EXPECT_EQ(f.replicate, 2);
  EXPECT_EQ(f.shard, 4);
  auto root = Parse("framework: fsdp\nfsdp: {units: root, reshard_after_forward: false}\n");
  ASSERT_TRUE(root.ok()) << root.status().message();
  EXPECT_TRUE(root->fsdp.root_only);
  EXPECT_EQ(root->fsdp.reshard_after_forward, 0);
  auto one = Parse("framework: fsdp\nfsdp: {reshard_after_forward: 1}\n");  // 1 is false, as FSDP2 reads it
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->fsdp.reshard_after_forward, 0);
}

TEST(Fsdp, Fsdp1StrategiesMapToFsdp2Settings) {
  auto strategy = [](const char* name) {
    auto r = Parse(std::string("framework: fsdp\nfsdp: {sharding_strategy: ") + name + "}\n");
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().message();
    return r.ok() ? r->fsdp : FsdpSpec{};
  };
  EXPECT_EQ(strategy("FULL_SHARD").reshard_after_forward, -1);
  EXPECT_EQ(strategy("SHARD_GRAD_OP").reshard_after_forward, 0);
  EXPECT_EQ(strategy("NO_SHARD").shard, 1);
  const FsdpSpec hybrid = strategy("HYBRID_SHARD");
  EXPECT_EQ(hybrid.shard, 4);  // within a node of 4 GPUs
  EXPECT_EQ(hybrid.reshard_after_forward, -1);
  const FsdpSpec zero2 = strategy("_HYBRID_SHARD_ZERO2");
  EXPECT_EQ(zero2.shard, 4);
  EXPECT_EQ(zero2.reshard_after_forward, 0);
  ExpectError("framework: fsdp\nfsdp: {sharding_strategy: FULL_SHARD, reshard_after_forward: false}\n",
              "contradicts reshard_after_forward", "f.yaml:10:");
  ExpectError("framework: fsdp\nfsdp: {sharding_strategy: HYBRID_SHARD, mesh: {replicate: 2}}\n", "not both",
              "f.yaml:10:");
}

TEST(Fsdp, RefusesWhatFsdpDoesNotHave) {
  ExpectError("fsdp: {units: root}\n", "read under framework: fsdp", "f.yaml:9:");
  ExpectError("framework: fsdp\nzero_optimization: {stage: 3}\n", "zero_optimization is DeepSpeed's", "f.yaml:10:");
  ExpectError("framework: fsdp\naio: {block_size: 1048576}\n", "aio is DeepSpeed's", "f.yaml:10:");
  ExpectError("framework: fsdp\nfsdp: {offload_policy: nvme}\n", "FSDP has no NVMe offload", "f.yaml:10:");
  ExpectError("framework: fsdp\nfsdp: {units: [1, 2]}\n", "the units hold 3 blocks; the model has 4", "fsdp.units");
  ExpectError("framework: fsdp\nfsdp: {mesh: {replicate: 3, shard: 4}}\n", "must be the 8 data-parallel ranks",
              "fsdp.mesh");
  ExpectError("framework: fsdp\nfsdp: {reshard_after_forward: 3}\n", "must divide the shard group's 8 ranks",
              "fsdp.reshard_after_forward");
  ExpectError("framework: fsdp\nfsdp: {reshard_after_forward: sometimes}\n", "expected true, false or a group size",
              "f.yaml:10:");
  ExpectError("framework: fsdp\nparallelism: {tensor: 2}\n", "data parallelism alone", "parallelism.tensor");
  ExpectError("framework: fsdp\nfsdp: {unit: root}\n", "unknown", "f.yaml:10:");
  ExpectError("framework: fsdp\nfsdp: {mp_policy: {param_dtype: fp8}}\n", "param_dtype", "f.yaml:10:");
  // --deepspeed beside framework: fsdp names the argument.
  LoadOptions lo;
  lo.deepspeed_config = "ds.json";
  auto r = ParseScenario(std::string(kBase) + "framework: fsdp\n", "f.yaml", lo);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--deepspeed: a DeepSpeed config does not apply"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace strata::config
