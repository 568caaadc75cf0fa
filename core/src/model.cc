#include "strata/core/model.h"

#include <algorithm>
#include <utility>

#include "graph_builder.h"

namespace strata {
namespace {

using model_detail::GraphBuilder;
using model_detail::Kernels;

// Tensor parallelism (tp > 1) splits the layers as Megatron-LM's MLP block
// (ParallelMLP: fc1 a ColumnParallelLinear, fc2 a RowParallelLinear): layer
// 2k column-parallel (its outputs and bias split, the ReLU on the shard; its
// input gradient all-reduced in the backward, except layer 0's, which has
// none), layer 2k + 1 row-parallel (its inputs split, its output
// all-reduced before its bias, whole on every rank, and the ReLU or the
// loss); an odd last layer is replicated, as Megatron's LayerNorms are.
void BuildMlp(const ModelSpec& m, const TrainingSpec& t, const ParallelismSpec& par, ModelGraph& g, SizeMath& math) {
  GraphBuilder b(g, math);
  const double B = t.micro_batch_size;
  const int dtype = BytesPerElement(t.precision);
  const int n = static_cast<int>(m.sizes.size()) - 1;
  const int64_t tp = std::max(1, par.tensor);
  std::vector<int64_t> layer_in;  // per layer: its input's width on this rank
  for (int l = 0; l < n; ++l) {
    const bool column = tp > 1 && l % 2 == 0 && l + 1 < n, row = tp > 1 && l % 2 == 1;
    const int64_t in = m.sizes[l] / (row ? tp : 1), out = m.sizes[l + 1] / (column ? tp : 1);
    layer_in.push_back(in);
    const std::string name = "fc" + std::to_string(l);
    // Saved for backward: the input (for the weight gradient) and the output
    // (ReLU mask, or the logits for the loss on the last layer).
    // Kernels: the Linear (bias in the GEMM's epilogue), then ReLU (or, on
    // the last layer, the loss) reading and writing the output.
    Kernels k(dtype);
    const double out_bytes = B * static_cast<double>(out) * dtype;
    k.Linear(t.micro_batch_size, in, out, true).Fwd(2 * out_bytes).Bwd(3 * out_bytes);
    b.Module(name, l, b.WeightBias(name, b.Mul(in, out, name + ".weight"), out, out),
             2 * B * static_cast<double>(in) * out, B * (static_cast<double>(in) + static_cast<double>(out)) * dtype,
             k.fwd, k.bwd);
    ModuleSpec& mod = g.modules.back();
    if (row)
      mod.tp_fwd = {{TpCommKind::kAllReduce,
                     Bytes(b.Count(B * static_cast<double>(m.sizes[l + 1]) * dtype, "an output's bytes")), false}};
    if (column && l > 0)
      mod.tp_bwd = {{TpCommKind::kAllReduce,
                     Bytes(b.Count(B * static_cast<double>(m.sizes[l]) * dtype, "an input gradient's bytes")), false}};
  }
  g.num_layers = n;
  for (int l = 0; l < n; ++l)
    g.checkpoint_bytes.push_back(Bytes(
        b.Count(B * static_cast<double>(layer_in[static_cast<size_t>(l)]) * dtype, "a layer's checkpointed input")));
  g.layer_input_bytes = g.checkpoint_bytes;
  g.tokens_per_micro_batch = t.micro_batch_size;
}

}  // namespace

Result<ModelGraph> BuildModelGraph(const ModelSpec& model, const TrainingSpec& training, const ParallelismSpec& par) {
  ModelGraph g;
  SizeMath math;
  if (model.kind == ModelKind::kMlp)
    BuildMlp(model, training, par, g, math);
  else
    model_detail::BuildTransformer(model, training, par, g, math);
  for (const auto& pg : g.param_groups) {
    g.total_params = Elements(math.Add(g.total_params.v, pg.elements.v, "the model's parameter count"));
    g.largest_tensor = std::max(g.largest_tensor, pg.elements);
  }
  for (const auto& mod : g.modules) {
    g.fwd_flops += mod.fwd_flops;
    int64_t n = 0;
    for (int gi : mod.param_groups)
      n = math.Add(n, g.param_groups[gi].elements.v, "module " + mod.name + "'s parameters");
    g.largest_layer = std::max(g.largest_layer, Elements(n));
  }
  if (!math.status().ok()) return math.status();
  g.model_params = g.total_params;
  if (par.tensor > 1) {
    STRATA_ASSIGN_OR_RETURN(auto whole, BuildModelGraph(model, training));
    g.model_params = whole.total_params;
  }
  return g;
}

std::vector<int> PipelineParts(int layers, int stages) {
  std::vector<int> parts(static_cast<size_t>(stages) + 1, 0);
  const int chunk = layers / stages, residual = layers % stages;
  for (int s = 0; s < stages; ++s) parts[s + 1] = parts[s] + chunk + (s < residual ? 1 : 0);
  return parts;
}

ModelGraph PipelineStageGraph(const ModelGraph& g, int stage, int stages) {
  const std::vector<int> parts = PipelineParts(g.num_layers, stages);
  const int lo = parts[stage], hi = parts[stage + 1];
  // The stage of each module: by its layer; the ones outside layers by
  // whether they come before the first layer's modules or after.
  std::vector<int> stage_of(g.modules.size());
  bool seen_layer = false;
  for (size_t i = 0; i < g.modules.size(); ++i) {
    const int l = g.modules[i].layer;
    if (l >= 0) {
      seen_layer = true;
      stage_of[i] = static_cast<int>(std::upper_bound(parts.begin(), parts.end(), l) - parts.begin()) - 1;
    } else {
      stage_of[i] = seen_layer ? stages - 1 : 0;
    }
  }
  std::vector<int> users(g.param_groups.size(), 0);  // bit per stage side: 1 this stage, 2 another
  for (size_t i = 0; i < g.modules.size(); ++i)
    for (int gi : g.modules[i].param_groups) users[static_cast<size_t>(gi)] |= stage_of[i] == stage ? 1 : 2;
  ModelGraph out;
  std::vector<int> renumber(g.param_groups.size(), -1);
  for (size_t gi = 0; gi < g.param_groups.size(); ++gi) {
    if (!(users[gi] & 1)) continue;
    renumber[gi] = static_cast<int>(out.param_groups.size());
    if (users[gi] & 2) out.tied_groups.push_back(renumber[gi]);
    out.param_groups.push_back(g.param_groups[gi]);
    out.total_params += g.param_groups[gi].elements;
    out.largest_tensor = std::max(out.largest_tensor, g.param_groups[gi].elements);
  }
  for (size_t i = 0; i < g.modules.size(); ++i) {
    if (stage_of[i] != stage) continue;
    ModuleSpec m = g.modules[i];
    if (m.layer >= 0) m.layer -= lo;
    Elements n;
    for (int& gi : m.param_groups) {
      n += g.param_groups[static_cast<size_t>(gi)].elements;
      gi = renumber[static_cast<size_t>(gi)];
    }
    out.largest_layer = std::max(out.largest_layer, n);
    out.fwd_flops += m.fwd_flops;
    out.modules.push_back(std::move(m));
  }
  out.model_params = g.model_params;
  out.num_layers = hi - lo;
  out.checkpoint_bytes.assign(g.checkpoint_bytes.begin() + lo, g.checkpoint_bytes.begin() + hi);
  out.layer_input_bytes.assign(g.layer_input_bytes.begin() + lo, g.layer_input_bytes.begin() + hi);
  out.tokens_per_micro_batch = g.tokens_per_micro_batch;
  if (stage > 0) out.stage_input_bytes = g.layer_input_bytes[static_cast<size_t>(lo)];
  if (stage + 1 < stages) out.stage_output_bytes = g.layer_input_bytes[static_cast<size_t>(hi)];
  return out;
}

Result<Elements> CountParameters(const ModelSpec& model) {
  STRATA_ASSIGN_OR_RETURN(auto g, BuildModelGraph(model, TrainingSpec{}));
  return g.total_params;
}

}  // namespace strata
