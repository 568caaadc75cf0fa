// A Hugging Face model config.json read into a ModelSpec (private to config).
#pragma once

#include <string>

#include "strata/core/scenario.h"
#include "yaml_reader.h"

namespace strata::config {

// Reads the architecture of a transformers config.json (the field names of
// model_type gpt2, gpt_neox, opt, llama, mistral and qwen2) into `m`: sizes,
// grouped-query heads, MLP (GeLU/ReLU or SwiGLU), norm (LayerNorm or
// RMSNorm), positions (learned table or rotary), biases and tied
// embeddings, so that the parameter count is the published one.
// seq_length defaults to the config's context length. Errors (unreadable
// file, unknown model_type, missing fields) go to the sink with their
// position in the file.
void ReadHfConfig(const std::string& path, ModelSpec* m, ErrorSink& sink);

}  // namespace strata::config
