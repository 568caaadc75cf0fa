// PyTorch FSDP2 (torch.distributed.fsdp.fully_shard) as a scenario's
// framework, in FSDP2's own words (docs/fsdp.md; what the source does:
// docs/fsdp2-source.md). Plain data: the config layer reads it, the
// scenario checks hold it against the rest.
#pragma once

#include <optional>
#include <vector>

#include "strata/core/tier.h"

namespace strata {

// Which system's schedule the scenario describes: DeepSpeed (ZeRO, its
// zero_optimization section) or PyTorch FSDP2 (its fsdp section).
enum class Framework { kDeepSpeed, kFsdp };

struct FsdpSpec {
  // How modules are wrapped. Empty: fully_shard on each block, then on the
  // root (the usual wrapping; the root's unit holds the embedding, final
  // norm and head). Otherwise blocks per unit, in order (fully_shard on a
  // list of consecutive blocks makes one unit), summing to the layers.
  std::vector<int> units;
  bool root_only = false;  // units: root: fully_shard(model) alone, one unit
  // reshard_after_forward: true frees the unsharded parameters after a
  // unit's forward (regathered in backward); false keeps them until its
  // backward; an integer k keeps a 1/k shard gathered over groups of k
  // ranks (_fsdp_init._get_post_forward_mesh_info). Kept here as 0 for
  // false, -1 for true, else k.
  int reshard_after_forward = -1;
  // mp_policy (MixedPrecisionPolicy): nullopt param_dtype is the training
  // precision; nullopt reduce_dtype reduces in param_dtype; nullopt
  // output_dtype leaves outputs as computed.
  std::optional<Precision> param_dtype, reduce_dtype, output_dtype;
  // offload_policy: cpu (CPUOffloadPolicy): sharded parameters, gradients
  // and the optimizer step on the CPU; pin_memory as its argument.
  bool offload_cpu = false;
  bool pin_memory = true;
  // Units prefetched ahead: forward 0 is FSDP2's default (no explicit
  // prefetch; set_modules_to_forward_prefetch sets more), backward 1 is its
  // implicit one unit (FSDPParamGroup._backward_prefetch).
  int forward_prefetch = 0;
  int backward_prefetch = 1;
  // The device mesh (replicate, shard): HSDP when replicate > 1. 0: not
  // given (replicate 1; shard every data-parallel rank).
  int replicate = 0, shard = 0;
};

}  // namespace strata
