// The GPT workload: token and position embeddings, blocks of LayerNorm,
// causal self-attention and a GeLU MLP with residual connections, a final
// LayerNorm and the LM head tied to the token embedding, trained on
// byte-level tokens of a text file (predict the next byte). With tensor
// parallelism each rank holds its shard of each tensor as Megatron-LM
// splits it (core/model.cc, BuildTransformer): its heads' rows of QKV,
// fc1's rows, the matching columns of the output projection and fc2 (their
// outputs partial sums, all-reduced by the plan's ops before the bias and
// the residual), its rows of the token table (a vocabulary-parallel
// embedding and cross-entropy).
#include <cmath>
#include <cstring>
#include <map>

#include "host/line_floats.h"
#include "host/linear_low.h"
#include "host/worker_pool.h"
#include "strata/executor/mlp_kernels.h"
#include "strata/executor/transformer_kernels.h"
#include "workloads/gpt_data.h"
#include "workloads/workload.h"

namespace strata::exec {
namespace {

class Gpt : public Workload {
 public:
  Gpt(GptData d, int threads)
      : pool_(threads),
        d_(std::move(d)),
        h_(d_.h),
        f_(d_.f),
        V_(d_.V),
        S_(d_.S),
        B_(d_.B),
        T_(d_.T),
        L_(d_.L),
        tp_(d_.tp),
        tr_(d_.tr),
        ha_(d_.ha),
        al_(d_.al),
        fl_(d_.fl),
        Vl_(d_.Vl),
        checkpointing_(d_.checkpointing),
        kinds_(d_.kinds),
        layers_(d_.layers) {}

  std::vector<float> InitGroup(int g) const override { return d_.InitGroup(g); }

  void StartStep(int step) override { step_ = step; }

  // The boundary after layer l: the residual stream x[l + 1] leaving it,
  // and its gradient dx[l + 1].
  Result<std::vector<float>> TakeBoundary(int micro, int l, bool grad) override {
    auto it = acts_.find(micro);
    const size_t at = static_cast<size_t>(l) + 1;
    if (it == acts_.end() || l < 0 || at >= L_ || (grad ? it->second.dx : it->second.x)[at].empty())
      return Status::Internal("GPT: no " + std::string(grad ? "gradient of the " : "") + "output of layer " +
                              std::to_string(l) + " in micro step " + std::to_string(micro) + " to send");
    if (!grad) return it->second.x[at];
    std::vector<float> v = std::move(it->second.dx[at]);
    acts_.erase(it);
    return v;
  }
  Status PutBoundary(int micro, int l, bool grad, std::vector<float> v) override {
    const size_t at = static_cast<size_t>(l) + 1;
    if (l < 0 || at >= L_ || v.size() != T_ * h_)
      return Status::Internal("GPT boundary after layer " + std::to_string(l) + ": " + std::to_string(v.size()) +
                              " values, expected " + std::to_string(T_ * h_));
    Acts& a = A(micro);
    (grad ? a.dx : a.x)[at] = std::move(v);
    return Status::Ok();
  }

  // Tensor parallelism's all-reduces (the plan's ops after these modules):
  // the partial sums of a vocabulary-parallel embedding and of a
  // row-parallel layer, then what follows them (the position table; the
  // bias and the residual); the loss's statistics; the input gradients of
  // the column-parallel layers and the head.
  Status TensorAllReduce(int micro, int m, Operand what, const TensorReduce& reduce) override {
    auto it = acts_.find(micro);
    if (it == acts_.end() || m < 0 || static_cast<size_t>(m) >= kinds_.size())
      return Status::Internal("GPT: no micro step " + std::to_string(micro) + " for module " + std::to_string(m));
    Acts& a = it->second;
    const size_t l = static_cast<size_t>(std::max(layers_[static_cast<size_t>(m)], 0));
    const Kind k = kinds_[static_cast<size_t>(m)];
    auto sum = [&](auto& v) { reduce(v.data(), v.size(), ReduceOp::kSum); };
    if (what == Operand::kInputGrad) {
      switch (k) {
        case Kind::kQkv:
          sum(a.blocks[l].d_ln1);
          return Status::Ok();
        case Kind::kFc1:
          sum(a.blocks[l].d_ln2);
          return Status::Ok();
        case Kind::kHead:
          sum(a.d_lnf);
          return Status::Ok();
        default:
          break;
      }
    } else if (what == Operand::kOutput) {
      switch (k) {
        case Kind::kEmbed:
          sum(a.x[0]);
          for (size_t t = 0; t < T_; ++t)
            for (size_t i = 0; i < h_; ++i) a.x[0][t * h_ + i] += a.wpe[(t % S_) * h_ + i];
          a.wpe.clear();
          return Status::Ok();
        case Kind::kAttnOut: {
          Block& b = a.blocks[l];
          sum(b.partial);
          Residual(b.partial, b.bias, a.x[l], &b.mid);
          Release(&b.partial), Release(&b.bias);
          return Status::Ok();
        }
        case Kind::kFc2: {
          Block& b = a.blocks[l];
          sum(b.partial);
          Residual(b.partial, b.bias, b.mid, &a.x[l + 1]);
          Release(&b.partial), Release(&b.bias);
          EndLayerForward(b);
          return Status::Ok();
        }
        case Kind::kHead:
          return LossStatistics(a, reduce);
        default:
          break;
      }
    }
    return Status::Internal("GPT: no tensor-parallel " + std::string(OperandName(what)) + " of module " +
                            std::to_string(m));
  }

  void Forward(int micro, int m, const float* w) override {
    Acts& a = A(micro);
    const size_t l = static_cast<size_t>(std::max(layers_[static_cast<size_t>(m)], 0));
    switch (kinds_[static_cast<size_t>(m)]) {
      case Kind::kEmbed:
        Data(micro, &a);
        a.x[0].assign(T_ * h_, 0.0f);
        if (tp_ == 1) {
          EmbeddingForward(a.tokens.data(), w, w + V_ * h_, a.x[0].data(), T_, S_, h_);
        } else {
          // This rank's vocabulary rows (others 0); the position table is
          // added after the all-reduce (Megatron's Embedding).
          for (size_t t = 0; t < T_; ++t) {
            const size_t tok = static_cast<size_t>(a.tokens[t]);
            if (tok < tr_ * Vl_ || tok >= (tr_ + 1) * Vl_) continue;
            std::copy(w + (tok - tr_ * Vl_) * h_, w + (tok - tr_ * Vl_ + 1) * h_,
                      a.x[0].begin() + static_cast<std::ptrdiff_t>(t * h_));
          }
          a.wpe.assign(w + Vl_ * h_, w + Vl_ * h_ + S_ * h_);
        }
        break;
      case Kind::kLn1:
        LnForward(a.x[l], w, &a.blocks[l].ln1);
        break;
      case Kind::kQkv:
        Lin(a.blocks[l].ln1.out, w, 3 * ha_, h_, &a.blocks[l].qkv);
        break;
      case Kind::kAttn:
        a.blocks[l].att.assign(T_ * ha_, 0.0f);
        a.blocks[l].probs.assign(B_ * al_ * S_ * S_, 0.0f);
        AttentionForward(a.blocks[l].qkv.data(), a.blocks[l].att.data(), a.blocks[l].probs.data(), B_, S_, ha_, al_);
        break;
      case Kind::kAttnOut: {
        Block& b = a.blocks[l];
        if (tp_ > 1) {
          RowPartial(b.att, w, ha_, &b);
          break;
        }
        LineFloats y;
        Lin(b.att, w, h_, h_, &y);
        b.mid = a.x[l];
        for (size_t i = 0; i < y.size(); ++i) b.mid[i] += y[i];
        break;
      }
      case Kind::kLn2:
        LnForward(a.blocks[l].mid, w, &a.blocks[l].ln2);
        break;
      case Kind::kFc1:
        Lin(a.blocks[l].ln2.out, w, fl_, h_, &a.blocks[l].pre);
        a.blocks[l].act.assign(a.blocks[l].pre.size(), 0.0f);
        GeluForward(a.blocks[l].pre.data(), a.blocks[l].act.data(), a.blocks[l].pre.size());
        break;
      case Kind::kFc2: {
        Block& b = a.blocks[l];
        if (tp_ > 1) {
          RowPartial(b.act, w, fl_, &b);
          break;
        }
        LineFloats y;
        Lin(b.act, w, h_, f_, &y);
        a.x[l + 1] = b.mid;
        for (size_t i = 0; i < y.size(); ++i) a.x[l + 1][i] += y[i];
        EndLayerForward(b);
        break;
      }
      case Kind::kLnF:
        LnForward(a.x[L_], w, &a.lnf);
        break;
      case Kind::kHead:
        if (a.targets.empty()) Data(micro, &a);  // a later pipeline stage: its labels
        a.logits.assign(T_ * Vl_, 0.0f);
        LinearForwardLow(a.lnf.out.data(), w, nullptr, a.logits.data(), T_, h_, Vl_, Precision::kFp32, &pool_);
        break;
    }
  }

  double Backward(int micro, int m, const float* w, float* dw, float scale) override {
    Acts& a = A(micro);
    const size_t l = static_cast<size_t>(std::max(layers_[static_cast<size_t>(m)], 0));
    double loss = 0;
    switch (kinds_[static_cast<size_t>(m)]) {
      case Kind::kHead: {
        std::vector<float> dlogits(T_ * Vl_);
        loss = tp_ == 1 ? SoftmaxCrossEntropy(a.logits.data(), a.targets.data(), dlogits.data(), T_, V_, scale)
                        : ParallelCrossEntropy(a, dlogits.data(), scale);
        a.d_lnf.assign(T_ * h_, 0.0f);
        BackwardLinear(a.lnf.out.data(), w, dlogits.data(), a.d_lnf.data(), dw, nullptr, h_, Vl_);
        break;
      }
      case Kind::kLnF:
        a.dx[L_].assign(T_ * h_, 0.0f);
        LnBackward(a.x[L_], w, a.lnf, a.d_lnf, &a.dx[L_], dw);
        break;
      case Kind::kFc2: {
        Block& b = a.blocks[l];
        b.d_act.assign(T_ * fl_, 0.0f);
        BackwardLinear(b.act.data(), w, a.dx[l + 1].data(), b.d_act.data(), dw, dw + h_ * fl_, fl_, h_);
        a.d_mid[l] = a.dx[l + 1];  // residual
        break;
      }
      case Kind::kFc1: {
        Block& b = a.blocks[l];
        std::vector<float> d_pre(T_ * fl_, 0.0f);
        GeluBackward(b.pre.data(), b.d_act.data(), d_pre.data(), d_pre.size());
        b.d_ln2.assign(T_ * h_, 0.0f);
        BackwardLinear(b.ln2.out.data(), w, d_pre.data(), b.d_ln2.data(), dw, dw + fl_ * h_, h_, fl_);
        break;
      }
      case Kind::kLn2:
        LnBackward(a.blocks[l].mid, w, a.blocks[l].ln2, a.blocks[l].d_ln2, &a.d_mid[l], dw);
        break;
      case Kind::kAttnOut: {
        Block& b = a.blocks[l];
        b.d_att.assign(T_ * ha_, 0.0f);
        BackwardLinear(b.att.data(), w, a.d_mid[l].data(), b.d_att.data(), dw, dw + h_ * ha_, ha_, h_);
        a.dx[l] = a.d_mid[l];  // residual
        break;
      }
      case Kind::kAttn: {
        Block& b = a.blocks[l];
        b.d_qkv.assign(T_ * 3 * ha_, 0.0f);
        AttentionBackward(b.qkv.data(), b.probs.data(), b.d_att.data(), b.d_qkv.data(), B_, S_, ha_, al_);
        break;
      }
      case Kind::kQkv: {
        Block& b = a.blocks[l];
        b.d_ln1.assign(T_ * h_, 0.0f);
        BackwardLinear(b.ln1.out.data(), w, b.d_qkv.data(), b.d_ln1.data(), dw, dw + 3 * ha_ * h_, h_, 3 * ha_);
        break;
      }
      case Kind::kLn1:
        LnBackward(a.x[l], w, a.blocks[l].ln1, a.blocks[l].d_ln1, &a.dx[l], dw);
        break;
      case Kind::kEmbed:
        if (tp_ == 1) {
          EmbeddingBackward(a.tokens.data(), a.dx[0].data(), dw, dw + V_ * h_, T_, S_, h_);
        } else {
          // This rank's vocabulary rows; the position table whole.
          float* dwpe = dw + Vl_ * h_;
          for (size_t t = 0; t < T_; ++t) {
            const size_t tok = static_cast<size_t>(a.tokens[t]);
            const bool mine = tok >= tr_ * Vl_ && tok < (tr_ + 1) * Vl_;
            for (size_t i = 0; i < h_; ++i) {
              if (mine) dw[(tok - tr_ * Vl_) * h_ + i] += a.dx[0][t * h_ + i];
              dwpe[(t % S_) * h_ + i] += a.dx[0][t * h_ + i];
            }
          }
        }
        acts_.erase(micro);
        break;
    }
    return loss;
  }

 private:
  struct Ln {
    std::vector<float> out, mean, rstd;
  };
  struct Block {
    Ln ln1, ln2;
    // Linear outputs on cache lines (line_floats.h: the forward's split).
    LineFloats qkv, pre;
    std::vector<float> att, probs, mid, act;
    std::vector<float> d_act, d_ln2, d_att, d_qkv, d_ln1;
    // Tensor parallelism: a row-parallel layer's partial output and its
    // bias (fp32), from its forward to the all-reduce.
    LineFloats partial;
    std::vector<float> bias;
    // Activation checkpointing: the working activations were dropped after
    // the layer's forward; the next forwards of its modules (the plan's
    // recompute ops, in the backward) rebuild them from x[l].
    bool dropped = false;
  };
  struct Acts {
    std::vector<int32_t> tokens, targets;
    std::vector<std::vector<float>> x;  // residual stream entering each block (x[L] leaves the last)
    std::vector<Block> blocks;
    Ln lnf;
    LineFloats logits;  // this rank's vocabulary shard
    std::vector<float> d_lnf;
    std::vector<std::vector<float>> dx, d_mid;
    // Tensor parallelism: the position table until the embedding's
    // all-reduce; per token, the loss's statistics over the vocabulary.
    std::vector<float> wpe, ce_max, ce_stats;
  };

  // A micro step's activations, sized for the whole model on first use (a
  // stage computes its layers' entries only).
  Acts& A(int micro) {
    Acts& a = acts_[micro];
    if (a.x.empty()) {
      a.x.assign(L_ + 1, {});
      a.blocks.assign(L_, Block{});
      a.dx.assign(L_ + 1, {});
      a.d_mid.assign(L_, {});
    }
    return a;
  }

  // The end of a layer's forward: with activation checkpointing, its
  // working activations are dropped after the first forward (x[l] is
  // kept); after the recompute they stay for the backward that follows.
  void EndLayerForward(Block& b) {
    if (checkpointing_ && !b.dropped) {
      // split_transformers: the MLP half recomputes from its own checkpoint,
      // the residual stream after attention (mid), before the attention half.
      std::vector<float> mid;
      if (d_.split_transformers) mid = std::move(b.mid);
      b = Block{};
      b.mid = std::move(mid);
      b.dropped = true;
    } else {
      b.dropped = false;
    }
  }
  // A row-parallel Linear ([h x in] weight, then the whole bias) on this
  // rank's input columns: partial sums, the bias kept for after the sum.
  void RowPartial(const std::vector<float>& x, const float* w, size_t in, Block* b) {
    b->partial.assign(T_ * h_, 0.0f);
    LinearForwardLow(x.data(), w, nullptr, b->partial.data(), T_, in, h_, Precision::kFp32, &pool_);
    b->bias.assign(w + h_ * in, w + h_ * in + h_);
  }
  // *out = base + (y + bias) per token: the summed row-parallel output, its
  // bias, and the residual connection.
  void Residual(const LineFloats& y, const std::vector<float>& bias, const std::vector<float>& base,
                std::vector<float>* out) const {
    *out = base;
    for (size_t t = 0; t < T_; ++t)
      for (size_t i = 0; i < h_; ++i) (*out)[t * h_ + i] += y[t * h_ + i] + bias[i];
  }
  template <typename Vec>
  static void Release(Vec* v) {
    Vec().swap(*v);
  }
  // Megatron's _VocabParallelCrossEntropy.forward
  // (megatron/core/tensor_parallel/cross_entropy.py): per token the largest
  // logit over the vocabulary (all-reduce max), then the target's logit
  // (only the rank holding its row has it) and the sum of exp(logit - max),
  // one tensor all-reduced (its predicted_logits_sum_exp_logits).
  Status LossStatistics(Acts& a, const TensorReduce& reduce) {
    const size_t first = tr_ * Vl_;
    a.ce_max.assign(T_, 0.0f);
    a.ce_stats.assign(2 * T_, 0.0f);  // [target logit | sum of exponentials] per token
    for (size_t t = 0; t < T_; ++t) {
      const float* z = a.logits.data() + t * Vl_;
      float mx = z[0];
      for (size_t c = 1; c < Vl_; ++c) mx = z[c] > mx ? z[c] : mx;
      a.ce_max[t] = mx;
    }
    reduce(a.ce_max.data(), T_, ReduceOp::kMax);
    for (size_t t = 0; t < T_; ++t) {
      const float* z = a.logits.data() + t * Vl_;
      float sum = 0;
      for (size_t c = 0; c < Vl_; ++c) sum += std::exp(z[c] - a.ce_max[t]);
      a.ce_stats[T_ + t] = sum;
      const size_t target = static_cast<size_t>(a.targets[t]);
      if (target >= first && target < first + Vl_) a.ce_stats[t] = z[target - first];
    }
    reduce(a.ce_stats.data(), 2 * T_, ReduceOp::kSum);
    return Status::Ok();
  }
  // Its backward: the mean loss over the tokens, and this rank's shard of
  // the logits' gradient (softmax minus the target's one), scaled.
  double ParallelCrossEntropy(const Acts& a, float* dlogits, float scale) const {
    const size_t first = tr_ * Vl_;
    float loss = 0;
    for (size_t t = 0; t < T_; ++t) {
      const float log_sum = std::log(a.ce_stats[T_ + t]) + a.ce_max[t];
      loss += log_sum - a.ce_stats[t];
      const float* z = a.logits.data() + t * Vl_;
      for (size_t c = 0; c < Vl_; ++c) {
        const float p = std::exp(z[c] - log_sum);
        const bool target = first + c == static_cast<size_t>(a.targets[t]);
        dlogits[t * Vl_ + c] = (p - (target ? 1.0f : 0.0f)) * scale / static_cast<float>(T_);
      }
    }
    return loss / static_cast<float>(T_);
  }

  void Lin(const std::vector<float>& x, const float* w, size_t out, size_t in, LineFloats* y) {
    y->assign(T_ * out, 0.0f);
    LinearForwardLow(x.data(), w, w + out * in, y->data(), T_, in, out, Precision::kFp32, &pool_);
  }
  // dW += dy^T x (the sum over tokens first, then added), db likewise,
  // dx = dy W: the MLP workload's kernels on fp32 weights.
  void BackwardLinear(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, size_t in,
                      size_t out) {
    LinearBackwardLow(x, w, dy, dx, dw, db, T_, in, out, Precision::kFp32, /*overwrite=*/false, &pool_);
  }
  void LnForward(const std::vector<float>& x, const float* w, Ln* ln) const {
    ln->out.assign(T_ * h_, 0.0f);
    ln->mean.assign(T_, 0.0f);
    ln->rstd.assign(T_, 0.0f);
    LayerNormForward(x.data(), w, w + h_, ln->out.data(), ln->mean.data(), ln->rstd.data(), T_, h_);
  }
  void LnBackward(const std::vector<float>& x, const float* w, const Ln& ln, const std::vector<float>& dy,
                  std::vector<float>* dx, float* dw) const {
    LayerNormBackward(x.data(), w, ln.mean.data(), ln.rstd.data(), dy.data(), dx->data(), dw, dw + h_, T_, h_);
  }

  void Data(int micro, Acts* a) const { d_.Draw(step_, micro, &a->tokens, &a->targets); }

  WorkerPool pool_;  // the compute stream's: one kernel at a time
  GptData d_;
  size_t h_, f_, V_, S_, B_, T_, L_;
  size_t tp_, tr_;            // tensor-parallel ranks, and this one's index
  size_t ha_, al_, fl_, Vl_;  // this rank's widths (gpt_data.h)
  bool checkpointing_;
  int step_ = 0;
  using Kind = GptKind;
  std::vector<Kind> kinds_;
  std::vector<int> layers_;
  std::map<int, Acts> acts_;
};

}  // namespace

Result<std::unique_ptr<Workload>> MakeGptWorkload(const Plan& p, uint64_t seed, int rank, const std::string& text_path,
                                                  int threads, int tensor_rank) {
  STRATA_ASSIGN_OR_RETURN(auto d, GptData::Make(p, seed, rank, text_path, tensor_rank));
  return std::unique_ptr<Workload>(std::make_unique<Gpt>(std::move(d), threads));
}

}  // namespace strata::exec
