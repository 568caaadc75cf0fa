// The GPT workload's shape, module kinds, initial weights and samples
// (private): shared by the host workload (gpt_workload.cc) and the device
// model (devmodel/device_gpt.cc), so that both train the same model on the
// same bytes from the same seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/plan/plan.h"

namespace strata::exec {

enum class GptKind { kEmbed, kLn1, kQkv, kAttn, kAttnOut, kLn2, kFc1, kFc2, kLnF, kHead };

struct GptData {
  // GPT-2's architecture only (refused otherwise, with the reason); the text
  // at `text_path` gives the byte-level tokens. `rank`: the data-parallel
  // rank (its samples); `tensor_rank`: its index in the tensor-parallel group.
  static Result<GptData> Make(const Plan& p, uint64_t seed, int rank, const std::string& text_path, int tensor_rank);

  // Per tensor: the embedding tables and Linear weights N(0, 0.02), biases
  // zero, LayerNorm gamma 1 and beta 0; drawn whole (the token table's
  // padded rows after the vocabulary's), then this rank's shard taken.
  std::vector<float> InitGroup(int g) const;
  // Windows of the text at offsets from the seed, step, micro step and rank:
  // tokens and their next bytes.
  void Draw(int step, int micro, std::vector<int32_t>* tokens, std::vector<int32_t>* targets) const;

  size_t h = 0, f = 0, heads = 0, V = 0, S = 0, B = 0, T = 0, L = 0;
  size_t tp = 1, tr = 0;  // tensor-parallel ranks, and this one's index
  // This rank's widths: the attention's (its heads), fc1's outputs, its rows
  // of the token table (Megatron pads the vocabulary to a multiple of 128 x
  // tensor when it splits it: _vocab_size_with_padding).
  size_t ha = 0, al = 0, fl = 0, Vp = 0, Vl = 0;
  bool checkpointing = false;
  bool split_transformers = false;  // the MLP half's input (Block::mid) is a checkpoint too
  std::vector<GptKind> kinds;       // per plan module
  std::vector<int> layers;          // per plan module (-1 outside the blocks)

 private:
  uint64_t seed_ = 0;
  int rank_ = 0;
  std::string text_;
  std::vector<std::string> group_names_;
  std::vector<int> seed_index_;  // per group: its seed's index (InitGroup)
};

}  // namespace strata::exec
