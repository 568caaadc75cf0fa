#include "strata/core/model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

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
  void Module(std::string name, int layer, std::vector<int> groups, double flops, double act_bytes,
              KernelWork fwd = {}, KernelWork bwd = {}) {
    const int64_t act = Count(act_bytes, name + " activation bytes");
    g_.modules.push_back({std::move(name), layer, std::move(groups), flops, Bytes(act), std::move(fwd), std::move(bwd)});
  }

 private:
  ModelGraph& g_;
  SizeMath& m_;
};

// Kernel builders for one module's passes (model.h: Megatron-LM's kernels).
class Kernels {
 public:
  explicit Kernels(int elem_bytes) { fwd.elem_bytes = bwd.elem_bytes = elem_bytes; }
  // A Linear on T rows, in -> out: forward y = x W (bias in the GEMM's
  // epilogue); backward dx = dy W^T, dW = x^T dy, and the bias gradient as
  // a reduction over dy.
  Kernels& Linear(int64_t T, int64_t in, int64_t out, bool bias, int64_t batch = 1) {
    fwd.gemms.push_back({T, out, in, batch});
    bwd.gemms.push_back({T, in, out, batch});
    bwd.gemms.push_back({in, out, T, batch});
    fwd.launches += 1;
    bwd.launches += 2;
    if (bias)
      Bwd(static_cast<double>(fwd.elem_bytes) * static_cast<double>(T) * static_cast<double>(out) *
          static_cast<double>(batch));
    return *this;
  }
  // One memory-bound kernel of each pass, by the bytes it reads and writes.
  Kernels& Fwd(double bytes) {
    fwd.mem_bytes += bytes;
    fwd.launches += 1;
    return *this;
  }
  Kernels& Bwd(double bytes) {
    bwd.mem_bytes += bytes;
    bwd.launches += 1;
    return *this;
  }
  KernelWork fwd, bwd;
};

// Tensor parallelism follows Megatron-LM (model.h): each rank builds its own
// shard of every module; `tp` = 1 is the whole model.
void BuildTransformer(const ModelSpec& m, const TrainingSpec& t, const ParallelismSpec& par, ModelGraph& g,
                      SizeMath& math) {
  GraphBuilder b(g, math);
  const int64_t tp = std::max(1, par.tensor);
  const bool sp = par.sequence_parallel && tp > 1;
  const double B = t.micro_batch_size, s = static_cast<double>(m.seq_length);
  const double h = static_cast<double>(m.hidden_size), f = static_cast<double>(m.ffn());
  // Megatron pads the vocabulary to a multiple of 128 x tp
  // (_vocab_size_with_padding, make_vocab_size_divisible_by 128) when the
  // table is split; one rank keeps the vocabulary as given.
  const int64_t Vp = tp > 1 ? CeilDiv(m.vocab_size, 128 * tp) * 128 * tp : m.vocab_size;
  const double V = static_cast<double>(Vp), a = m.num_heads;
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
  const double split = static_cast<double>(tp);     // what a split tensor is divided by
  const double rep = sp ? split : 1.0;              // what a replicated one is (sequence parallel: split too)
  auto act = [&](double per_token_h_units) { return k * per_token_h_units * T * h / rep; };
  auto k_act = [&](double per_token) { return k * T * per_token; };  // per-token 16-bit units
  const int64_t bias = m.bias ? 1 : 0;
  auto norm = [&](const std::string& name) {
    return b.WeightBias(name, H, m.norm == NormKind::kLayerNorm ? H : 0);
  };

  // Kernels: e-byte elements, T tokens; "xTh" below is x e T h bytes.
  const int64_t Ti = b.Count(T, "tokens per micro batch");
  const double e = BytesPerElement(t.precision), eTh = e * T * h, eTf = e * T * f / split;
  const int64_t S = m.seq_length, Ba = b.Mul(t.micro_batch_size, m.num_heads / tp, "micro batch x heads");
  const int64_t D = H / m.num_heads;  // head dimension
  auto norm_kernels = [&] { return Kernels(static_cast<int>(e)).Fwd(2 * eTh / rep).Bwd(3 * eTh / rep); };
  // Bias-dropout-add after a row-parallel projection (on the reduced output:
  // whole, or this rank's sequence shard): reads the output and the
  // residual, writes the sum and a 1-byte mask; backward reads dy and the
  // mask, writes dx.
  // Unfused (bias_dropout_fusion false): x + bias, dropout, + residual as
  // three passes forward; the backward is the dropout's either way (the
  // adds pass the gradient through, the bias's reduction as fused).
  auto dropout_add = [&](Kernels& k) {
    if (m.bias_dropout_fusion) k.Fwd((3 * eTh + T * h) / rep);
    else k.Fwd(2 * eTh / rep).Fwd((2 * eTh + T * h) / rep).Fwd(3 * eTh / rep);
    k.Bwd((2 * eTh + T * h) / rep);
  };
  // fc1's epilogue, GeLU on x + bias: fused, one pass each way; unfused
  // (bias_gelu_fusion false), the bias added in a pass of its own first.
  auto bias_gelu = [&](Kernels& k) {
    if (!m.bias_gelu_fusion) k.Fwd(2 * eTf);
    k.Fwd(2 * eTf).Bwd(3 * eTf);
  };
  // Tensor-parallel collectives of a full T x h activation (Megatron's f and
  // g): the allreduce, or under sequence parallelism its allgather and
  // reduce-scatter halves.
  const Bytes act_bytes(tp > 1 ? b.Count(eTh, "one activation's bytes") : 0);
  auto comm = [&](TpCommKind kind, bool before, Bytes bytes = Bytes(-1)) {
    return TpComm{kind, bytes.v < 0 ? act_bytes : bytes, before};
  };
  using TK = TpCommKind;
  // DeepSpeed's partition_activations (TrainingSpec): checkpoints split over
  // the tensor-parallel ranks (under sequence parallelism already a shard).
  const bool partitioned = t.partition_activations && tp > 1 && !sp;
  const bool split_tf = t.split_transformers;
  auto add_comms = [&](std::vector<TpComm> fwd, std::vector<TpComm> bwd) {
    if (tp == 1) return;
    g.modules.back().tp_fwd = std::move(fwd);
    g.modules.back().tp_bwd = std::move(bwd);
  };
  // A column-parallel Linear's collectives: its input gathered forward and
  // backward (sequence parallel, which keeps only the shard), its input
  // gradient reduced.
  auto column_comms = [&] {
    if (sp) add_comms({}, {comm(TK::kAllGather, true), comm(TK::kReduceScatter, false)});
    else add_comms({}, {comm(TK::kAllReduce, false)});
  };
  // A row-parallel Linear's: its output reduced; under sequence parallelism
  // its output gradient gathered.
  auto row_comms = [&] {
    if (sp) add_comms({comm(TK::kReduceScatter, false)}, {comm(TK::kAllGather, true)});
    else add_comms({comm(TK::kAllReduce, false)}, {});
  };
  // A norm under sequence parallelism: its output gathered for the
  // column-parallel Linear after it.
  auto norm_comms = [&] {
    if (sp) add_comms({comm(TK::kAllGather, false)}, {});
  };

  // DeepSpeed's TiledLinear (runtime/zero/tiling.py) as a GeLU MLP's fc1
  // and fc2: out_splits x in_splits Linears, each its own module (ZeRO-3
  // fetches tile by tile), their sizes by partition_uniform (the first
  // `residual` parts one larger), the bias on each output split's last input
  // split; forward adds the input splits' outputs and concatenates the
  // output splits. The tile that runs first forward holds the activations
  // and the collectives before the pass (after it, backward); the last,
  // the epilogue (GeLU; dropout-add) and the collectives after it.
  auto uniform = [](int64_t n, int k) {
    std::vector<int64_t> v;
    for (int i = 0; i < k; ++i) v.push_back(n / k + (i < n % k ? 1 : 0));
    return v;
  };
  auto tiled_linear = [&](const std::string& name, int layer, int64_t in, int64_t out, double act_bytes,
                          const std::function<void(Kernels&)>& epilogue) {
    const int I = m.tiled_in_splits, O = m.tiled_out_splits;
    const std::vector<int64_t> ins = uniform(in, I), outs = uniform(out, O);
    const size_t first = g.modules.size();
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < I; ++i) {
        const std::string tile = name + ".tile" + std::to_string(o) + "_" + std::to_string(i);
        const bool with_bias = m.bias && i == I - 1;
        const bool last = o == O - 1 && i == I - 1;
        Kernels k(static_cast<int>(e));
        k.Linear(Ti, ins[static_cast<size_t>(i)], outs[static_cast<size_t>(o)], with_bias);
        const double eTo = e * T * static_cast<double>(outs[static_cast<size_t>(o)]);
        if (i > 0) k.Fwd(3 * eTo);  // added to the output split's sum
        if (last && O > 1) k.Fwd(2 * e * T * static_cast<double>(out)).Bwd(2 * e * T * static_cast<double>(out));
        if (last) epilogue(k);
        b.Module(tile, layer,
                 b.WeightBias(tile, b.Mul(ins[static_cast<size_t>(i)], outs[static_cast<size_t>(o)], tile + ".weight"),
                              with_bias ? outs[static_cast<size_t>(o)] : 0),
                 2 * T * static_cast<double>(ins[static_cast<size_t>(i)]) * static_cast<double>(outs[static_cast<size_t>(o)]),
                 o == 0 && i == 0 ? act_bytes : 0.0, k.fwd, k.bwd);
      }
    return std::pair{first, g.modules.size() - 1};
  };
  // Moves a pass's collectives (ModuleSpec tp_fwd/tp_bwd of one untiled
  // module) onto its tiles: before forward and after backward on the first,
  // after forward and before backward on the last.
  auto spread = [&](std::pair<size_t, size_t> tiles) {
    ModuleSpec& last = g.modules[tiles.second];
    std::vector<TpComm> fwd = std::move(last.tp_fwd), bwd = std::move(last.tp_bwd);
    last.tp_fwd.clear(), last.tp_bwd.clear();
    for (const TpComm& c : fwd) (c.before ? g.modules[tiles.first] : last).tp_fwd.push_back(c);
    for (const TpComm& c : bwd) (c.before ? last : g.modules[tiles.first]).tp_bwd.push_back(c);
  };
  auto TiledMlp = [&](const std::string& p, int l) {
    const auto fc1 = tiled_linear(p + "fc1", l, H, F / tp, act(2), [&](Kernels& k) { bias_gelu(k); });
    column_comms();  // onto the last tile: spread moves them
    spread(fc1);
    const auto fc2 = tiled_linear(p + "fc2", l, F / tp, H, k_act(mlp_act / split + h / rep), [&](Kernels& k) { dropout_add(k); });
    row_comms();
    spread(fc2);
  };

  // Token table (split over the vocabulary), and a learned position table
  // (replicated), as GPT-2's wte and wpe.
  const std::vector<int> embed =
      b.WeightBias("embed", b.Mul(Vp / tp, H, "embed.wte"),
                   m.position == PositionKind::kLearned ? b.Mul(m.position_rows(), H, "embed.wpe") : 0, "wte", "wpe");
  {
    // Lookup (and position add), dropout; backward: dropout, then the rows'
    // gradients scattered into the table(s).
    const double tables = m.position == PositionKind::kLearned ? 2 : 1;
    Kernels k(static_cast<int>(e));
    k.Fwd((1 + 2 * tables) * eTh).Fwd((2 * eTh + T * h) / rep).Bwd((2 * eTh + T * h) / rep).Bwd(3 * tables * eTh);
    b.Module("embed", -1, embed, 0.0, act(2), k.fwd, k.bwd);  // dropout mask + output
    // VocabParallelEmbedding: each rank looks up its rows; the sum of the
    // partial outputs (scattered over the sequence under sequence parallelism).
    add_comms({comm(sp ? TK::kReduceScatter : TK::kAllReduce, false)}, {});
  }
  for (int l = 0; l < m.layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    // Checkpoint segments: the layer, or its two halves (split_transformers).
    const int la = split_tf ? 2 * l : l, lm = split_tf ? 2 * l + 1 : l;
    {
      Kernels k = norm_kernels();
      b.Module(p + "ln1", la, norm(p + "ln1"), 0.0, act(2), k.fwd, k.bwd);
      norm_comms();
      // The layer's first module: under partition_activations it gathers
      // the checkpoint slices before the layer's recomputation.
      if (partitioned) g.modules.back().tp_recompute = {comm(TK::kAllGather, true)};
    }
    const int64_t qkv_bias = m.bias || m.qkv_bias ? (H + 2 * KV) / tp : 0;
    {
      Kernels k(static_cast<int>(e));
      k.Linear(Ti, H, (H + 2 * KV) / tp, qkv_bias > 0);
      b.Module(p + "qkv", la, b.WeightBias(p + "qkv", b.Mul(H, (H + 2 * KV) / tp, p + "qkv.weight"), qkv_bias),
               2 * T * h * (h + 2 * kv) / split, act(2), k.fwd, k.bwd);
      column_comms();
    }
    {
      Kernels kw(static_cast<int>(e));
      const double scores = static_cast<double>(Ba) * s * s;  // elements of the s x s scores, this rank's heads
      if (m.flash_attention) {
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
        b.Module(p + "attn", la, {}, 4 * T * s * h / split, (k * 6 * T * h + 4.0 * T * a) / split, kw.fwd, kw.bwd);
      } else {
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
        if (!m.masked_softmax_fusion) {
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
        b.Module(p + "attn", la, {}, 4 * T * s * h / split, k * (6 * T * h + 5 * a * s * T) / split, kw.fwd, kw.bwd);
      }
    }
    {
      Kernels ko(static_cast<int>(e));
      ko.Linear(Ti, H / tp, H, m.bias);
      dropout_add(ko);
      // Its input (split) and the dropout mask (replicated, or a shard).
      b.Module(p + "attn_out", la, b.WeightBias(p + "attn_out", b.Mul(H / tp, H, p + "attn_out.weight"), bias * H),
               2 * T * h * h / split, k * T * h * (2 / split + 1 / rep), ko.fwd, ko.bwd);
      row_comms();
    }
    {
      Kernels k = norm_kernels();
      b.Module(p + "ln2", lm, norm(p + "ln2"), 0.0, act(2), k.fwd, k.bwd);
      norm_comms();
      // The MLP half's first module under split_transformers: its own
      // checkpoint, gathered before its recomputation as ln1's.
      if (partitioned && split_tf) g.modules.back().tp_recompute = {comm(TK::kAllGather, true)};
    }
    if (m.moe()) {
      // Mixtral's MixtralSparseMoeBlock: a router (gate, h x E, no bias) and
      // E experts (w1 gate, w2 down, w3 up). DeepSpeed makes the block a ZeRO-3
      // leaf module by default (runtime/zero/leaf_module_config.py,
      // DEFAULT_LEAF_MODULE_CLASSES): one fetch of all its parameters, in
      // parameters() order, not one per expert. Each token runs top_k experts.
      // (Not split by tensor parallelism: CheckScenario refuses the pair.)
      const int64_t E = m.num_experts;
      const double K = m.top_k(), e_ = static_cast<double>(E);
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
      // Router GEMM and its softmax/top-k (fp32 logits), tokens dispatched to
      // and combined from their experts (K copies of each), and each
      // expert's MLP on its share of the tokens (balanced: T K / E rows) as
      // one batched GEMM per matrix.
      Kernels k(static_cast<int>(e));
      k.Linear(Ti, H, E, false).Fwd(8 * T * e_).Bwd(8 * T * e_);
      k.Fwd(2 * K * eTh).Fwd(3 * K * eTh).Bwd(2 * K * eTh).Bwd(3 * K * eTh);
      const int64_t rows = b.Count(std::ceil(T * K / e_), "tokens per expert");
      k.Linear(rows, H, swiglu ? 2 * F : F, m.bias, E);
      if (swiglu) k.Fwd(3 * e * K * T * f).Bwd(5 * e * K * T * f);
      else k.Fwd(2 * e * K * T * f).Bwd(3 * e * K * T * f);
      k.Linear(rows, F, H, m.bias, E);
      dropout_add(k);
      // Router logits (fp32, T x E), then each token's top_k expert MLPs as
      // a dense MLP's activations per pick, and the block's input.
      b.Module(p + "moe", lm, moe, 2 * T * h * e_ + K * mlp_matrices * 2 * T * h * f, 4 * T * e_ + k_act(K * mlp_act + h),
               k.fwd, k.bwd);
    } else if (m.tiled()) {
      TiledMlp(p, lm);
    } else {
      // fc1: column-parallel (GeLU's h x f, or SwiGLU's gate and up as one
      // module); fc2: row-parallel. Kept: fc1's input (replicated, or a
      // shard), the activation's inputs and fc2's input (split), fc2's
      // dropout mask (replicated, or a shard).
      const int64_t HF = b.Mul(H, F / tp, p + "mlp weight");
      std::vector<int> up = swiglu ? b.WeightBias(p + "gate", HF, bias * F / tp) : b.WeightBias(p + "fc1", HF, bias * F / tp);
      if (swiglu)
        for (int gi : b.WeightBias(p + "up", HF, bias * F / tp)) up.push_back(gi);
      Kernels k1(static_cast<int>(e));
      if (swiglu) k1.Linear(Ti, H, 2 * F / tp, m.bias).Fwd(3 * eTf).Bwd(5 * eTf);  // SwiGLU: reads gate and up, writes their product
      else bias_gelu(k1.Linear(Ti, H, F / tp, false));                      // bias-GeLU (the bias is its input)
      b.Module(p + "fc1", lm, up, 2 * T * h * (swiglu ? 2 : 1) * f / split, act(2), k1.fwd, k1.bwd);
      column_comms();
      Kernels k2(static_cast<int>(e));
      k2.Linear(Ti, F / tp, H, m.bias);
      dropout_add(k2);
      // GeLU input and fc2 input (2 bytes x f each) and the dropout mask (h):
      // 17sbh with f = 4h and one rank.
      b.Module(p + "fc2", lm, b.WeightBias(p + (swiglu ? "down" : "fc2"), HF, bias * H),
               2 * T * f * h / split, k_act(mlp_act / split + h / rep), k2.fwd, k2.bwd);
      row_comms();
    }
  }
  {
    Kernels k = norm_kernels();
    b.Module("ln_f", -1, norm("ln_f"), 0.0, act(2), k.fwd, k.bwd);
    norm_comms();
  }
  // The LM head: the token table (tied) or its own, split over the
  // vocabulary; fp32 logits of this rank's vocabulary shard for the loss.
  const std::vector<int> head = m.tie_embeddings ? std::vector<int>{embed[0]}
                                                 : b.WeightBias("lm_head", b.Mul(Vp / tp, H, "lm_head.weight"), 0);
  {
    // Logits GEMM; the loss casts them to fp32 and passes over them for the
    // max and the sum of exponentials; its backward writes the logits'
    // gradient from the fp32 softmax.
    const double Vr = V / split;
    Kernels k(static_cast<int>(e));
    k.Linear(Ti, H, Vp / tp, false).Fwd(T * Vr * (e + 4)).Fwd(2 * 4 * T * Vr).Bwd(T * Vr * (4 + e));
    b.Module("lm_head", -1, head, 2 * T * h * Vr, 4 * T * Vr, k.fwd, k.bwd);
    // Vocab-parallel cross entropy (Megatron's _VocabParallelCrossEntropy):
    // three fp32 values per token all-reduced (the max; then the target
    // logit and the sum of exponentials as one tensor); the head's input gradient reduced (its input gathered
    // first under sequence parallelism).
    const Bytes stats(b.Count(3 * 4 * T, "the loss's statistics"));
    if (sp)
      add_comms({comm(TK::kAllGather, true), comm(TK::kAllReduce, false, stats)}, {comm(TK::kReduceScatter, false)});
    else
      add_comms({comm(TK::kAllReduce, false, stats)}, {comm(TK::kAllReduce, false)});
  }
  // Checkpoint segments: the layers, or their halves (split_transformers),
  // each keeping its input (the residual stream, T x h either way); under
  // partition_activations a 1/tp slice, gathered before the segment's
  // recomputation (ln1's, and ln2's, tp_recompute).
  g.num_layers = split_tf ? 2 * m.layers : m.layers;
  g.checkpoint_bytes.assign(g.num_layers, Bytes(b.Count(act(2) / (partitioned ? split : 1), "a layer's checkpointed input")));
  g.layer_input_bytes.assign(g.num_layers, Bytes(b.Count(act(2), "a layer's input")));
  g.tokens_per_micro_batch = Ti;
}

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
    b.Module(name, l, b.WeightBias(name, b.Mul(in, out, name + ".weight"), out), 2 * B * static_cast<double>(in) * out,
             B * (static_cast<double>(in) + static_cast<double>(out)) * dtype, k.fwd, k.bwd);
    ModuleSpec& mod = g.modules.back();
    if (row) mod.tp_fwd = {{TpCommKind::kAllReduce, Bytes(b.Count(B * static_cast<double>(m.sizes[l + 1]) * dtype, "an output's bytes")), false}};
    if (column && l > 0)
      mod.tp_bwd = {{TpCommKind::kAllReduce, Bytes(b.Count(B * static_cast<double>(m.sizes[l]) * dtype, "an input gradient's bytes")), false}};
  }
  g.num_layers = n;
  for (int l = 0; l < n; ++l)
    g.checkpoint_bytes.push_back(Bytes(b.Count(B * static_cast<double>(layer_in[static_cast<size_t>(l)]) * dtype, "a layer's checkpointed input")));
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
    BuildTransformer(model, training, par, g, math);
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
  g.model_params = g.total_params;
  if (par.tensor > 1) {
    auto whole = BuildModelGraph(model, training);
    if (!whole.ok()) return whole.status();
    g.model_params = whole->total_params;
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
  auto g = BuildModelGraph(model, TrainingSpec{});
  if (!g.ok()) return g.status();
  return g->total_params;
}

}  // namespace strata
