// A transformer's model graph, one rank's shard of it: Megatron-LM's layers
// (GPT-2-, OPT-, NeoX- and Llama-style, as ModelSpec says), tensor
// parallelism as Megatron-LM splits them (model.h). Built part by part:
// the embedding, each layer's attention half and MLP half (dense, tiled or
// mixture of experts), the final norm, the head and the checkpoints.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "graph_builder.h"

namespace strata::model_detail {
namespace {

// The sizes the formulas use, in Megatron-LM's notation (B micro batch, s
// sequence, h hidden, f ffn, a heads, V vocabulary; T = B s tokens), as
// doubles for FLOPs and bytes and as integers (capitals) for shapes.
struct TransformerShape {
  TransformerShape(const ModelSpec& m, const TrainingSpec& t, const ParallelismSpec& par)
      : tp(std::max(1, par.tensor)),
        sp(par.sequence_parallel && tp > 1),
        B(t.micro_batch_size),
        s(static_cast<double>(m.seq_length)),
        h(static_cast<double>(m.hidden_size)),
        f(static_cast<double>(m.ffn())),
        Vp(tp > 1 ? CeilDiv(m.vocab_size, 128 * tp) * 128 * tp : m.vocab_size),
        V(static_cast<double>(Vp)),
        a(m.num_heads),
        H(m.hidden_size),
        F(m.ffn()),
        KV(H / m.num_heads * m.kv_heads()),
        kv(static_cast<double>(KV)),
        T(B * s),
        swiglu(m.mlp == MlpKind::kSwiGlu),
        mlp_matrices(swiglu ? 3 : 2),
        mlp_act(swiglu ? 6 * f : 4 * f),
        ks(BytesPerElement(t.precision) / 2.0),
        split(static_cast<double>(tp)),
        rep(sp ? split : 1.0),
        bias(m.bias ? 1 : 0),
        e(BytesPerElement(t.precision)),
        eTh(e * T * h),
        eTf(e * T * f / split),
        S(m.seq_length),
        D(H / m.num_heads),
        partitioned(t.partition_activations && tp > 1 && !sp),
        split_tf(t.split_transformers) {}

  const int64_t tp;  // tensor-parallel ranks
  const bool sp;     // sequence parallelism (with tp > 1)
  const double B, s, h, f;
  // Megatron pads the vocabulary to a multiple of 128 x tp
  // (_vocab_size_with_padding, make_vocab_size_divisible_by 128) when the
  // table is split; one rank keeps the vocabulary as given.
  const int64_t Vp;
  const double V, a;
  const int64_t H, F;
  // Grouped-query attention: K and V have kv_heads x head_dim columns.
  const int64_t KV;
  const double kv;
  const double T;  // tokens per micro batch
  const bool swiglu;
  // One MLP (dense, or one expert): its h x f / f x h matrices, and the
  // activations it keeps per token besides the dropout mask, in 16-bit
  // units: SwiGLU's gate, up and their product, or GeLU's input and fc2's.
  const double mlp_matrices, mlp_act;
  const double ks;     // activation bytes relative to 16-bit elements
  const double split;  // what a split tensor is divided by
  const double rep;    // what a replicated one is (sequence parallel: split too)
  const int64_t bias;  // 1 with biases
  // Kernels: e-byte elements; "xTh" below is x e T h bytes.
  const double e, eTh, eTf;
  const int64_t S, D;  // sequence, head dimension
  // DeepSpeed's partition_activations (TrainingSpec): checkpoints split over
  // the tensor-parallel ranks (under sequence parallelism already a shard).
  const bool partitioned;
  const bool split_tf;  // checkpoint segments are half layers
};

class TransformerBuilder : private TransformerShape {
 public:
  TransformerBuilder(const ModelSpec& m, const TrainingSpec& t, const ParallelismSpec& par, ModelGraph& g,
                     SizeMath& math)
      : TransformerShape(m, t, par), m_(m), g_(g), b_(g, math) {
    Ti_ = b_.Count(T, "tokens per micro batch");
    Ba_ = b_.Mul(t.micro_batch_size, m.num_heads / tp, "micro batch x heads");
    act_bytes_ = Bytes(tp > 1 ? b_.Count(eTh, "one activation's bytes") : 0);
  }

  void Build() {
    const std::vector<int> embed = Embedding();
    for (int l = 0; l < m_.layers; ++l) {
      const std::string p = "layer" + std::to_string(l) + ".";
      // Checkpoint segments: the layer, or its two halves (split_transformers).
      AttentionHalf(p, split_tf ? 2 * l : l);
      MlpHalf(p, split_tf ? 2 * l + 1 : l);
    }
    FinalNorm();
    Head(embed);
    Checkpoints();
  }

 private:
  using TK = TpCommKind;

  // Bytes of activations kept per token, in units of h (Act) or of one
  // 16-bit element (KAct).
  double Act(double per_token_h_units) const { return ks * per_token_h_units * T * h / rep; }
  double KAct(double per_token) const { return ks * T * per_token; }
  Kernels NewKernels() const { return Kernels(static_cast<int>(e)); }

  std::vector<int> NormGroups(const std::string& name) {
    return b_.WeightBias(name, H, H, m_.norm == NormKind::kLayerNorm ? H : 0, "weight", "bias", /*weight_vector=*/true);
  }
  Kernels NormKernels() const { return NewKernels().Fwd(2 * eTh / rep).Bwd(3 * eTh / rep); }
  // Bias-dropout-add after a row-parallel projection (on the reduced output:
  // whole, or this rank's sequence shard): reads the output and the
  // residual, writes the sum and a 1-byte mask; backward reads dy and the
  // mask, writes dx.
  // Unfused (bias_dropout_fusion false): x + bias, dropout, + residual as
  // three passes forward; the backward is the dropout's either way (the
  // adds pass the gradient through, the bias's reduction as fused).
  void DropoutAdd(Kernels& k) const {
    if (m_.bias_dropout_fusion)
      k.Fwd((3 * eTh + T * h) / rep);
    else
      k.Fwd(2 * eTh / rep).Fwd((2 * eTh + T * h) / rep).Fwd(3 * eTh / rep);
    k.Bwd((2 * eTh + T * h) / rep);
  }
  // fc1's epilogue, GeLU on x + bias: fused, one pass each way; unfused
  // (bias_gelu_fusion false), the bias added in a pass of its own first.
  void BiasGelu(Kernels& k) const {
    if (!m_.bias_gelu_fusion) k.Fwd(2 * eTf);
    k.Fwd(2 * eTf).Bwd(3 * eTf);
  }

  // Tensor-parallel collectives of a full T x h activation (Megatron's f and
  // g): the allreduce, or under sequence parallelism its allgather and
  // reduce-scatter halves.
  TpComm Comm(TpCommKind kind, bool before, Bytes bytes = Bytes(-1)) const {
    return TpComm{kind, bytes.v < 0 ? act_bytes_ : bytes, before};
  }
  // The last module's collectives (none on one rank).
  void AddComms(std::vector<TpComm> fwd, std::vector<TpComm> bwd) {
    if (tp == 1) return;
    g_.modules.back().tp_fwd = std::move(fwd);
    g_.modules.back().tp_bwd = std::move(bwd);
  }
  // A column-parallel Linear's collectives: its input gathered forward and
  // backward (sequence parallel, which keeps only the shard), its input
  // gradient reduced.
  void ColumnComms() {
    if (sp)
      AddComms({}, {Comm(TK::kAllGather, true), Comm(TK::kReduceScatter, false)});
    else
      AddComms({}, {Comm(TK::kAllReduce, false)});
  }
  // A row-parallel Linear's: its output reduced; under sequence parallelism
  // its output gradient gathered.
  void RowComms() {
    if (sp)
      AddComms({Comm(TK::kReduceScatter, false)}, {Comm(TK::kAllGather, true)});
    else
      AddComms({Comm(TK::kAllReduce, false)}, {});
  }
  // A norm under sequence parallelism: its output gathered for the
  // column-parallel Linear after it.
  void NormComms() {
    if (sp) AddComms({Comm(TK::kAllGather, false)}, {});
  }

  std::vector<int> Embedding();
  void AttentionHalf(const std::string& p, int la);
  void Attention(const std::string& p, int la);
  void MlpHalf(const std::string& p, int lm);
  void MoeMlp(const std::string& p, int lm);
  void DenseMlp(const std::string& p, int lm);
  std::pair<size_t, size_t> TiledLinear(const std::string& name, int layer, int64_t in, int64_t out, double act_bytes,
                                        const std::function<void(Kernels&)>& epilogue);
  void Spread(std::pair<size_t, size_t> tiles);
  void TiledMlp(const std::string& p, int l);
  void FinalNorm();
  void Head(const std::vector<int>& embed);
  void Checkpoints();

  const ModelSpec& m_;
  ModelGraph& g_;
  GraphBuilder b_;
  int64_t Ti_ = 0;   // tokens per micro batch, checked
  int64_t Ba_ = 0;   // micro batch x this rank's heads
  Bytes act_bytes_;  // one T x h activation (tensor parallel)
};

// Token table (split over the vocabulary), and a learned position table
// (replicated), as GPT-2's wte and wpe.
std::vector<int> TransformerBuilder::Embedding() {
  const std::vector<int> embed = b_.WeightBias(
      "embed", b_.Mul(Vp / tp, H, "embed.wte"), Vp / tp,
      m_.position == PositionKind::kLearned ? b_.Mul(m_.position_rows(), H, "embed.wpe") : 0, "wte", "wpe",
      /*weight_vector=*/false, /*bias_vector=*/false, m_.position_rows());
  // Lookup (and position add), dropout; backward: dropout, then the rows'
  // gradients scattered into the table(s).
  const double tables = m_.position == PositionKind::kLearned ? 2 : 1;
  Kernels k = NewKernels();
  k.Fwd((1 + 2 * tables) * eTh).Fwd((2 * eTh + T * h) / rep).Bwd((2 * eTh + T * h) / rep).Bwd(3 * tables * eTh);
  b_.Module("embed", -1, embed, 0.0, Act(2), k.fwd, k.bwd);  // dropout mask + output
  // VocabParallelEmbedding: each rank looks up its rows; the sum of the
  // partial outputs (scattered over the sequence under sequence parallelism).
  AddComms({Comm(sp ? TK::kReduceScatter : TK::kAllReduce, false)}, {});
  return embed;
}

// ln1, the QKV projection (column-parallel), attention, the output
// projection (row-parallel) and its bias-dropout-add.
void TransformerBuilder::AttentionHalf(const std::string& p, int la) {
  {
    Kernels k = NormKernels();
    b_.Module(p + "ln1", la, NormGroups(p + "ln1"), 0.0, Act(2), k.fwd, k.bwd);
    NormComms();
    // The layer's first module: under partition_activations it gathers
    // the checkpoint slices before the layer's recomputation.
    if (partitioned) g_.modules.back().tp_recompute = {Comm(TK::kAllGather, true)};
  }
  const int64_t qkv_bias = m_.bias || m_.qkv_bias ? (H + 2 * KV) / tp : 0;
  {
    Kernels k = NewKernels();
    k.Linear(Ti_, H, (H + 2 * KV) / tp, qkv_bias > 0);
    b_.Module(p + "qkv", la,
              b_.WeightBias(p + "qkv", b_.Mul(H, (H + 2 * KV) / tp, p + "qkv.weight"), (H + 2 * KV) / tp, qkv_bias),
              2 * T * h * (h + 2 * kv) / split, Act(2), k.fwd, k.bwd);
    ColumnComms();
  }
  Attention(p, la);
  Kernels ko = NewKernels();
  ko.Linear(Ti_, H / tp, H, m_.bias);
  DropoutAdd(ko);
  // Its input (split) and the dropout mask (replicated, or a shard).
  b_.Module(p + "attn_out", la, b_.WeightBias(p + "attn_out", b_.Mul(H / tp, H, p + "attn_out.weight"), H, bias * H),
            2 * T * h * h / split, ks * T * h * (2 / split + 1 / rep), ko.fwd, ko.bwd);
  RowComms();
}

// The attention kernels of this rank's heads (no parameters).
void TransformerBuilder::Attention(const std::string& p, int la) {
  Kernels kw = NewKernels();
  const double scores = static_cast<double>(Ba_) * s * s;  // elements of the s x s scores, this rank's heads
  const int64_t Ba = Ba_;
  if (m_.flash_attention) {
    // One kernel each way: QK^T and PV tile by tile in SRAM; HBM sees
    // Q, K, V and O (forward), and Q, K, V, O, dO, dQ, dK, dV (backward,
    // which recomputes the scores: five products).
    kw.fwd.gemms = {{S, S, D, Ba}, {S, D, S, Ba}};
    kw.fwd.mem_bytes = 4 * eTh / split;
    kw.fwd.launches = 1;
    kw.bwd.gemms = {{S, S, D, Ba}, {S, D, S, Ba}, {S, S, D, Ba}, {S, D, S, Ba}, {S, D, S, Ba}};
    kw.bwd.mem_bytes = 8 * eTh / split;
    kw.bwd.launches = 2;  // FlashAttention-2's backward: a preprocessing kernel and the main one
    // Q, K, V and O kept, and the softmax's log-sum-exp (fp32 per row per head).
    b_.Module(p + "attn", la, {}, 4 * T * s * h / split, (ks * 6 * T * h + 4.0 * T * a) / split, kw.fwd, kw.bwd);
    return;
  }
  // Scores Q K^T per head, fused scale-mask-softmax (read and write the
  // scores), dropout (read, write, 1-byte mask), context P V per head.
  kw.fwd.gemms = {{S, S, D, Ba}, {S, D, S, Ba}};
  kw.fwd.launches = 2;
  // Unfused (masked_softmax_fusion false): the mask's own pass each
  // way (masked_fill_ in place; its backward zeroes the masked grads).
  // Megatron's mask func fills in place a view of baddbmm's output
  // (attention_scores = matmul_result.view(...)), so PyTorch's autograd
  // hands the gradient back through CopySlices (autograd/functions/
  // tensor.cpp, CopySlices::apply_impl: result.copy_(grad),
  // grad_slice.clone(), grad_slice.copy_(res)); masked_fill_'s backward
  // is out of place (grad.masked_fill(mask, 0): a clone, then the fill)
  // and the view's regenerated as_strided backward zero-fills a
  // base-sized buffer and copies the gradient in: five copies of the
  // scores' gradient and one fill, what an H100 showed (docs/simulator.md,
  // "Checked against a GPU"). Time only: the copies' transient buffers
  // are not in the plan's memory.
  if (!m_.masked_softmax_fusion) {
    kw.Fwd(2 * e * scores).Bwd(2 * e * scores).Bwd(e * scores);
    for (int copy = 0; copy < 5; ++copy) kw.Bwd(2 * e * scores);
  }
  kw.Fwd(2 * e * scores).Fwd(2 * e * scores + scores);
  // dV = P^T dO, dP = dO V^T; dropout backward; softmax backward (reads
  // P and dP, writes dS); dQ = dS K, dK = dS^T Q.
  kw.bwd.gemms = {{S, D, S, Ba}, {S, S, D, Ba}, {S, D, S, Ba}, {S, D, S, Ba}};
  kw.bwd.launches += 4;  // after the unfused mask's passes above
  kw.Bwd(2 * e * scores + scores).Bwd(3 * e * scores);
  // Q, K, V kept (6sbh) plus softmax, its dropout mask and input (5*a*s^2*b).
  b_.Module(p + "attn", la, {}, 4 * T * s * h / split, ks * (6 * T * h + 5 * a * s * T) / split, kw.fwd, kw.bwd);
}

// ln2 and the MLP: a mixture of experts, DeepSpeed's tiled Linears, or dense.
void TransformerBuilder::MlpHalf(const std::string& p, int lm) {
  {
    Kernels k = NormKernels();
    b_.Module(p + "ln2", lm, NormGroups(p + "ln2"), 0.0, Act(2), k.fwd, k.bwd);
    NormComms();
    // The MLP half's first module under split_transformers: its own
    // checkpoint, gathered before its recomputation as ln1's.
    if (partitioned && split_tf) g_.modules.back().tp_recompute = {Comm(TK::kAllGather, true)};
  }
  if (m_.moe())
    MoeMlp(p, lm);
  else if (m_.tiled())
    TiledMlp(p, lm);
  else
    DenseMlp(p, lm);
}

// Mixtral's MixtralSparseMoeBlock: a router (gate, h x E, no bias) and E
// experts (w1 gate, w2 down, w3 up). DeepSpeed makes the block a ZeRO-3 leaf
// module by default (runtime/zero/leaf_module_config.py,
// DEFAULT_LEAF_MODULE_CLASSES): one fetch of all its parameters, in
// parameters() order, not one per expert. Each token runs top_k experts.
// (Not split by tensor parallelism: CheckScenario refuses the pair.)
void TransformerBuilder::MoeMlp(const std::string& p, int lm) {
  const int64_t E = m_.num_experts;
  const double K = m_.top_k(), e_ = static_cast<double>(E);
  std::vector<int> moe = {b_.Group(p + "moe.gate.weight", b_.Mul(H, E, p + "moe.gate.weight"), E)};
  const int64_t HF = b_.Mul(H, F, p + "moe expert weight");
  for (int64_t x = 0; x < E; ++x) {
    const std::string ex = p + "moe.experts." + std::to_string(x) + ".";
    auto add = [&](const std::vector<int>& gs) { moe.insert(moe.end(), gs.begin(), gs.end()); };
    if (swiglu) {
      add(b_.WeightBias(ex + "w1", HF, F, bias * F));
      add(b_.WeightBias(ex + "w2", HF, H, bias * H));
      add(b_.WeightBias(ex + "w3", HF, F, bias * F));
    } else {
      add(b_.WeightBias(ex + "fc1", HF, F, bias * F));
      add(b_.WeightBias(ex + "fc2", HF, H, bias * H));
    }
  }
  // Router GEMM and its softmax/top-k (fp32 logits), tokens dispatched to
  // and combined from their experts (K copies of each), and each
  // expert's MLP on its share of the tokens (balanced: T K / E rows) as
  // one batched GEMM per matrix.
  Kernels k = NewKernels();
  k.Linear(Ti_, H, E, false).Fwd(8 * T * e_).Bwd(8 * T * e_);
  k.Fwd(2 * K * eTh).Fwd(3 * K * eTh).Bwd(2 * K * eTh).Bwd(3 * K * eTh);
  const int64_t rows = b_.Count(std::ceil(T * K / e_), "tokens per expert");
  k.Linear(rows, H, swiglu ? 2 * F : F, m_.bias, E);
  if (swiglu)
    k.Fwd(3 * e * K * T * f).Bwd(5 * e * K * T * f);
  else
    k.Fwd(2 * e * K * T * f).Bwd(3 * e * K * T * f);
  k.Linear(rows, F, H, m_.bias, E);
  DropoutAdd(k);
  // Router logits (fp32, T x E), then each token's top_k expert MLPs as
  // a dense MLP's activations per pick, and the block's input.
  b_.Module(p + "moe", lm, moe, 2 * T * h * e_ + K * mlp_matrices * 2 * T * h * f, 4 * T * e_ + KAct(K * mlp_act + h),
            k.fwd, k.bwd);
}

// fc1: column-parallel (GeLU's h x f, or SwiGLU's gate and up as one
// module); fc2: row-parallel. Kept: fc1's input (replicated, or a shard),
// the activation's inputs and fc2's input (split), fc2's dropout mask
// (replicated, or a shard).
void TransformerBuilder::DenseMlp(const std::string& p, int lm) {
  const int64_t HF = b_.Mul(H, F / tp, p + "mlp weight");
  std::vector<int> up = swiglu ? b_.WeightBias(p + "gate", HF, F / tp, bias * F / tp)
                               : b_.WeightBias(p + "fc1", HF, F / tp, bias * F / tp);
  if (swiglu)
    for (int gi : b_.WeightBias(p + "up", HF, F / tp, bias * F / tp)) up.push_back(gi);
  Kernels k1 = NewKernels();
  if (swiglu)
    k1.Linear(Ti_, H, 2 * F / tp, m_.bias)
        .Fwd(3 * eTf)
        .Bwd(5 * eTf);  // SwiGLU: reads gate and up, writes their product
  else
    BiasGelu(k1.Linear(Ti_, H, F / tp, false));  // bias-GeLU (the bias is its input)
  b_.Module(p + "fc1", lm, up, 2 * T * h * (swiglu ? 2 : 1) * f / split, Act(2), k1.fwd, k1.bwd);
  ColumnComms();
  Kernels k2 = NewKernels();
  k2.Linear(Ti_, F / tp, H, m_.bias);
  DropoutAdd(k2);
  // GeLU input and fc2 input (2 bytes x f each) and the dropout mask (h):
  // 17sbh with f = 4h and one rank.
  b_.Module(p + "fc2", lm, b_.WeightBias(p + (swiglu ? "down" : "fc2"), HF, H, bias * H), 2 * T * f * h / split,
            KAct(mlp_act / split + h / rep), k2.fwd, k2.bwd);
  RowComms();
}

// DeepSpeed's TiledLinear (runtime/zero/tiling.py) as a GeLU MLP's fc1 and
// fc2: out_splits x in_splits Linears, each its own module (ZeRO-3 fetches
// tile by tile), their sizes by partition_uniform (the first `residual`
// parts one larger), the bias on each output split's last input split;
// forward adds the input splits' outputs and concatenates the output
// splits. The tile that runs first forward holds the activations and the
// collectives before the pass (after it, backward); the last, the epilogue
// (GeLU; dropout-add) and the collectives after it. Returns the first and
// last tile's module indices.
std::pair<size_t, size_t> TransformerBuilder::TiledLinear(const std::string& name, int layer, int64_t in, int64_t out,
                                                          double act_bytes,
                                                          const std::function<void(Kernels&)>& epilogue) {
  auto uniform = [](int64_t n, int k) {
    std::vector<int64_t> v;
    for (int i = 0; i < k; ++i) v.push_back(n / k + (i < n % k ? 1 : 0));
    return v;
  };
  const int I = m_.tiled_in_splits, O = m_.tiled_out_splits;
  const std::vector<int64_t> ins = uniform(in, I), outs = uniform(out, O);
  const size_t first = g_.modules.size();
  for (int o = 0; o < O; ++o)
    for (int i = 0; i < I; ++i) {
      const std::string tile = name + ".tile" + std::to_string(o) + "_" + std::to_string(i);
      const bool with_bias = m_.bias && i == I - 1;
      const bool last = o == O - 1 && i == I - 1;
      const int64_t tin = ins[static_cast<size_t>(i)], tout = outs[static_cast<size_t>(o)];
      Kernels k = NewKernels();
      k.Linear(Ti_, tin, tout, with_bias);
      const double eTo = e * T * static_cast<double>(tout);
      if (i > 0) k.Fwd(3 * eTo);  // added to the output split's sum
      if (last && O > 1) k.Fwd(2 * e * T * static_cast<double>(out)).Bwd(2 * e * T * static_cast<double>(out));
      if (last) epilogue(k);
      b_.Module(tile, layer, b_.WeightBias(tile, b_.Mul(tin, tout, tile + ".weight"), tout, with_bias ? tout : 0),
                2 * T * static_cast<double>(tin) * static_cast<double>(tout), o == 0 && i == 0 ? act_bytes : 0.0, k.fwd,
                k.bwd);
    }
  return std::pair{first, g_.modules.size() - 1};
}

// Moves a pass's collectives (ModuleSpec tp_fwd/tp_bwd of one untiled
// module) onto its tiles: before forward and after backward on the first,
// after forward and before backward on the last.
void TransformerBuilder::Spread(std::pair<size_t, size_t> tiles) {
  ModuleSpec& last = g_.modules[tiles.second];
  std::vector<TpComm> fwd = std::move(last.tp_fwd), bwd = std::move(last.tp_bwd);
  last.tp_fwd.clear(), last.tp_bwd.clear();
  for (const TpComm& c : fwd) (c.before ? g_.modules[tiles.first] : last).tp_fwd.push_back(c);
  for (const TpComm& c : bwd) (c.before ? last : g_.modules[tiles.first]).tp_bwd.push_back(c);
}

void TransformerBuilder::TiledMlp(const std::string& p, int l) {
  const auto fc1 = TiledLinear(p + "fc1", l, H, F / tp, Act(2), [&](Kernels& k) { BiasGelu(k); });
  ColumnComms();  // onto the last tile: Spread moves them
  Spread(fc1);
  const auto fc2 =
      TiledLinear(p + "fc2", l, F / tp, H, KAct(mlp_act / split + h / rep), [&](Kernels& k) { DropoutAdd(k); });
  RowComms();
  Spread(fc2);
}

void TransformerBuilder::FinalNorm() {
  Kernels k = NormKernels();
  b_.Module("ln_f", -1, NormGroups("ln_f"), 0.0, Act(2), k.fwd, k.bwd);
  NormComms();
}

// The LM head: the token table (tied) or its own, split over the
// vocabulary; fp32 logits of this rank's vocabulary shard for the loss.
void TransformerBuilder::Head(const std::vector<int>& embed) {
  const std::vector<int> head = m_.tie_embeddings
                                    ? std::vector<int>{embed[0]}
                                    : b_.WeightBias("lm_head", b_.Mul(Vp / tp, H, "lm_head.weight"), Vp / tp, 0);
  // Logits GEMM; the loss casts them to fp32 and passes over them for the
  // max and the sum of exponentials; its backward writes the logits'
  // gradient from the fp32 softmax.
  const double Vr = V / split;
  Kernels k = NewKernels();
  k.Linear(Ti_, H, Vp / tp, false).Fwd(T * Vr * (e + 4)).Fwd(2 * 4 * T * Vr).Bwd(T * Vr * (4 + e));
  b_.Module("lm_head", -1, head, 2 * T * h * Vr, 4 * T * Vr, k.fwd, k.bwd);
  // Vocab-parallel cross entropy (Megatron's _VocabParallelCrossEntropy):
  // three fp32 values per token all-reduced (the max; then the target
  // logit and the sum of exponentials as one tensor); the head's input
  // gradient reduced (its input gathered first under sequence parallelism).
  const Bytes stats(b_.Count(3 * 4 * T, "the loss's statistics"));
  if (sp)
    AddComms({Comm(TK::kAllGather, true), Comm(TK::kAllReduce, false, stats)}, {Comm(TK::kReduceScatter, false)});
  else
    AddComms({Comm(TK::kAllReduce, false, stats)}, {Comm(TK::kAllReduce, false)});
}

// Checkpoint segments: the layers, or their halves (split_transformers),
// each keeping its input (the residual stream, T x h either way); under
// partition_activations a 1/tp slice, gathered before the segment's
// recomputation (ln1's, and ln2's, tp_recompute).
void TransformerBuilder::Checkpoints() {
  g_.num_layers = split_tf ? 2 * m_.layers : m_.layers;
  g_.checkpoint_bytes.assign(g_.num_layers,
                             Bytes(b_.Count(Act(2) / (partitioned ? split : 1), "a layer's checkpointed input")));
  g_.layer_input_bytes.assign(g_.num_layers, Bytes(b_.Count(Act(2), "a layer's input")));
  g_.tokens_per_micro_batch = Ti_;
}

}  // namespace

void BuildTransformer(const ModelSpec& m, const TrainingSpec& t, const ParallelismSpec& par, ModelGraph& g,
                      SizeMath& math) {
  TransformerBuilder(m, t, par, g, math).Build();
}

}  // namespace strata::model_detail
