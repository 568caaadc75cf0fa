// The checks of framework: fsdp's section (scenario.h CheckFsdp): each rule
// is FSDP2's own where it has one (docs/fsdp2-source.md, "Errors").
#include <numeric>
#include <string>
#include <vector>

#include "strata/core/scenario.h"

namespace strata {

std::vector<ScenarioIssue> CheckFsdp(const Scenario& s) {
  std::vector<ScenarioIssue> out;
  if (s.framework != Framework::kFsdp) return out;
  auto add = [&](std::string path, std::string msg) { out.push_back({std::move(path), std::move(msg)}); };
  const FsdpSpec& f = s.fsdp;
  auto n = [](int64_t v) { return std::to_string(v); };
  if (s.parallelism.tensor > 1 || s.parallelism.pipeline > 1)
    add(s.parallelism.tensor > 1 ? "parallelism.tensor" : "parallelism.pipeline",
        "framework: fsdp is modelled with data parallelism alone (FSDP2 with tensor or pipeline parallelism, as "
        "torchtitan composes them, is not); set tensor and pipeline to 1");
  // DeepSpeed's activation checkpointing options: FSDP2 training code
  // checkpoints with torch.utils.checkpoint, the layer input on the GPU.
  if (s.training.cpu_checkpointing || s.training.partition_activations)
    add(s.training.cpu_checkpointing ? "training.cpu_checkpointing" : "training.partition_activations",
        "is DeepSpeed's activation checkpointing option; under framework: fsdp checkpoints stay on the GPU "
        "(torch.utils.checkpoint): leave it out");
  if (s.policy.gpu_cache.v > 0 || s.policy.cpu_cache.v > 0)
    add(s.policy.gpu_cache.v > 0 ? "policy.gpu_cache" : "policy.cpu_cache",
        "Strata's parameter caches change DeepSpeed's fetches; FSDP2 gathers whole units: leave it out");
  if (!f.units.empty()) {
    for (size_t i = 0; i < f.units.size(); ++i)
      if (f.units[i] < 1)
        add("fsdp.units", "each unit holds at least one block (entry " + n(i) + ": " + n(f.units[i]) + ")");
    const int64_t sum = std::accumulate(f.units.begin(), f.units.end(), int64_t{0});
    if (sum != s.model.layers)
      add("fsdp.units", "the units hold " + n(sum) + " blocks; the model has " + n(s.model.layers) +
                            " layers (give blocks per unit, in order, summing to the layers)");
  }
  if (f.forward_prefetch < 0 || f.forward_prefetch > 8)
    add("fsdp.forward_prefetch", "must be 0-8 units ahead (got " + n(f.forward_prefetch) + ")");
  if (f.backward_prefetch < 0 || f.backward_prefetch > 8)
    add("fsdp.backward_prefetch", "must be 0-8 units ahead (got " + n(f.backward_prefetch) + ")");
  // The mesh: replicate x shard is the data-parallel world
  // (_fsdp_init._get_mesh_info over a 1-D or 2-D DeviceMesh).
  const int64_t world = s.hardware.world_size();
  const int replicate = f.replicate > 0 ? f.replicate : (f.shard > 0 && world % f.shard == 0 ? world / f.shard : 1);
  const int64_t shard = f.shard > 0 ? f.shard : world / replicate;
  if (f.replicate < 0 || f.shard < 0 || int64_t{replicate} * shard != world || shard < 1)
    add("fsdp.mesh", "replicate " + n(replicate) + " x shard " + n(shard) + " must be the " + n(world) +
                         " data-parallel ranks (hardware.nodes x gpus_per_node)");
  // An integer reshard_after_forward: groups of k ranks within the shard
  // group, so k divides it (FSDP2 asserts it).
  const int k = f.reshard_after_forward;
  if (k < -1 || (k > 1 && shard % k != 0))
    add("fsdp.reshard_after_forward", "an integer reshard_after_forward must divide the shard group's " + n(shard) +
                                          " ranks (got " + n(k) + "; FSDP2's _get_post_forward_mesh_info)");
  return out;
}

}  // namespace strata
