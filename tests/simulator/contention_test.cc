// Topology and contention (issue #15) against hand-computed answers: GPUs
// sharing a PCIe switch and the host's ports, NVMe drives adding up, CPU
// Adam bound by cores or memory, compute ops timed by their kernels; and
// monotonicity: more drives, switch or link bandwidth never slows an
// iteration.
#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "strata/config/scenario_loader.h"
#include "strata/planner/planner.h"
#include "strata/simulator/simulator.h"

namespace strata::sim {
namespace {

using testing::PlanMaker;
using testing::RoundHardware;

SimResult Sim(const Plan& p, const HardwareSpec& h) {
  auto r = Simulate(p, h, testing::Exact());
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

constexpr double kTol = 1e-9;

// 16 GPUs under one switch whose uplink carries 24 GB/s: each of 16
// concurrent 1 GB copies gets 1.5 GB/s, though its own link has 10.
TEST(Contention, SixteenGpusShareTheirSwitchUplink) {
  HardwareSpec h = RoundHardware(1, 16);
  h.pcie.gpus_per_switch = 16;
  h.pcie.switch_bandwidth = Bandwidth{24e9};
  PlanMaker m(h);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);
  EXPECT_NEAR(Sim(m.plan(), h).timeline.iteration_s, 1e9 / 1.5e9, kTol);
  // Two switches of 8: each GPU gets 3 GB/s; the host's ports at 32 GB/s
  // then bind (2 GB/s each).
  h.pcie.gpus_per_switch = 8;
  EXPECT_NEAR(Sim(m.plan(), h).timeline.iteration_s, 1e9 / 3e9, kTol);
  h.pcie.host_bandwidth = Bandwidth{32e9};
  EXPECT_NEAR(Sim(m.plan(), h).timeline.iteration_s, 1e9 / 2e9, kTol);
  // Each direction has its own: D2H copies beside do not slow the H2D ones.
  m.Add(OpKind::kCopyD2H, Stream::kD2H, 1'000'000'000);
  EXPECT_NEAR(Sim(m.plan(), h).timeline.iteration_s, 1e9 / 2e9, kTol);
}

// One GPU alone gets its own link's rate under the same switch and host.
TEST(Contention, OneGpuAloneGetsItsLink) {
  HardwareSpec h = RoundHardware(1, 1);
  h.pcie.gpus_per_switch = 2;
  h.pcie.switch_bandwidth = Bandwidth{12e9};
  h.pcie.host_bandwidth = Bandwidth{48e9};
  PlanMaker m(h);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);
  EXPECT_NEAR(Sim(m.plan(), h).timeline.iteration_s, 0.1, kTol);  // 10 GB/s
}

TEST(Contention, DrivesAddUp) {
  HardwareSpec h = RoundHardware(1, 1);  // 4 GB/s read, 2 GB/s write per drive
  PlanMaker m(h);
  m.Add(OpKind::kNvmeRead, Stream::kNvmeRead, 8'000'000'000);
  EXPECT_NEAR(Sim(m.plan(), h).timeline.iteration_s, 2.0, kTol);
  h.nvme.drives = 4;
  EXPECT_NEAR(Sim(m.plan(), h).timeline.iteration_s, 0.5, kTol);
  // Drives whose reads and writes share 3 GB/s each: 12 GB/s for both
  // directions together on four.
  h.nvme.readwrite_bandwidth = Bandwidth{3e9};
  m.Add(OpKind::kNvmeWrite, Stream::kNvmeWrite, 4'000'000'000);
  // 8 GB read at <= 16 and 4 GB written at <= 8 sharing 12 GB/s: max-min
  // gives each 6 GB/s; the write ends at 2/3 s, then the read has 4 GB left
  // at 12 GB/s.
  EXPECT_NEAR(Sim(m.plan(), h).timeline.iteration_s, 4.0 / 6 + 4.0 / 12, kTol);
}

TEST(Contention, CpuAdamIsBoundByCoresOrMemory) {
  HardwareSpec h = RoundHardware(1, 1);  // CPU memory 50 GB/s
  h.cpu.cores = 4;
  h.cpu.adam_core_rate = 1e8;  // 4e8 parameters/s
  PlanMaker m(h);
  const OpId step = m.Add(OpKind::kOptimizerStep, Stream::kCpuOptim, 10'000'000'000);  // 10 GB touched
  Plan p = m.plan();
  p.ops[step].elements = Elements(1'000'000'000);
  // Cores: 1e9 / 4e8 = 2.5 s; memory alone 0.2 s.
  EXPECT_NEAR(Sim(p, h).timeline.iteration_s, 2.5, 1e-6);
  h.cpu.cores = 100;  // 1e10 parameters/s: memory binds
  EXPECT_NEAR(Sim(p, h).timeline.iteration_s, 0.2, 1e-6);
}

// A compute op of a module is its kernels (roofline), not its FLOPs at peak.
TEST(Contention, ComputeOpsAreTheirModulesKernels) {
  HardwareSpec h = RoundHardware(1, 1);  // 1 TFLOPS, 1 TB/s HBM
  h.gpu.efficiency = 0.5;
  h.gpu.launch_latency = Seconds{1e-3};
  PlanMaker m(h);
  const OpId fwd = m.Add(OpKind::kForward, Stream::kCompute, 0, 2e9);
  Plan p = m.plan();
  PlanModule mod;
  mod.name = "fc";
  mod.fwd.gemms = {{1000, 1000, 1000}};  // 2e9 FLOPs at 0.5 TFLOPS: 4 ms
  mod.fwd.mem_bytes = 1e9;               // 1 ms at 1 TB/s
  mod.fwd.launches = 2;                  // 2 ms
  p.modules.push_back(mod);
  p.ops[fwd].module = 0;
  EXPECT_NEAR(Sim(p, h).timeline.iteration_s, 7e-3, kTol);
  h.gpu.compute_model = ComputeModel::kFlat;  // FLOPs at peak x efficiency only
  EXPECT_NEAR(Sim(p, h).timeline.iteration_s, 4e-3, kTol);
}

// A small GPT on the DGX-2 preset with parameters on CPU and the optimizer
// on NVMe, so PCIe, NVMe, the CPU and compute all matter.
Scenario Dgx2Gpt(const std::vector<std::pair<std::string, std::string>>& overrides) {
  config::LoadOptions o;
  o.overrides = overrides;
  auto s = config::ParseScenario(R"(name: mono
model: {kind: transformer, layers: 4, hidden_size: 2048, num_heads: 16, seq_length: 1024}
hardware: {preset: dgx2}
training: {micro_batch_size: 2, activation_checkpointing: true}
zero_optimization:
  stage: 3
  offload_param: {device: cpu, pin_memory: true}
  offload_optimizer: {device: nvme, nvme_path: /tmp/x, pin_memory: true}
  sub_group_size: 2e7
)",
                                 "mono.yaml", o);
  if (!s.ok()) throw std::runtime_error(s.status().message());
  return *s;
}

double Iteration(const std::vector<std::pair<std::string, std::string>>& overrides) {
  const Scenario s = Dgx2Gpt(overrides);
  auto plan = BuildPlan(s);
  if (!plan.ok()) throw std::runtime_error(plan.status().message());
  return Sim(*plan, s.hardware).timeline.iteration_s;
}

TEST(Contention, MoreDrivesSwitchesOrBandwidthNeverSlowAnIteration) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> knobs = {
      {"hardware.nvme.drives", {"1", "2", "4", "8", "16"}},
      {"hardware.nvme.read_bandwidth", {"0.5GB/s", "1GB/s", "3GB/s", "6GB/s"}},
      {"hardware.nvme.write_bandwidth", {"0.5GB/s", "1GB/s", "3GB/s", "6GB/s"}},
      {"hardware.pcie.switch_bandwidth", {"2GB/s", "6GB/s", "12GB/s", "24GB/s"}},
      // Fewer GPUs per switch: more switches.
      {"hardware.pcie.gpus_per_switch", {"16", "8", "4", "2", "1"}},
      {"hardware.pcie.host_bandwidth", {"12GB/s", "24GB/s", "48GB/s", "96GB/s"}},
      {"hardware.pcie.bandwidth", {"3GB/s", "6GB/s", "12GB/s", "24GB/s"}},
      {"hardware.cpu.memory_bandwidth", {"50GB/s", "100GB/s", "256GB/s"}},
      {"hardware.cpu.cores", {"8", "16", "48", "96"}},
      {"hardware.gpu.hbm_bandwidth", {"300GB/s", "900GB/s", "2TB/s"}},
      {"hardware.gpu.peak_flops", {"30TFLOPS", "125TFLOPS", "300TFLOPS"}},
      {"hardware.nvlink.bandwidth", {"25GB/s", "150GB/s", "300GB/s"}},
  };
  for (const auto& [key, values] : knobs) {
    double prev = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const double t = Iteration({{key, values[i]}});
      if (i > 0) {
        EXPECT_LE(t, prev * (1 + 1e-9)) << key << " = " << values[i] << " slowed the iteration";
      }
      prev = t;
    }
  }
}

}  // namespace
}  // namespace strata::sim
