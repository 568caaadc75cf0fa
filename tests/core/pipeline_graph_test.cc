// Pipeline stages of the model graph (issue #16): DeepSpeed's uniform layer
// split, the embedding on the first stage and the head on the last, a tied
// token table on both.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "strata/core/model.h"

namespace strata {
namespace {

// deepspeed/runtime/utils.py partition_uniform, as it reads.
std::vector<int> DeepSpeedPartitionUniform(int num_items, int num_parts) {
  std::vector<int> parts(static_cast<size_t>(num_parts) + 1, 0);
  if (num_items <= num_parts) {
    for (int p = 0; p <= num_parts; ++p) parts[static_cast<size_t>(p)] = std::min(p, num_items);
    return parts;
  }
  const int chunksize = num_items / num_parts, residual = num_items - chunksize * num_parts;
  for (int p = 0; p <= num_parts; ++p) parts[static_cast<size_t>(p)] = p * chunksize;
  for (int i = 0; i < residual; ++i)
    for (int p = i + 1; p <= num_parts; ++p) parts[static_cast<size_t>(p)] += 1;
  return parts;
}

TEST(PipelineGraph, LayersSplitAsDeepSpeedsPartitionUniform) {
  for (int layers : {1, 2, 3, 7, 8, 24, 96, 97})
    for (int stages = 1; stages <= std::min(layers, 16); ++stages)
      EXPECT_EQ(PipelineParts(layers, stages), DeepSpeedPartitionUniform(layers, stages)) << layers << " " << stages;
  EXPECT_EQ(PipelineParts(10, 4), (std::vector<int>{0, 3, 6, 8, 10}));  // the first two stages one more
}

ModelSpec Gpt(bool tied) {
  ModelSpec m;
  m.kind = ModelKind::kTransformer;
  m.layers = 6;
  m.hidden_size = 64;
  m.num_heads = 4;
  m.vocab_size = 500;
  m.seq_length = 32;
  m.tie_embeddings = tied;
  return m;
}

TEST(PipelineGraph, StagesPartitionTheModel) {
  for (bool tied : {true, false})
    for (int stages : {1, 2, 3, 4, 6}) {
      TrainingSpec t;
      t.micro_batch_size = 2;
      const ModelGraph whole = *BuildModelGraph(Gpt(tied), t);
      std::map<std::string, int> module_stage;
      double flops = 0;
      int64_t params = 0, tied_params = 0;
      for (int s = 0; s < stages; ++s) {
        const ModelGraph g = PipelineStageGraph(whole, s, stages);
        const std::vector<int> parts = PipelineParts(whole.num_layers, stages);
        EXPECT_EQ(g.num_layers, parts[s + 1] - parts[s]);
        EXPECT_EQ(g.model_params, whole.model_params);
        for (const ModuleSpec& m : g.modules) {
          EXPECT_TRUE(module_stage.emplace(m.name, s).second) << m.name << " on two stages";
          if (m.layer >= 0) {
            EXPECT_LT(m.layer, g.num_layers) << m.name;
            EXPECT_EQ(m.name.rfind("layer" + std::to_string(m.layer + parts[s]) + ".", 0), 0u) << m.name;
          }
          for (int gi : m.param_groups) EXPECT_LT(gi, static_cast<int>(g.param_groups.size()));
        }
        flops += g.fwd_flops;
        params += g.total_params.v;
        for (int gi : g.tied_groups) tied_params += g.param_groups[static_cast<size_t>(gi)].elements.v;
        // The boundary tensors: the hidden state of a micro batch, 2 bytes each.
        EXPECT_EQ(g.stage_input_bytes.v, s > 0 ? 2 * 2 * 32 * 64 : 0);
        EXPECT_EQ(g.stage_output_bytes.v, s + 1 < stages ? 2 * 2 * 32 * 64 : 0);
      }
      EXPECT_EQ(module_stage.size(), whole.modules.size());
      EXPECT_EQ(module_stage["embed"], 0);
      EXPECT_EQ(module_stage["lm_head"], stages - 1);
      EXPECT_EQ(module_stage["ln_f"], stages - 1);
      EXPECT_DOUBLE_EQ(flops, whole.fwd_flops);
      // A tied table is on the first and the last stage (each lists it as tied).
      const int64_t wte = 500 * 64;
      EXPECT_EQ(tied_params, tied && stages > 1 ? 2 * wte : 0);
      EXPECT_EQ(params, whole.total_params.v + (tied && stages > 1 ? wte : 0));
    }
}

}  // namespace
}  // namespace strata
