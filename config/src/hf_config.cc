#include "hf_config.h"

#include <type_traits>

namespace strata::config {

void ReadHfConfig(const std::string& path, ModelSpec* m, ErrorSink& sink) {
  auto root = LoadFileNode(path, sink, /*strict_json=*/true);
  if (!root) return;
  // A config.json has far more keys than an architecture (dropout, token
  // ids, generation settings): read the architecture's, leave the rest.
  std::string type;
  try {
    type = (*root)["model_type"] ? (*root)["model_type"].as<std::string>() : "";
  } catch (const YAML::Exception& e) {
    sink.Error(path, e.mark, "model_type: expected a string");
    return;
  }
  auto get = [&](const char* key, auto* out, bool required) {
    const YAML::Node n = (*root)[key];
    if (!n || n.IsNull()) {
      if (required) sink.Error(path, root->Mark(), "missing '" + std::string(key) + "' for model_type " + type);
      return false;
    }
    // config.json is JSON: a quoted "256" is a string, which transformers
    // would keep as one (and fail on in the model's arithmetic).
    if (n.IsScalar() && n.Tag() == "!") {
      sink.Error(path, n.Mark(),
                 std::string(key) + ": expected a JSON " +
                     (std::is_same_v<std::remove_pointer_t<decltype(out)>, bool> ? "true or false" : "number") +
                     ", got the string \"" + n.Scalar() + "\"");
      return false;
    }
    try {
      *out = n.as<std::remove_pointer_t<decltype(out)>>();
      return true;
    } catch (const YAML::Exception&) {
      sink.Error(path, n.Mark(), std::string(key) + ": unexpected value '" + (n.IsScalar() ? n.Scalar() : "") + "'");
      return false;
    }
  };
  m->kind = ModelKind::kTransformer;
  int64_t positions = 0;
  // The field names most architectures share (transformers'
  // PretrainedConfig names); `ffn` is the MLP width's, which differs.
  auto standard = [&](const char* ffn) {
    get("num_hidden_layers", &m->layers, true);
    get("hidden_size", &m->hidden_size, true);
    get("num_attention_heads", &m->num_heads, true);
    get(ffn, &m->ffn_hidden_size, true);
    get("vocab_size", &m->vocab_size, true);
    get("max_position_embeddings", &positions, true);
  };
  if (type == "gpt2") {
    get("n_layer", &m->layers, true);
    get("n_embd", &m->hidden_size, true);
    get("n_head", &m->num_heads, true);
    get("n_inner", &m->ffn_hidden_size, false);  // null: 4 x n_embd
    get("vocab_size", &m->vocab_size, true);
    get("n_positions", &positions, true);
    m->max_position_embeddings = positions;
    get("tie_word_embeddings", &m->tie_embeddings, false);
  } else if (type == "opt") {
    standard("ffn_dim");
    m->max_position_embeddings = positions + 2;  // OPTLearnedPositionalEmbedding's offset of 2
    get("enable_bias", &m->bias, false);
    get("tie_word_embeddings", &m->tie_embeddings, false);
  } else if (type == "gpt_neox") {
    standard("intermediate_size");
    m->position = PositionKind::kRotary;
    m->tie_embeddings = false;
    get("tie_word_embeddings", &m->tie_embeddings, false);
  } else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "mixtral") {
    standard("intermediate_size");
    m->num_kv_heads = m->num_heads;
    get("num_key_value_heads", &m->num_kv_heads, false);
    m->mlp = MlpKind::kSwiGlu;
    m->norm = NormKind::kRmsNorm;
    m->position = PositionKind::kRotary;
    m->bias = false;
    get("attention_bias", &m->bias, false);  // Llama: on every attention projection
    m->qkv_bias = type == "qwen2";           // Qwen2: on Q, K and V only
    m->tie_embeddings = false;
    get("tie_word_embeddings", &m->tie_embeddings, false);
    if (type == "mixtral") {  // MixtralSparseMoeBlock in place of the MLP
      get("num_local_experts", &m->num_experts, true);
      get("num_experts_per_tok", &m->experts_per_token, true);
    }
  } else {
    sink.Error(
        path, (*root)["model_type"] ? (*root)["model_type"].Mark() : root->Mark(),
        "model_type '" + type + "' is not one Strata reads (gpt2, gpt_neox, opt, llama, mistral, mixtral, qwen2)");
    return;
  }
  if (positions > 0) m->seq_length = positions;  // the context length, unless the scenario sets seq_length
}

}  // namespace strata::config
