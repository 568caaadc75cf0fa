// The fsdp section of a scenario (framework: fsdp), in FSDP2's words, with
// FSDP1's sharding_strategy names as aliases (docs/fsdp.md, "The fsdp
// section"). Cross-key rules wait for CheckFsdp (core), which knows the
// model and the machine.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <string>

#include "sections.h"

namespace strata::config {
namespace {

std::optional<Precision> Dtype(Section& s, const char* key) {
  if (auto i = s.Choice(key, {"fp32", "bf16", "fp16", "float32", "bfloat16", "float16"}))
    return std::array{Precision::kFp32, Precision::kBf16, Precision::kFp16}[static_cast<size_t>(*i % 3)];
  return std::nullopt;
}

// reshard_after_forward: true, false or a group size (1 is false and the
// whole shard group true, as FSDP2 reads them; the check of the size
// against the mesh is CheckFsdp's).
void ReadReshard(Section& s, FsdpSpec* f) {
  std::string v;
  if (!s.String("reshard_after_forward", &v)) return;
  if (v == "true" || v == "True") {
    f->reshard_after_forward = -1;
  } else if (v == "false" || v == "False") {
    f->reshard_after_forward = 0;
  } else {
    char* end = nullptr;
    const long k = std::strtol(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0' || k < 1 || k > (1 << 20))
      s.Error("reshard_after_forward", "expected true, false or a group size (a positive integer), got '" + v + "'");
    else
      f->reshard_after_forward = k == 1 ? 0 : static_cast<int>(k);
  }
}

void ReadUnits(Section& s, FsdpSpec* f) {
  if (s.is_list("units")) {
    std::vector<int64_t> blocks;
    if (s.Int64List("units", &blocks))
      for (int64_t b : blocks) f->units.push_back(static_cast<int>(std::clamp<int64_t>(b, -1, 1 << 20)));
    return;
  }
  if (auto i = s.Choice("units", {"blocks", "root"})) f->root_only = *i == 1;
}

// FSDP1's names (fully_sharded_data_parallel.py ShardingStrategy) as the
// FSDP2 settings they mean; a setting also given explicitly must agree.
void ReadStrategy(Section& s, FsdpSpec* f, bool reshard_given, bool mesh_given, int gpus_per_node) {
  auto i =
      s.Choice("sharding_strategy", {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"});
  if (!i) return;
  const bool keep = *i == 1 || *i == 4;  // SHARD_GRAD_OP, _HYBRID_SHARD_ZERO2: no reshard after forward
  const int reshard = keep ? 0 : -1;
  if (reshard_given && f->reshard_after_forward != reshard && *i != 2)
    s.Error("sharding_strategy",
            "contradicts reshard_after_forward: " + std::string(keep ? "this strategy keeps" : "this strategy frees") +
                " the unsharded parameters after forward; give one of the two");
  if (mesh_given && *i >= 2)
    s.Error("sharding_strategy",
            "sets the mesh itself (NO_SHARD: shard 1; HYBRID_SHARD: shard within a node); "
            "give it or mesh, not both");
  if (*i != 2) f->reshard_after_forward = reshard;   // NO_SHARD has nothing to reshard
  if (*i == 2) f->shard = 1;                         // NO_SHARD: every rank holds everything (DDP)
  if (*i == 3 || *i == 4) f->shard = gpus_per_node;  // shard in the node, replicate across nodes
}

}  // namespace

void ReadFsdp(Section& s, FsdpSpec* f, int gpus_per_node) {
  ReadUnits(s, f);
  const bool reshard_given = s.present("reshard_after_forward");
  ReadReshard(s, f);
  if (auto mp = s.Sub("mp_policy")) {
    f->param_dtype = Dtype(*mp, "param_dtype");
    f->reduce_dtype = Dtype(*mp, "reduce_dtype");
    f->output_dtype = Dtype(*mp, "output_dtype");
    bool cast = true;  // casts the forward's inputs: no effect on memory or traffic
    mp->Bool("cast_forward_inputs", &cast);
    mp->Finish();
  }
  if (auto i = s.Choice("offload_policy", {"none", "cpu", "nvme"})) {
    if (*i == 2)
      s.Error("offload_policy",
              "FSDP has no NVMe offload (CPUOffloadPolicy moves the shards to CPU memory only); "
              "use offload_policy: cpu, or framework: deepspeed for ZeRO-Infinity");
    f->offload_cpu = *i == 1;
  }
  s.Bool("pin_memory", &f->pin_memory);
  s.Int("forward_prefetch", &f->forward_prefetch);
  s.Int("backward_prefetch", &f->backward_prefetch);
  const bool mesh_given = s.present("mesh");
  if (auto m = s.Sub("mesh")) {
    m->Int("replicate", &f->replicate);
    m->Int("shard", &f->shard);
    m->Finish();
  }
  ReadStrategy(s, f, reshard_given, mesh_given, gpus_per_node);
  s.Finish();
}

}  // namespace strata::config
