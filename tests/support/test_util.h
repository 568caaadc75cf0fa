// Scenario builders shared by the plan, planner, simulator and executor tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "strata/config/scenario_loader.h"
#include "strata/core/scenario.h"
#include "strata/plan/validator.h"
#include "strata/planner/planner.h"

namespace strata::testing {

// Hardware with room for every small test model: 16 GiB GPUs, 256 GiB CPU,
// 1 TiB NVMe per node.
inline void RoomyHardware(Scenario& s, int gpus) {
  s.hardware.gpus_per_node = gpus;
  s.hardware.gpu.memory = Bytes(16LL << 30);
  s.hardware.gpu.peak_flops = FlopRate{100e12};
  s.hardware.cpu.memory = Bytes(256LL << 30);
  s.hardware.nvme.capacity = Bytes(1LL << 40);
}

// A small GPT with roomy hardware: every configuration fits.
inline Scenario SmallGpt(int stage, int gpus = 1) {
  Scenario s;
  s.name = "small-gpt";
  s.model.kind = ModelKind::kTransformer;
  s.model.layers = 3;
  s.model.hidden_size = 64;
  s.model.num_heads = 4;
  s.model.vocab_size = 500;
  s.model.seq_length = 32;
  RoomyHardware(s, gpus);
  s.training.micro_batch_size = 2;
  s.zero.stage = stage;
  s.zero.overlap_comm = stage == 3;
  s.zero.stage3_param_persistence_threshold = Elements(200);  // LayerNorms (128 elements) persist
  s.zero.stage3_prefetch_bucket_size = Elements(20000);
  s.zero.reduce_bucket_size = Elements(30000);
  s.zero.sub_group_size = Elements(40000);
  s.zero.offload_param.buffer_size = Elements(100000);
  return s;
}

// A GPT whose matrices reach DeepSpeed's 1 MiB swap threshold
// (max(1 MiB, aio.block_size)) on one or two ranks, so that offload to NVMe
// really puts parameters and optimizer states there; LayerNorms, biases and
// the small sub-groups stay in CPU memory.
inline Scenario MidGpt(int stage, int gpus = 1) {
  Scenario s = SmallGpt(stage, gpus);
  s.name = "mid-gpt";
  s.model.layers = 2;
  s.model.hidden_size = 768;
  s.model.num_heads = 12;
  s.model.vocab_size = 1024;
  s.zero.stage3_prefetch_bucket_size = Elements(3'000'000);
  s.zero.reduce_bucket_size = Elements(3'000'000);
  s.zero.offload_param.buffer_size = Elements(3'000'000);
  // Groups are released after use: at DeepSpeed's default (1e9, the whole
  // model here) every NVMe group would keep its swap buffer until its
  // backward use, more than buffer_count (DeepSpeed: "Not enough buffers").
  s.zero.stage3_max_reuse_distance = Elements(0);
  return s;
}

// Plans the scenario (strictly) and fails the test on an error or on any
// violation of the plan contract.
inline Plan MustPlanValid(const Scenario& s) {
  auto r = BuildPlan(s);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return Plan{};
  for (const auto& v : ValidatePlan(*r).violations) ADD_FAILURE() << "[" << v.kind << "] " << v.message;
  return *r;
}

// The op of that name (a test failure, and an empty op, if none).
inline const Op* FindOp(const Plan& p, const std::string& name) {
  for (const Op& op : p.ops)
    if (op.name == name) return &op;
  ADD_FAILURE() << "no op " << name;
  static const Op none;
  return &none;
}
// The buffer of that name, or nullptr.
inline const Buffer* FindBuffer(const Plan& p, const std::string& name) {
  for (const Buffer& b : p.buffers)
    if (b.name == name) return &b;
  return nullptr;
}
inline bool DependsOn(const Op& op, OpId d) { return std::find(op.deps.begin(), op.deps.end(), d) != op.deps.end(); }

// Whether op `to` waits for op `from`: deps plus stream order (each
// op's predecessor on its stream slot, found once per plan).
class Order {
 public:
  explicit Order(const Plan& p) : p_(p), stream_prev_(p.ops.size(), -1) {
    std::vector<OpId> last(StreamSlots(p), -1);
    for (const Op& op : p.ops) {
      stream_prev_[op.id] = last[StreamSlot(op)];
      last[StreamSlot(op)] = op.id;
    }
  }
  bool HappensBefore(OpId from, OpId to) const {
    std::vector<char> seen(p_.ops.size(), 0);
    std::vector<OpId> stack = {to};
    while (!stack.empty()) {
      const OpId x = stack.back();
      stack.pop_back();
      if (x == from) return true;
      if (x < from || seen[x]) continue;
      seen[x] = 1;
      for (OpId d : p_.ops[x].deps) stack.push_back(d);
      if (stream_prev_[x] >= 0) stack.push_back(stream_prev_[x]);
    }
    return false;
  }

 private:
  const Plan& p_;
  std::vector<OpId> stream_prev_;
};

inline Scenario Builtin(const std::string& name) {
  auto r = config::LoadScenarioFile("builtin:" + name);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

}  // namespace strata::testing
