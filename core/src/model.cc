#include "strata/core/model.h"

#include <algorithm>

namespace strata {
namespace {

class GraphBuilder {
 public:
  GraphBuilder(ModelGraph& g, SizeMath& math) : g_(g), m_(math) {}
  // Checked products and counts, named for the error (units.h).
  int64_t Mul(int64_t a, int64_t b, const std::string& what) { return m_.Mul(a, b, what); }
  int64_t Count(double x, const std::string& what) { return m_.Count(x, what); }

  int Group(std::string name, int64_t elements) {
    g_.param_groups.push_back({std::move(name), Elements(elements)});
    return static_cast<int>(g_.param_groups.size()) - 1;
  }
  // A module with a weight and, unless bias_elements is 0, a bias.
  std::vector<int> WeightBias(const std::string& module, int64_t weight_elements, int64_t bias_elements,
                              const char* weight = "weight", const char* bias = "bias") {
    std::vector<int> g = {Group(module + "." + weight, weight_elements)};
    if (bias_elements > 0) g.push_back(Group(module + "." + bias, bias_elements));
    return g;
  }
  // act_bytes in double, counted with a check (it scales with s^2 and V).
  void Module(std::string name, int layer, std::vector<int> groups, double flops, double act_bytes) {
    const int64_t act = Count(act_bytes, name + " activation bytes");
    g_.modules.push_back({std::move(name), layer, std::move(groups), flops, Bytes(act)});
  }

 private:
  ModelGraph& g_;
  SizeMath& m_;
};

void BuildTransformer(const ModelSpec& m, const TrainingSpec& t, ModelGraph& g, SizeMath& math) {
  GraphBuilder b(g, math);
  const double B = t.micro_batch_size, s = static_cast<double>(m.seq_length);
  const double h = static_cast<double>(m.hidden_size), f = static_cast<double>(m.ffn());
  const double V = static_cast<double>(m.vocab_size), a = m.num_heads;
  const int64_t H = m.hidden_size, F = m.ffn();
  // Grouped-query attention: K and V have kv_heads x head_dim columns.
  const int64_t KV = H / m.num_heads * m.kv_heads();
  const double kv = static_cast<double>(KV);
  const double T = B * s;  // tokens per micro batch
  const bool swiglu = m.mlp == MlpKind::kSwiGlu;
  // One MLP (dense, or one expert): its h x f / f x h matrices, and the
  // activations it keeps per token besides the dropout mask, in 16-bit
  // units: SwiGLU's gate, up and their product, or GeLU's input and fc2's.
  const double mlp_matrices = swiglu ? 3 : 2, mlp_act = swiglu ? 6 * f : 4 * f;
  // Activation bytes scale with the element size relative to 16-bit.
  const double k = BytesPerElement(t.precision) / 2.0;
  auto act = [&](double per_token_h_units) { return k * per_token_h_units * T * h; };
  const int64_t bias = m.bias ? 1 : 0;
  auto norm = [&](const std::string& name) {
    return b.WeightBias(name, H, m.norm == NormKind::kLayerNorm ? H : 0);
  };

  // Token table, and a learned position table (GPT-2's wte and wpe).
  const std::vector<int> embed =
      b.WeightBias("embed", b.Mul(m.vocab_size, H, "embed.wte"),
                   m.position == PositionKind::kLearned ? b.Mul(m.position_rows(), H, "embed.wpe") : 0, "wte", "wpe");
  b.Module("embed", -1, embed, 0.0, act(2));  // dropout mask + output
  for (int l = 0; l < m.layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    b.Module(p + "ln1", l, norm(p + "ln1"), 0.0, act(2));
    const int64_t qkv_bias = m.bias || m.qkv_bias ? H + 2 * KV : 0;
    b.Module(p + "qkv", l, b.WeightBias(p + "qkv", b.Mul(H, H + 2 * KV, p + "qkv.weight"), qkv_bias),
             2 * T * h * (h + 2 * kv), act(2));
    // Q, K, V kept (6sbh) plus softmax, its dropout mask and input (5*a*s^2*b).
    b.Module(p + "attn", l, {}, 4 * T * s * h, k * (6 * T * h + 5 * a * s * T));
    b.Module(p + "attn_out", l, b.WeightBias(p + "attn_out", b.Mul(H, H, p + "attn_out.weight"), bias * H), 2 * T * h * h,
             act(3));
    b.Module(p + "ln2", l, norm(p + "ln2"), 0.0, act(2));
    if (m.moe()) {
      // Mixtral's MixtralSparseMoeBlock: a router (gate, h x E, no bias) and
      // E experts (w1 gate, w2 down, w3 up). DeepSpeed makes the block a ZeRO-3
      // leaf module by default (runtime/zero/leaf_module_config.py,
      // DEFAULT_LEAF_MODULE_CLASSES): one fetch of all its parameters, in
      // parameters() order, not one per expert. Each token runs top_k experts.
      const int64_t E = m.num_experts;
      const double K = m.top_k(), e = static_cast<double>(E);
      std::vector<int> moe = {b.Group(p + "moe.gate.weight", b.Mul(H, E, p + "moe.gate.weight"))};
      const int64_t HF = b.Mul(H, F, p + "moe expert weight");
      for (int64_t x = 0; x < E; ++x) {
        const std::string ex = p + "moe.experts." + std::to_string(x) + ".";
        auto add = [&](const std::vector<int>& gs) { moe.insert(moe.end(), gs.begin(), gs.end()); };
        if (swiglu) {
          add(b.WeightBias(ex + "w1", HF, bias * F));
          add(b.WeightBias(ex + "w2", HF, bias * H));
          add(b.WeightBias(ex + "w3", HF, bias * F));
        } else {
          add(b.WeightBias(ex + "fc1", HF, bias * F));
          add(b.WeightBias(ex + "fc2", HF, bias * H));
        }
      }
      // Router logits (fp32, T x E), then each token's top_k expert MLPs as
      // a dense MLP's activations per pick, and the block's input.
      b.Module(p + "moe", l, moe, 2 * T * h * e + K * mlp_matrices * 2 * T * h * f, 4 * T * e + k * T * (K * mlp_act + h));
    } else if (swiglu) {
      // gate and up (h x f each, one module), SiLU(gate) * up, down (f x h).
      const int64_t HF = b.Mul(H, F, p + "mlp weight");
      std::vector<int> gu = b.WeightBias(p + "gate", HF, bias * F);
      for (int gi : b.WeightBias(p + "up", HF, bias * F)) gu.push_back(gi);
      b.Module(p + "fc1", l, gu, 2 * T * h * 2 * f, act(2));
      // gate, up and their product kept (2 bytes x f each) and the dropout
      // mask (h).
      b.Module(p + "fc2", l, b.WeightBias(p + "down", HF, bias * H), 2 * T * f * h, k * T * (mlp_act + h));
    } else {
      const int64_t HF = b.Mul(H, F, p + "mlp weight");
      b.Module(p + "fc1", l, b.WeightBias(p + "fc1", HF, bias * F), 2 * T * h * f, act(2));
      // GeLU input and fc2 input (2 bytes x f each) and the dropout mask (h):
      // 17sbh with f = 4h.
      b.Module(p + "fc2", l, b.WeightBias(p + "fc2", HF, bias * H), 2 * T * f * h, k * T * (mlp_act + h));
    }
  }
  b.Module("ln_f", -1, norm("ln_f"), 0.0, act(2));
  // The LM head: the token table (tied) or its own; fp32 logits for the loss.
  const std::vector<int> head = m.tie_embeddings ? std::vector<int>{embed[0]}
                                                 : b.WeightBias("lm_head", b.Mul(m.vocab_size, H, "lm_head.weight"), 0);
  b.Module("lm_head", -1, head, 2 * T * h * V, 4 * T * V);
  g.num_layers = m.layers;
  g.checkpoint_bytes.assign(m.layers, Bytes(b.Count(act(2), "a layer's checkpointed input")));  // the layer input
  g.tokens_per_micro_batch = b.Count(T, "tokens per micro batch");
}

void BuildMlp(const ModelSpec& m, const TrainingSpec& t, ModelGraph& g, SizeMath& math) {
  GraphBuilder b(g, math);
  const double B = t.micro_batch_size;
  const int dtype = BytesPerElement(t.precision);
  const int n = static_cast<int>(m.sizes.size()) - 1;
  for (int l = 0; l < n; ++l) {
    const int64_t in = m.sizes[l], out = m.sizes[l + 1];
    const std::string name = "fc" + std::to_string(l);
    // Saved for backward: the input (for the weight gradient) and the output
    // (ReLU mask, or the logits for the loss on the last layer).
    b.Module(name, l, b.WeightBias(name, b.Mul(in, out, name + ".weight"), out), 2 * B * static_cast<double>(in) * out,
             B * (static_cast<double>(in) + static_cast<double>(out)) * dtype);
  }
  g.num_layers = n;
  for (int l = 0; l < n; ++l)
    g.checkpoint_bytes.push_back(Bytes(b.Count(B * static_cast<double>(m.sizes[l]) * dtype, "a layer's checkpointed input")));
  g.tokens_per_micro_batch = t.micro_batch_size;
}

}  // namespace

Result<ModelGraph> BuildModelGraph(const ModelSpec& model, const TrainingSpec& training) {
  ModelGraph g;
  SizeMath math;
  if (model.kind == ModelKind::kMlp)
    BuildMlp(model, training, g, math);
  else
    BuildTransformer(model, training, g, math);
  for (const auto& pg : g.param_groups) {
    g.total_params = Elements(math.Add(g.total_params.v, pg.elements.v, "the model's parameter count"));
    g.largest_tensor = std::max(g.largest_tensor, pg.elements);
  }
  for (const auto& mod : g.modules) {
    g.fwd_flops += mod.fwd_flops;
    int64_t n = 0;
    for (int gi : mod.param_groups) n = math.Add(n, g.param_groups[gi].elements.v, "module " + mod.name + "'s parameters");
    g.largest_layer = std::max(g.largest_layer, Elements(n));
  }
  if (!math.status().ok()) return math.status();
  return g;
}

Result<Elements> CountParameters(const ModelSpec& model) {
  auto g = BuildModelGraph(model, TrainingSpec{});
  if (!g.ok()) return g.status();
  return g->total_params;
}

}  // namespace strata
