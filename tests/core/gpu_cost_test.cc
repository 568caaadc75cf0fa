// The compute model (core/gpu_cost.h) against hand-computed answers, the
// model graph's kernels against its FLOP counts, and the presets.
#include "strata/core/gpu_cost.h"

#include <gtest/gtest.h>

#include "strata/core/model.h"
#include "strata/core/presets.h"

namespace strata {
namespace {

GpuSpec V100() {
  GpuSpec g;
  EXPECT_TRUE(GpuPreset("v100-32gb", &g));
  return g;
}

TEST(GpuCost, LargeGemmRunsAtPeakTimesEfficiencyTimesWaveQuantisation) {
  const GpuSpec g = V100();  // 125 TFLOPS, efficiency 83/125, 80 SMs, 128 x 128 tiles
  const Gemm x{8192, 8192, 8192};
  // 64 x 64 = 4096 tiles in ceil(4096 / 80) = 52 waves of 80.
  const double shape = 4096.0 / (52 * 80);
  EXPECT_DOUBLE_EQ(GemmShapeEfficiency(x, g), shape);
  const double flops = 2.0 * 8192 * 8192 * 8192;
  EXPECT_NEAR(GemmSeconds(x, 2, g), flops / (83e12 * shape), 1e-12);
  // Compute-bound: its 3 x 8192^2 x 2 bytes take 0.9 ms at 900 GB/s.
  EXPECT_GT(GemmSeconds(x, 2, g), 3.0 * 8192 * 8192 * 2 / 900e9);
}

TEST(GpuCost, SkinnyGemmLeavesSmsIdle) {
  const GpuSpec g = V100();
  // One 128 x 128 tile: one SM of 80 works.
  const Gemm one{128, 128, 8192};
  EXPECT_DOUBLE_EQ(GemmShapeEfficiency(one, g), 1.0 / 80);
  EXPECT_NEAR(GemmSeconds(one, 2, g), one.flops() / (83e12 / 80), 1e-15);
  // 81 tiles need two waves: barely more than half the rate of 80 tiles.
  const Gemm w81{128 * 81, 128, 4096}, w80{128 * 80, 128, 4096};
  EXPECT_DOUBLE_EQ(GemmShapeEfficiency(w80, g), 1.0);
  EXPECT_DOUBLE_EQ(GemmShapeEfficiency(w81, g), 81.0 / 160);
  // Edge tiles padded: 130 rows fill two tiles' rows.
  EXPECT_DOUBLE_EQ(GemmShapeEfficiency(Gemm{130, 128, 64, 40}, g), 130.0 * 128 * 40 / (80 * 128 * 128));
}

TEST(GpuCost, MatrixVectorProductIsBoundByMemory) {
  GpuSpec g = V100();
  g.sms = 0;  // no quantisation: the roofline alone
  const Gemm gemv{1, 8192, 8192};
  const double bytes = 2.0 * (8192 + 8192.0 * 8192 + 8192);
  EXPECT_DOUBLE_EQ(gemv.bytes(2), bytes);
  EXPECT_NEAR(GemmSeconds(gemv, 2, g), bytes / 900e9, 1e-15);
}

TEST(GpuCost, MemoryBoundKernelsRunAtHbmBandwidthPlusLaunches) {
  const GpuSpec g = V100();  // 900 GB/s, 5 us per launch
  KernelWork w;
  w.mem_bytes = 9e8;
  w.launches = 3;
  EXPECT_NEAR(KernelSeconds(w, g), 1e-3 + 3 * 5e-6, 1e-15);
  // The flat model charges FLOPs only, and memory-bound work nothing.
  GpuSpec flat = g;
  flat.compute_model = ComputeModel::kFlat;
  EXPECT_DOUBLE_EQ(ComputeSeconds(83e9, &w, flat), 1e-3);
  EXPECT_NEAR(ComputeSeconds(83e9, &w, g), KernelSeconds(w, g), 0);
}

TEST(GpuCost, CpuAdamIsBoundByCoresOrByMemory) {
  CpuSpec c;
  c.memory_bandwidth = Bandwidth{100e9};
  c.cores = 10;
  c.adam_core_rate = 1e8;  // 1e9 parameters/s on 10 cores
  // 1e9 parameters touching 16 GB: memory needs 0.16 s, the cores 1 s.
  EXPECT_DOUBLE_EQ(CpuAdamSeconds(1e9, 16e9, c), 1.0);
  // With 100 cores the memory binds.
  c.cores = 100;
  EXPECT_DOUBLE_EQ(CpuAdamSeconds(1e9, 16e9, c), 0.16);
  // Without a core rate: memory only, as before the model existed.
  c.adam_core_rate = 0;
  c.cores = 1;
  EXPECT_DOUBLE_EQ(CpuAdamSeconds(1e9, 16e9, c), 0.16);
  EXPECT_DOUBLE_EQ(CpuAdamWorkBytes(1e9, 16e9, c), 16e9);
}

ModelSpec Gpt(bool flash) {
  ModelSpec m;
  m.layers = 2;
  m.hidden_size = 256;
  m.num_heads = 4;
  m.vocab_size = 1000;
  m.seq_length = 128;
  m.flash_attention = flash;
  return m;
}

// Each module's GEMMs are its FLOPs: forward = fwd_flops, backward = 2x
// (FlashAttention's backward 2.5x: it recomputes the scores).
TEST(GpuCost, ModuleKernelsAddUpToTheirFlops) {
  TrainingSpec t;
  t.micro_batch_size = 3;
  for (bool flash : {false, true}) {
    auto g = BuildModelGraph(Gpt(flash), t);
    ASSERT_TRUE(g.ok());
    for (const ModuleSpec& m : g->modules) {
      EXPECT_NEAR(m.fwd.gemm_flops(), m.fwd_flops, 1e-9 * m.fwd_flops) << m.name;
      const double bwd =
          flash && m.name.find("attn") != std::string::npos && m.name.find("out") == std::string::npos ? 2.5 : 2;
      EXPECT_NEAR(m.bwd.gemm_flops(), bwd * m.fwd_flops, 1e-9 * m.fwd_flops) << m.name;
      EXPECT_GT(m.fwd.launches, 0) << m.name;
      EXPECT_EQ(m.fwd.elem_bytes, 2);
    }
  }
  // Flash attention keeps no s x s scores: less HBM traffic and fewer
  // activation bytes.
  const auto unfused = *BuildModelGraph(Gpt(false), t), fused = *BuildModelGraph(Gpt(true), t);
  const ModuleSpec& a = unfused.modules[3];
  const ModuleSpec& b = fused.modules[3];
  ASSERT_EQ(a.name, "layer0.attn");
  EXPECT_LT(b.fwd.mem_bytes, a.fwd.mem_bytes);
  EXPECT_LT(b.act_bytes.v, a.act_bytes.v);
  // Unfused: softmax and dropout over B x heads x s^2 scores of 2 bytes, and a mask byte.
  const double scores = 3.0 * 4 * 128 * 128;
  EXPECT_DOUBLE_EQ(a.fwd.mem_bytes, 2 * 2 * scores + 2 * 2 * scores + scores);
}

// Megatron's fusions off (as Megatron-LM v1.1.5 runs without its
// --*-fusion flags): each adds its separate passes, by hand: the mask
// over the scores each way (2 x 2 bytes x scores) and, backward, autograd's
// five copies of the scores' gradient and one zero fill (in-place mask on a
// view: 5 x 2 x 2 + 2 bytes x scores; seven launches with the mask's), fc1's
// bias add before
// GeLU (2 x 2 bytes x T x 4h), x + bias and + residual around the dropout
// (2 + 3 bytes x 2 x T x h more forward, two more launches); the
// backwards of the adds and GeLU are the fused ones'.
TEST(GpuCost, UnfusedMegatronKernelsAddTheirPasses) {
  TrainingSpec t;
  t.micro_batch_size = 3;
  ModelSpec off = Gpt(false);
  off.masked_softmax_fusion = off.bias_gelu_fusion = off.bias_dropout_fusion = false;
  const auto fused = *BuildModelGraph(Gpt(false), t), unfused = *BuildModelGraph(off, t);
  ASSERT_EQ(fused.modules.size(), unfused.modules.size());
  const double T = 3.0 * 128, h = off.hidden_size, scores = 3.0 * 4 * 128 * 128;
  for (size_t i = 0; i < fused.modules.size(); ++i) {
    const ModuleSpec& a = fused.modules[i];
    const ModuleSpec& b = unfused.modules[i];
    const std::string tail = a.name.substr(a.name.find('.') + 1);
    double fwd = 0, bwd = 0;
    int launches = 0, bwd_launches = 0;
    if (tail == "attn") fwd = 2 * 2 * scores, bwd = (2 * 2 + 5 * 2 * 2 + 2) * scores, launches = 1, bwd_launches = 7;
    if (tail == "fc1") fwd = 2 * 2 * T * 4 * h, launches = 1;
    if (tail == "attn_out" || tail == "fc2")
      fwd = (2 + 2 + 3 - 3) * 2 * T * h, launches = 2;  // 7eTh + Th against 3eTh + Th
    EXPECT_DOUBLE_EQ(b.fwd.mem_bytes - a.fwd.mem_bytes, fwd) << a.name;
    EXPECT_DOUBLE_EQ(b.bwd.mem_bytes - a.bwd.mem_bytes, bwd) << a.name;
    EXPECT_EQ(b.fwd.launches - a.fwd.launches, launches) << a.name;
    EXPECT_EQ(b.bwd.launches - a.bwd.launches, bwd_launches) << a.name;
    EXPECT_EQ(b.fwd.gemm_flops(), a.fwd.gemm_flops()) << a.name;
    EXPECT_EQ(b.act_bytes.v, a.act_bytes.v) << a.name;
  }
}

TEST(Presets, EveryPresetIsComplete) {
  for (const std::string& name : GpuPresetNames()) {
    GpuSpec g;
    ASSERT_TRUE(GpuPreset(name, &g)) << name;
    EXPECT_GT(g.memory.v, 0) << name;
    EXPECT_GT(g.peak_flops.flops_per_s, 0) << name;
    EXPECT_GT(g.hbm_bandwidth.bytes_per_s, 0) << name;
    EXPECT_GT(g.efficiency, 0) << name;
    EXPECT_LT(g.efficiency, 1) << name;  // never silently 1.0
    EXPECT_GT(g.sms, 0) << name;
    EXPECT_GT(g.launch_latency.v, 0) << name;
  }
  GpuSpec g;
  EXPECT_FALSE(GpuPreset("v100", &g));
  HardwareSpec h;
  ASSERT_TRUE(HardwarePreset("dgx2", &h));
  EXPECT_EQ(h.gpus_per_node, 16);
  EXPECT_EQ(h.nvme.drives, 8);
  EXPECT_DOUBLE_EQ(h.nvme.node_read().bytes_per_s, 25e9);  // paper Fig. 2b: about 25 GB/s per node
  EXPECT_DOUBLE_EQ(h.node_network().bytes_per_s, 100e9);   // 8 x 100 Gb/s
  EXPECT_EQ(h.gpu.sms, 80);
}

}  // namespace
}  // namespace strata
