#include "strata/core/model.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

ModelSpec Gpt(int layers, int64_t h, int heads, int64_t vocab, int64_t seq) {
  ModelSpec m;
  m.kind = ModelKind::kTransformer;
  m.layers = layers;
  m.hidden_size = h;
  m.num_heads = heads;
  m.vocab_size = vocab;
  m.seq_length = seq;
  return m;
}

TEST(Model, TransformerParameterCountMatchesClosedForm) {
  const ModelSpec m = Gpt(48, 1600, 25, 50304, 1024);
  const int64_t h = 1600, l = 48;
  // 12h^2 + 13h per layer (QKV, out, two MLP matrices, biases, two LayerNorms),
  // tied embeddings (V + s) h, final LayerNorm 2h.
  EXPECT_EQ(CountParameters(m)->v, l * (12 * h * h + 13 * h) + (50304 + 1024) * h + 2 * h);
}

// Sizes past 64 bits are an error naming the quantity, never a wrap (the
// scenario checks keep valid inputs far from this; the graph checks anyway).
TEST(Model, OverflowingSizesAreErrorsNamingTheQuantity) {
  auto g = BuildModelGraph(Gpt(1, 3'000'000'000, 1, 100, 16), TrainingSpec{});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(g.status().message().find("layer0.qkv.weight overflows a 64-bit count (3000000000 x 9000000000)"),
            std::string::npos)
      << g.status().message();
  TrainingSpec t;
  t.micro_batch_size = 1 << 30;
  auto acts = BuildModelGraph(Gpt(1, 1 << 20, 1, 100, 1 << 20), t);  // 2^70 tokens x hidden of activations
  ASSERT_FALSE(acts.ok());
  EXPECT_NE(acts.status().message().find("embed activation bytes overflows"), std::string::npos)
      << acts.status().message();
  ModelSpec mlp;
  mlp.kind = ModelKind::kMlp;
  mlp.sizes = {int64_t{1} << 40, int64_t{1} << 40};
  auto c = CountParameters(mlp);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("fc0.weight overflows"), std::string::npos) << c.status().message();
}

TEST(Model, ModelFlopsMatchNarayanan) {
  TrainingSpec t;
  t.micro_batch_size = 5;
  const ModelSpec m = Gpt(128, 25600, 160, 50304, 1024);
  const ModelGraph g = *BuildModelGraph(m, t);
  const double B = 5, s = 1024, l = 128, h = 25600, V = 50304;
  const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * h * l));
  EXPECT_NEAR(3 * g.fwd_flops / expected, 1.0, 1e-12);
  EXPECT_NEAR(static_cast<double>(g.total_params.v) / 1.0e12, 1.0, 0.02);  // the "1T" model
}

TEST(Model, TransformerActivationsMatchKorthikanti) {
  TrainingSpec t;
  t.micro_batch_size = 2;
  const ModelSpec m = Gpt(2, 1024, 16, 1000, 512);
  const ModelGraph g = *BuildModelGraph(m, t);
  int64_t layer0 = 0;
  for (const auto& mod : g.modules)
    if (mod.layer == 0) layer0 += mod.act_bytes.v;
  const double s = 512, b = 2, h = 1024, a = 16;
  EXPECT_EQ(layer0, static_cast<int64_t>(s * b * h * (34 + 5 * a * s / h)));
  ASSERT_EQ(g.checkpoint_bytes.size(), 2u);
  EXPECT_EQ(g.checkpoint_bytes[0].v, static_cast<int64_t>(2 * s * b * h));
}

TEST(Model, MlpLayersAndShapes) {
  ModelSpec m;
  m.kind = ModelKind::kMlp;
  m.sizes = {1000, 1000, 10};
  TrainingSpec t;
  t.micro_batch_size = 4;
  const ModelGraph g = *BuildModelGraph(m, t);
  ASSERT_EQ(g.modules.size(), 2u);
  // One group per tensor (DeepSpeed works per tensor): weight, then bias.
  ASSERT_EQ(g.param_groups.size(), 4u);
  EXPECT_EQ(g.param_groups[0].name, "fc0.weight");
  EXPECT_EQ(g.param_groups[0].elements.v, 1000 * 1000);
  EXPECT_EQ(g.param_groups[1].name, "fc0.bias");
  EXPECT_EQ(g.param_groups[1].elements.v, 1000);
  EXPECT_EQ(g.param_groups[3].elements.v, 10);
  EXPECT_EQ(g.modules[1].param_groups, (std::vector<int>{2, 3}));
  EXPECT_EQ(g.total_params.v, 1'011'010);
  EXPECT_EQ(g.largest_layer.v, 1'001'000);  // a module's weight and bias
  EXPECT_EQ(g.largest_tensor.v, 1'000'000);
  EXPECT_DOUBLE_EQ(g.modules[0].fwd_flops, 2.0 * 4 * 1000 * 1000);
  EXPECT_EQ(g.num_layers, 2);
}

// GPT: each module's tensors in order; the LM head uses the token table only.
TEST(Model, TransformerTensorsPerModule) {
  TrainingSpec t;
  const ModelGraph g = *BuildModelGraph(Gpt(1, 8, 2, 100, 16), t);
  std::vector<std::string> names;
  for (const auto& pg : g.param_groups) names.push_back(pg.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed.wte", "embed.wpe", "layer0.ln1.weight", "layer0.ln1.bias",
                                             "layer0.qkv.weight", "layer0.qkv.bias", "layer0.attn_out.weight",
                                             "layer0.attn_out.bias", "layer0.ln2.weight", "layer0.ln2.bias",
                                             "layer0.fc1.weight", "layer0.fc1.bias", "layer0.fc2.weight",
                                             "layer0.fc2.bias", "ln_f.weight", "ln_f.bias"}));
  EXPECT_EQ(g.param_groups[1].elements.v, 16 * 8);  // wpe: seq x hidden
  EXPECT_EQ(g.param_groups[5].elements.v, 3 * 8);   // qkv bias
  EXPECT_EQ(g.modules.front().param_groups, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.modules.back().name, "lm_head");
  EXPECT_EQ(g.modules.back().param_groups, (std::vector<int>{0}));
  EXPECT_EQ(g.largest_layer.v, (100 + 16) * 8);  // the embedding's two tables
}

// Mixture of experts (Mixtral's block): one module holds the router and
// every expert's tensors, as DeepSpeed's ZeRO-3 leaf module fetches them
// together; FLOPs count the router and top_k experts per token.
TEST(Model, MixtureOfExpertsIsOneLeafModule) {
  TrainingSpec t;
  t.micro_batch_size = 1;
  ModelSpec m = Gpt(1, 8, 2, 100, 16);
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRotary;
  m.bias = false;
  m.ffn_hidden_size = 12;
  m.num_experts = 4;
  m.experts_per_token = 2;
  const ModelGraph g = *BuildModelGraph(m, t);
  const ModuleSpec* moe = nullptr;
  for (const auto& mod : g.modules)
    if (mod.name == "layer0.moe") moe = &mod;
  ASSERT_NE(moe, nullptr);
  for (const auto& mod : g.modules) EXPECT_NE(mod.name, "layer0.fc1");
  ASSERT_EQ(moe->param_groups.size(), 1u + 4 * 3);
  EXPECT_EQ(g.param_groups[moe->param_groups[0]].name, "layer0.moe.gate.weight");
  EXPECT_EQ(g.param_groups[moe->param_groups[0]].elements.v, 8 * 4);
  EXPECT_EQ(g.param_groups[moe->param_groups[1]].name, "layer0.moe.experts.0.w1.weight");
  EXPECT_EQ(g.param_groups[moe->param_groups.back()].name, "layer0.moe.experts.3.w3.weight");
  // 16 tokens: router 2*16*8*4, two experts of three 8 x 12 matrices.
  EXPECT_DOUBLE_EQ(moe->fwd_flops, 2.0 * 16 * 8 * 4 + 2 * 3 * 2.0 * 16 * 8 * 12);
  EXPECT_EQ(g.largest_layer.v, 8 * 4 + 4 * 3 * 8 * 12);
  EXPECT_FALSE(m.Gpt2Style());
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Each tensor's first dimension as PyTorch lays it out (what FSDP2 shards):
// a Linear's weight [out, in], a table [rows, hidden], a vector its length.
TEST(Model, TensorRowsAreTheirFirstDimension) {
  ModelSpec llama = Gpt(2, 64, 4, 100, 16);
  llama.num_kv_heads = 2;
  llama.mlp = MlpKind::kSwiGlu;
  llama.ffn_hidden_size = 176;
  llama.num_experts = 4;  // a Mixtral block: the gate's rows are the experts
  ModelSpec mlp;
  mlp.kind = ModelKind::kMlp;
  mlp.sizes = {32, 48, 16};
  for (const ModelSpec& m : {Gpt(2, 64, 4, 100, 16), llama, mlp}) {
    const ModelGraph g = *BuildModelGraph(m, TrainingSpec{});
    for (const ParamGroupSpec& p : g.param_groups) {
      ASSERT_GT(p.rows, 0) << p.name;
      EXPECT_EQ(p.elements.v % p.rows, 0) << p.name;
      if (p.vector) EXPECT_EQ(p.rows, p.elements.v) << p.name;
    }
  }
  auto rows = [](const ModelGraph& g, const std::string& name) {
    for (const auto& p : g.param_groups)
      if (p.name == name) return p.rows;
    ADD_FAILURE() << "no " << name;
    return int64_t{-1};
  };
  const ModelGraph gpt = *BuildModelGraph(Gpt(2, 64, 4, 100, 16), TrainingSpec{});
  EXPECT_EQ(rows(gpt, "embed.wte"), 100);
  EXPECT_EQ(rows(gpt, "embed.wpe"), 16);
  EXPECT_EQ(rows(gpt, "layer0.qkv.weight"), 3 * 64);
  EXPECT_EQ(rows(gpt, "layer0.fc1.weight"), 4 * 64);
  EXPECT_EQ(rows(gpt, "layer0.fc2.weight"), 64);
  const ModelGraph moe = *BuildModelGraph(llama, TrainingSpec{});
  EXPECT_EQ(rows(moe, "layer0.qkv.weight"), 64 + 2 * 32);
  EXPECT_EQ(rows(moe, "layer0.moe.gate.weight"), 4);
  EXPECT_EQ(rows(moe, "layer0.moe.experts.1.w1.weight"), 176);
  EXPECT_EQ(rows(moe, "layer0.moe.experts.1.w2.weight"), 64);
  const ModelGraph m = *BuildModelGraph(mlp, TrainingSpec{});
  EXPECT_EQ(rows(m, "fc0.weight"), 48);
  EXPECT_EQ(rows(m, "fc1.weight"), 16);
}

}  // namespace
}  // namespace strata
