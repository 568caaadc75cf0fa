// Hand-made plans for analytic simulator tests.
#pragma once

#include "strata/core/scenario.h"
#include "strata/plan/plan.h"
#include "strata/simulator/simulator.h"

namespace strata::testing {

// Hardware with round numbers: 1 TFLOPS GPUs, 10 GB/s PCIe, 100 GB/s
// NVLink, 4/2 GB/s NVMe read/write, 20 GB/s network, 50 GB/s CPU memory.
inline HardwareSpec RoundHardware(int nodes, int gpus_per_node, bool nvlink = true) {
  HardwareSpec h;
  h.nodes = nodes;
  h.gpus_per_node = gpus_per_node;
  h.gpu.memory = Bytes(1LL << 40);
  h.gpu.peak_flops = FlopRate{1e12};
  h.gpu.hbm_bandwidth = Bandwidth{1e12};
  h.cpu.memory = Bytes(1LL << 40);
  h.cpu.memory_bandwidth = Bandwidth{50e9};
  h.pcie.bandwidth = Bandwidth{10e9};
  h.nvlink.bandwidth = Bandwidth{nvlink ? 100e9 : 0};
  h.network.bandwidth = Bandwidth{20e9};
  h.nvme.capacity = Bytes(1LL << 40);
  h.nvme.read_bandwidth = Bandwidth{4e9};
  h.nvme.write_bandwidth = Bandwidth{2e9};
  return h;
}

class PlanMaker {
 public:
  explicit PlanMaker(const HardwareSpec& h) {
    p_.scenario = "analytic";
    p_.nodes = h.nodes;
    p_.gpus_per_node = h.gpus_per_node;
    p_.world_size = h.world_size();
    for (auto& c : p_.capacity) c = Bytes(1LL << 50);
    CommGroup g{"dp", {}};
    for (int r = 0; r < p_.world_size; ++r) g.ranks.push_back(r);
    p_.groups.push_back(g);
  }
  OpId Add(OpKind kind, Stream stream, int64_t bytes, double flops = 0, std::vector<OpId> deps = {}) {
    Op op;
    op.id = static_cast<OpId>(p_.ops.size());
    op.name = std::string(OpKindName(kind)) + "." + std::to_string(op.id);
    op.kind = kind;
    op.stream = stream;
    op.bytes = Bytes(bytes);
    op.flops = flops;
    op.deps = std::move(deps);
    if (kind == OpKind::kAllGather || kind == OpKind::kReduceScatter || kind == OpKind::kAllReduce) op.group = 0;
    p_.ops.push_back(op);
    return op.id;
  }
  const Plan& plan() const { return p_; }
  Op& op(OpId id) { return p_.ops[static_cast<size_t>(id)]; }

 private:
  Plan p_;
};

// A plan of one 1 GB H2D copy (op 0) from a CPU buffer, pageable unless
// `pinned`, then a 1 GB CPU optimizer step (op 1) if `with_optimizer`.
inline Plan OneCopyPlan(const HardwareSpec& h, bool pinned, bool with_optimizer) {
  PlanMaker m(h);
  m.Add(OpKind::kCopyH2D, Stream::kH2D, 1'000'000'000);
  if (with_optimizer) m.Add(OpKind::kOptimizerStep, Stream::kCpuOptim, 1'000'000'000);
  Plan p = m.plan();
  p.buffers = {{0, "params.cpu", Tier::kCpu, StateKind::kParam16, Bytes(1'000'000'000), true, pinned},
               {1, "gathered", Tier::kGpu, StateKind::kGatherBuffer, Bytes(1'000'000'000), true}};
  p.ops[0].reads = {0};
  p.ops[0].writes = {1};
  p.ops[0].moves = {{Region{0, Bytes(0), Bytes(1'000'000'000)}, Region{1, Bytes(0), Bytes(1'000'000'000)}}};
  return p;
}

// `o` replayed exactly: no jitter (SimOptions::jitter), so the analytic
// tests see the model's own round numbers and ranks in lockstep.
inline sim::SimOptions Exact(sim::SimOptions o = {}) {
  o.jitter = 0;
  return o;
}

}  // namespace strata::testing
