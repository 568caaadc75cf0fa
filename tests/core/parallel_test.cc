// Tensor parallelism in the model graph (issue #16): Megatron's rank order,
// per-rank shards and FLOPs, and the collectives of each block.
#include "strata/core/parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "strata/core/model.h"

namespace strata {
namespace {

// Megatron-LM's initialize_model_parallel, loop for loop: the groups every
// rank is in.
struct MegatronGroups {
  std::vector<std::vector<int>> tp, dp, pp;
};
MegatronGroups Megatron(int world, int t, int p) {
  MegatronGroups g;
  const int groups_per_stage = world / p;  // num_pipeline_model_parallel_groups
  for (int i = 0; i < p; ++i)
    for (int j = 0; j < t; ++j) {
      std::vector<int> r;
      for (int k = i * groups_per_stage + j; k < (i + 1) * groups_per_stage; k += t) r.push_back(k);
      g.dp.push_back(r);
    }
  for (int i = 0; i < world / t; ++i) {
    std::vector<int> r;
    for (int k = i * t; k < (i + 1) * t; ++k) r.push_back(k);
    g.tp.push_back(r);
  }
  for (int i = 0; i < world / p; ++i) {
    std::vector<int> r;
    for (int k = i; k < world; k += world / p) r.push_back(k);
    g.pp.push_back(r);
  }
  return g;
}

TEST(Parallel, GroupsFollowMegatronsRankOrder) {
  for (auto [n, t, p] : {std::tuple{8, 2, 1}, {8, 1, 2}, {16, 2, 2}, {16, 4, 2}, {64, 8, 8}, {32, 4, 1}, {12, 3, 2}}) {
    const ParallelLayout l{n, t, p};
    const MegatronGroups m = Megatron(n, t, p);
    for (int r = 0; r < n; ++r) {
      auto has = [&](const std::vector<std::vector<int>>& gs, const std::vector<int>& g) {
        return std::find(gs.begin(), gs.end(), g) != gs.end();
      };
      EXPECT_TRUE(has(m.tp, l.TensorGroup(r))) << n << " " << t << " " << p << " rank " << r;
      EXPECT_TRUE(has(m.dp, l.DataGroup(r))) << n << " " << t << " " << p << " rank " << r;
      EXPECT_TRUE(has(m.pp, l.PipelineGroup(r))) << n << " " << t << " " << p << " rank " << r;
      EXPECT_EQ(l.TensorGroup(r)[static_cast<size_t>(l.TensorRank(r))], r);
      EXPECT_EQ(l.DataGroup(r)[static_cast<size_t>(l.DataRank(r))], r);
      EXPECT_EQ(l.PipelineGroup(r)[static_cast<size_t>(l.PipelineRank(r))], r);
    }
  }
  // Spelled out: 16 ranks, tensor 2, pipeline 2 (data 4).
  const ParallelLayout l{16, 2, 2};
  EXPECT_EQ(l.TensorGroup(13), (std::vector<int>{12, 13}));
  EXPECT_EQ(l.DataGroup(13), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(l.PipelineGroup(13), (std::vector<int>{5, 13}));
}

ModelSpec Gpt() {
  ModelSpec m;
  m.layers = 3;
  m.hidden_size = 512;
  m.num_heads = 8;
  m.vocab_size = 50257;  // GPT-2's: padded as Megatron pads it
  m.seq_length = 256;
  return m;
}

// Each rank's parameters and FLOPs are Megatron's split of the model:
// QKV and fc1 by columns (weights and biases), the projections by rows
// (their biases and the norms replicated), the token table by rows of the
// padded vocabulary (multiple of 128 x t), the position table replicated.
TEST(Parallel, ShardsAreMegatronsSplit) {
  TrainingSpec tr;
  tr.micro_batch_size = 2;
  const ModelSpec m = Gpt();
  const int64_t h = 512, L = 3, s = 256;
  const ModelGraph whole = *BuildModelGraph(m, tr);
  for (int t : {2, 4}) {
    ParallelismSpec par;
    par.tensor = t;
    const ModelGraph g = *BuildModelGraph(m, tr, par);
    const int64_t Vp = (50257 + 128 * t - 1) / (128 * t) * (128 * t);
    EXPECT_EQ(Vp, t == 2 ? 50432 : 50688);
    const int64_t per_layer = h * 3 * h / t + 3 * h / t    // qkv
                              + h / t * h + h              // attn_out
                              + h * 4 * h / t + 4 * h / t  // fc1
                              + 4 * h / t * h + h          // fc2
                              + 4 * h;                     // ln1, ln2
    const int64_t expected = L * per_layer + Vp / t * h + s * h + 2 * h;
    EXPECT_EQ(g.total_params.v, expected) << t;
    EXPECT_EQ(g.model_params, whole.total_params);
    // FLOPs: every GEMM and the attention divided by t; the head over the
    // padded vocabulary.
    const double T = 2.0 * s;
    const double layer = 24 * T * h * h + 4 * T * s * h;
    EXPECT_NEAR(g.fwd_flops, (L * layer + 2 * T * h * Vp) / t, 1e-6 * g.fwd_flops) << t;
    for (const ModuleSpec& mod : g.modules) {
      EXPECT_NEAR(mod.fwd.gemm_flops(), mod.fwd_flops, 1e-9 * mod.fwd_flops + 1e-9) << mod.name;
      EXPECT_NEAR(mod.bwd.gemm_flops(), 2 * mod.fwd_flops, 1e-9 * mod.fwd_flops + 1e-9) << mod.name;
    }
  }
}

// One allreduce forward and one backward per attention and per MLP block,
// of a whole T x h activation; with sequence parallelism each becomes an
// allgather and a reduce-scatter (and the backward gathers the sharded
// inputs of QKV and fc1 again). Activations shrink as Korthikanti et al.
// give: s b h (10 + 24/t + 5 a s/(h t)) per layer, and s b h (34/t + 5 a s /
// (h t)) with sequence parallelism.
TEST(Parallel, CollectivesAndActivationsPerLayer) {
  TrainingSpec tr;
  tr.micro_batch_size = 2;
  const ModelSpec m = Gpt();
  const double h = 512, s = 256, b = 2, a = 8, t = 4;
  const Bytes act(static_cast<int64_t>(2 * b * s * h));
  for (bool sp : {false, true}) {
    ParallelismSpec par;
    par.tensor = 4;
    par.sequence_parallel = sp;
    const ModelGraph g = *BuildModelGraph(m, tr, par);
    std::map<std::pair<TpCommKind, bool>, int> fwd, bwd;  // (kind, before) -> count, layer 0
    double layer_act = 0;
    for (const ModuleSpec& mod : g.modules) {
      if (mod.layer != 0) continue;
      layer_act += static_cast<double>(mod.act_bytes.v);
      for (const TpComm& c : mod.tp_fwd) {
        EXPECT_EQ(c.bytes, act) << mod.name;
        ++fwd[{c.kind, c.before}];
      }
      for (const TpComm& c : mod.tp_bwd) {
        EXPECT_EQ(c.bytes, act) << mod.name;
        ++bwd[{c.kind, c.before}];
      }
    }
    using K = TpCommKind;
    if (!sp) {
      EXPECT_EQ(fwd, (std::map<std::pair<K, bool>, int>{{{K::kAllReduce, false}, 2}}));
      EXPECT_EQ(bwd, (std::map<std::pair<K, bool>, int>{{{K::kAllReduce, false}, 2}}));
      EXPECT_NEAR(layer_act, s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 8);
    } else {
      EXPECT_EQ(fwd, (std::map<std::pair<K, bool>, int>{{{K::kAllGather, false}, 2}, {{K::kReduceScatter, false}, 2}}));
      EXPECT_EQ(bwd, (std::map<std::pair<K, bool>, int>{{{K::kAllGather, true}, 4}, {{K::kReduceScatter, false}, 2}}));
      EXPECT_NEAR(layer_act, s * b * h * (34 / t + 5 * a * s / (h * t)), 8);
    }
  }
}

// DeepSpeed's partition_activations: each tensor-parallel rank keeps a
// slice of the layer's checkpoint and gathers it before recomputing.
TEST(Parallel, PartitionedCheckpoints) {
  TrainingSpec tr;
  tr.micro_batch_size = 2;
  tr.activation_checkpointing = true;
  ParallelismSpec par;
  par.tensor = 4;
  const ModelGraph whole = *BuildModelGraph(Gpt(), tr, par);
  tr.partition_activations = true;
  const ModelGraph parted = *BuildModelGraph(Gpt(), tr, par);
  EXPECT_EQ(parted.checkpoint_bytes[0].v * 4, whole.checkpoint_bytes[0].v);
  int gathers = 0;
  for (const ModuleSpec& m : parted.modules)
    for (const TpComm& c : m.tp_recompute) {
      EXPECT_EQ(c.kind, TpCommKind::kAllGather);
      EXPECT_EQ(c.bytes, whole.checkpoint_bytes[0]);  // the whole layer input
      ++gathers;
    }
  EXPECT_EQ(gathers, 3);  // one per layer
}

// DeepSpeed's TiledLinear for the MLP (ZeRO-Infinity's memory-centric
// tiling): the same parameters and FLOPs in in_splits x out_splits modules
// per Linear, the largest module smaller, the collectives kept.
TEST(Parallel, TiledMlpKeepsParametersFlopsAndCollectives) {
  TrainingSpec tr;
  tr.micro_batch_size = 2;
  ParallelismSpec par;
  par.tensor = 2;
  ModelSpec m = Gpt();
  const ModelGraph plain = *BuildModelGraph(m, tr, par);
  m.tiled_in_splits = 3;  // 512 = 171 + 171 + 170 (partition_uniform)
  m.tiled_out_splits = 2;
  const ModelGraph tiled = *BuildModelGraph(m, tr, par);
  EXPECT_EQ(tiled.total_params, plain.total_params);
  EXPECT_NEAR(tiled.fwd_flops, plain.fwd_flops, 1e-9 * plain.fwd_flops);
  EXPECT_EQ(tiled.modules.size(), plain.modules.size() + 3 * 2 * (6 - 1));
  auto largest_mlp = [](const ModelGraph& g) {  // the most parameters of one MLP module
    int64_t most = 0;
    for (const ModuleSpec& mod : g.modules) {
      if (mod.name.find(".fc") == std::string::npos) continue;
      int64_t n = 0;
      for (int gi : mod.param_groups) n += g.param_groups[static_cast<size_t>(gi)].elements.v;
      most = std::max(most, n);
    }
    return most;
  };
  // fc1's shard: 512 x 1024 + 1024 bias = 525,312; its largest tile 171 x
  // 512 (or 170 x 512 + the 512 bias) = 87,552, a sixth.
  EXPECT_EQ(largest_mlp(plain), 525'312);
  EXPECT_EQ(largest_mlp(tiled), 87'552);
  auto comms = [](const ModelGraph& g) {
    size_t n = 0;
    for (const ModuleSpec& mod : g.modules) n += mod.tp_fwd.size() + mod.tp_bwd.size();
    return n;
  };
  EXPECT_EQ(comms(tiled), comms(plain));
  double act_plain = 0, act_tiled = 0;
  for (const ModuleSpec& mod : plain.modules) act_plain += static_cast<double>(mod.act_bytes.v);
  for (const ModuleSpec& mod : tiled.modules) act_tiled += static_cast<double>(mod.act_bytes.v);
  EXPECT_EQ(act_tiled, act_plain);
  const ModuleSpec* t = nullptr;
  for (const ModuleSpec& mod : tiled.modules)
    if (mod.name == "layer0.fc1.tile1_2") t = &mod;
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->fwd.gemms.size(), 1u);
  EXPECT_EQ(t->fwd.gemms[0], (Gemm{2 * 256, 4 * 512 / 2 / 2, 170, 1}));  // T x out split x in split
}

// The MLP's layers as Megatron's MLP block (BuildMlp): 2k column-parallel,
// 2k + 1 row-parallel (its bias whole), an odd last layer whole; each
// rank's FLOPs the whole layer's / T; the row layer's output all-reduced in
// the forward, a column layer's input gradient in the backward (not layer
// 0's: nothing needs it).
TEST(Parallel, MlpLayersSplitAsMegatronsMlpBlock) {
  ModelSpec m;
  m.kind = ModelKind::kMlp;
  m.sizes = {32, 64, 48, 16, 10};  // four layers: column, row, column, row
  TrainingSpec tr;
  tr.micro_batch_size = 8;
  tr.precision = Precision::kBf16;
  const ModelGraph whole = *BuildModelGraph(m, tr, {});
  for (int T : {2, 4, 8, 16}) {
    ParallelismSpec par;
    par.tensor = T;
    const ModelGraph g = *BuildModelGraph(m, tr, par);
    ASSERT_EQ(g.modules.size(), 4u);
    const int64_t w[4] = {32 * 64 / T, 64 * 48 / T, 48 * 16 / T, 16 * 10 / T};
    const int64_t b[4] = {64 / T, 48, 16 / T, 10};
    for (int l = 0; l < 4; ++l) {
      const ModuleSpec& mod = g.modules[static_cast<size_t>(l)];
      ASSERT_EQ(mod.param_groups.size(), 2u);
      EXPECT_EQ(g.param_groups[static_cast<size_t>(mod.param_groups[0])].elements.v, w[l])
          << "T " << T << " layer " << l;
      EXPECT_EQ(g.param_groups[static_cast<size_t>(mod.param_groups[1])].elements.v, b[l])
          << "T " << T << " layer " << l;
      EXPECT_DOUBLE_EQ(mod.fwd_flops * T, whole.modules[static_cast<size_t>(l)].fwd_flops);
      const bool row = l % 2 == 1;
      ASSERT_EQ(mod.tp_fwd.size(), row ? 1u : 0u);
      ASSERT_EQ(mod.tp_bwd.size(), !row && l > 0 ? 1u : 0u);
      if (row) {
        EXPECT_EQ(mod.tp_fwd[0],
                  (TpComm{TpCommKind::kAllReduce, Bytes(8 * m.sizes[static_cast<size_t>(l) + 1] * 2), false}));
      } else if (l > 0) {
        EXPECT_EQ(mod.tp_bwd[0],
                  (TpComm{TpCommKind::kAllReduce, Bytes(8 * m.sizes[static_cast<size_t>(l)] * 2), false}));
      }
      // A layer's input: whole before a column layer, split before a row one.
      EXPECT_EQ(g.checkpoint_bytes[static_cast<size_t>(l)].v, 8 * m.sizes[static_cast<size_t>(l)] / (row ? T : 1) * 2);
    }
    EXPECT_EQ(g.model_params, whole.total_params);
  }
  // Three layers: the last is whole on every rank.
  m.sizes = {32, 64, 48, 10};
  ParallelismSpec par;
  par.tensor = 2;
  const ModelGraph g = *BuildModelGraph(m, tr, par);
  EXPECT_EQ(g.param_groups[static_cast<size_t>(g.modules[2].param_groups[0])].elements.v, 48 * 10);
  EXPECT_TRUE(g.modules[2].tp_fwd.empty() && g.modules[2].tp_bwd.empty());
}

}  // namespace
}  // namespace strata
