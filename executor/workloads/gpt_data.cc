// The GPT's shape, weights and samples from the seed and the text (gpt_data.h).
#include "workloads/gpt_data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "strata/core/file_input.h"
#include "workloads/workload.h"

namespace strata::exec {

Result<GptData> GptData::Make(const Plan& p, uint64_t seed, int rank, const std::string& text_path, int tensor_rank) {
  if (!p.run.model.Gpt2Style())
    return Status::InvalidArgument(
        "the executor's GPT workload computes GPT-2's architecture (learned positions as long as seq_length, "
        "LayerNorm, GeLU, biases, tied embeddings, one K/V head per head); this model (" +
        std::string(p.run.model.mlp == MlpKind::kSwiGlu ? "SwiGLU" : "GeLU") + ", " +
        (p.run.model.norm == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm") +
        (p.run.model.moe() ? ", mixture of experts" : "") + (p.run.model.flash_attention ? ", flash attention" : "") +
        ") is planned and simulated only: strata estimate, plan and simulate take it");
  if (p.run.model.vocab_size < 256)
    return Status::InvalidArgument("model.vocab_size " + std::to_string(p.run.model.vocab_size) +
                                   " cannot hold byte-level tokens (need at least 256)");
  STRATA_ASSIGN_OR_RETURN(auto text, ReadInputFile(text_path, kTextFileLimit, "the training text"));
  GptData d;
  d.text_ = std::move(text);
  if (d.text_.size() < static_cast<size_t>(p.run.model.seq_length) + 2)
    return Status::InvalidArgument("the training text '" + text_path + "' is shorter than one sequence");
  d.h = static_cast<size_t>(p.run.model.hidden_size);
  d.f = static_cast<size_t>(p.run.model.ffn());
  d.heads = static_cast<size_t>(p.run.model.num_heads);
  d.V = static_cast<size_t>(p.run.model.vocab_size);
  d.S = static_cast<size_t>(p.run.model.seq_length);
  d.B = static_cast<size_t>(p.run.micro_batch_size);
  d.T = d.B * d.S;
  d.L = static_cast<size_t>(p.run.model.layers);
  d.tp = static_cast<size_t>(std::max(1, p.tensor_parallel()));
  d.tr = static_cast<size_t>(tensor_rank);
  d.checkpointing = p.run.activation_checkpointing;
  d.split_transformers = p.run.split_transformers;
  d.seed_ = seed;
  d.rank_ = rank;
  d.ha = d.h / d.tp;
  d.al = d.heads / d.tp;
  d.fl = d.f / d.tp;
  d.Vp = d.tp > 1 ? (d.V + 128 * d.tp - 1) / (128 * d.tp) * 128 * d.tp : d.V;
  d.Vl = d.Vp / d.tp;
  for (const PlanModule& m : p.modules) {
    const std::string& n = m.name;
    const size_t dot = n.find('.');
    const std::string tail = dot == std::string::npos ? n : n.substr(dot + 1);
    using K = GptKind;
    K k = n == "embed"         ? K::kEmbed
          : n == "ln_f"        ? K::kLnF
          : n == "lm_head"     ? K::kHead
          : tail == "ln1"      ? K::kLn1
          : tail == "qkv"      ? K::kQkv
          : tail == "attn"     ? K::kAttn
          : tail == "attn_out" ? K::kAttnOut
          : tail == "ln2"      ? K::kLn2
          : tail == "fc1"      ? K::kFc1
                               : K::kFc2;
    d.kinds.push_back(k);
    // The transformer block: the plan's layer is a checkpoint segment, two
    // per block under split_transformers (attention 2l, MLP 2l + 1).
    d.layers.push_back(m.layer < 0 || !d.split_transformers ? m.layer : m.layer / 2);
  }
  // A group's seed is its index in the whole model: the first group of its
  // name (a pipeline plan lists a tied table on two stages).
  std::map<std::string, int> first;
  for (const PlanParamGroup& g : p.param_groups) {
    d.group_names_.push_back(g.name);
    d.seed_index_.push_back(first.emplace(g.name, static_cast<int>(first.size())).first->second);
  }
  return d;
}

std::vector<float> GptData::InitGroup(int g) const {
  const std::string& n = group_names_[static_cast<size_t>(g)];
  std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(seed_index_[static_cast<size_t>(g)]));
  std::normal_distribution<float> normal(0.0f, 0.02f);
  auto ends = [&](const char* tail) {
    const size_t k = std::strlen(tail);
    return n.size() >= k && n.compare(n.size() - k, k, tail) == 0;
  };
  auto random = [&](size_t count) {
    std::vector<float> w(count);
    for (float& v : w) v = normal(rng);
    return w;
  };
  if (n == "embed.wte") return ShardRows(random(Vp * h), h, Vl, tr * Vl);
  if (n == "embed.wpe") return random(S * h);
  const bool ln =
      n.rfind("ln_f.", 0) == 0 || n.find(".ln1.") != std::string::npos || n.find(".ln2.") != std::string::npos;
  if (ln) return std::vector<float>(h, ends(".weight") ? 1.0f : 0.0f);
  const bool qkv = n.find(".qkv.") != std::string::npos, fc1 = n.find(".fc1.") != std::string::npos;
  const bool fc2 = n.find(".fc2.") != std::string::npos;
  const size_t out = qkv ? 3 * h : fc1 ? f : h;
  const size_t in = fc2 ? f : h;
  const bool bias = ends(".bias");
  std::vector<float> w = bias ? std::vector<float>(out, 0.0f) : random(out * in);
  if (tp == 1) return w;
  const size_t cols = bias ? 1 : in;
  if (qkv) {  // this rank's heads' rows of Q, K and V, in that order
    std::vector<float> mine;
    for (size_t part = 0; part < 3; ++part) {
      const std::vector<float> r = ShardRows(w, cols, ha, part * h + tr * ha);
      mine.insert(mine.end(), r.begin(), r.end());
    }
    return mine;
  }
  if (fc1) return ShardRows(w, cols, fl, tr * fl);
  if (bias) return w;                                   // the row-parallel layers' bias: whole
  return ShardColumns(w, in, in / tp, tr * (in / tp));  // attn_out, fc2: this rank's columns
}

void GptData::Draw(int step, int micro, std::vector<int32_t>* tokens, std::vector<int32_t>* targets) const {
  tokens->resize(T);
  targets->resize(T);
  std::mt19937_64 rng(seed_ ^ (static_cast<uint64_t>(step) * 1000003 + static_cast<uint64_t>(micro) * 7919 +
                               static_cast<uint64_t>(rank_) * 104729 + 17));
  for (size_t b = 0; b < B; ++b) {
    const size_t off = static_cast<size_t>(rng() % (text_.size() - S - 1));
    for (size_t i = 0; i < S; ++i) {
      (*tokens)[b * S + i] = static_cast<unsigned char>(text_[off + i]);
      (*targets)[b * S + i] = static_cast<unsigned char>(text_[off + i + 1]);
    }
  }
}

}  // namespace strata::exec
