// The GPT on a GPU (device_model.h): the host workload's model (gpt_data.h:
// the same shapes, weights, tokens; tensor-parallel shards, pipeline
// boundaries and activation checkpointing as gpt_workload.cc) computed by
// ModelKernels in mixed precision: GEMMs on the plan's precision with fp32
// accumulation and fp32 outputs; LayerNorm, attention, GeLU, residuals and
// the loss in fp32 (transformer_math.h); a GEMM's activation operand
// rounded to the precision. Activations live in device memory from a micro
// step's forward to its backward (DeviceArena).
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "devmodel/arena.h"
#include "devmodel/device_model.h"
#include "devmodel/layers.h"
#include "workloads/gpt_data.h"

namespace strata::exec {
namespace {

using Kind = GptKind;

class DeviceGpt : public Model {
 public:
  DeviceGpt(GptData d, std::unique_ptr<ModelKernels> k)
      : d_(std::move(d)), k_(std::move(k)), mem_(k_.get()), layers_(k_.get(), &mem_) {}

  std::vector<float> InitGroup(int g) const override { return d_.InitGroup(g); }
  void StartStep(int step) override { step_ = step; }

  Status Forward(DeviceStream& s, const ModuleArgs& a) override {
    STRATA_RETURN_IF_ERROR(Begin(s, a, nullptr));
    Acts& x = A(a.micro);
    const size_t l = Layer(a.module), T = d_.T, h = d_.h;
    switch (Of(a.module)) {
      case Kind::kEmbed: {
        STRATA_RETURN_IF_ERROR(LoadTokens(a.micro, &x));
        STRATA_RETURN_IF_ERROR(mem_.Make(&x.x[0], T * h, false));
        if (d_.tp == 1) return k_->Embedding(x.tokens.i32(), a.w[0], a.w[1], Fmt(), 0, d_.V, x.x[0].f32(), T, d_.S, h);
        // This rank's vocabulary rows (others 0); the positions after the
        // all-reduce (Megatron's VocabParallelEmbedding).
        STRATA_ASSIGN_OR_RETURN(auto wpe, layers_.KeepCopy(s, a.w[1], d_.S * h));
        x.wpe = std::move(wpe);
        return k_->Embedding(x.tokens.i32(), a.w[0], nullptr, Fmt(), d_.tr * d_.Vl, d_.Vl, x.x[0].f32(), T, d_.S, h);
      }
      case Kind::kLn1:
        return Norm(x.x[l], a, &x.blocks[l].ln1);
      case Kind::kQkv: {
        Block& b = x.blocks[l];
        STRATA_RETURN_IF_ERROR(layers_.Linear(a.w[0], b.ln1.out, d_.T, h, 3 * d_.ha, &b.qkv, false));
        return k_->BiasAct(b.qkv.f32(), nullptr, a.w[1], Fmt(), T, 3 * d_.ha, false);
      }
      case Kind::kAttn: {
        Block& b = x.blocks[l];
        STRATA_RETURN_IF_ERROR(mem_.Make(&b.att, T * d_.ha, true));
        STRATA_RETURN_IF_ERROR(mem_.Make(&b.probs, d_.B * d_.al * d_.S * d_.S, false));
        return k_->Attention(b.qkv.f32(), b.att.f32(), b.att.low_out(), Fmt(), b.probs.f32(), d_.B, d_.S, d_.ha, d_.al);
      }
      case Kind::kAttnOut:
        return RowParallelOut(s, a, x.blocks[l], x.blocks[l].att, d_.ha, x.x[l], &x.blocks[l].mid);
      case Kind::kLn2:
        return Norm(x.blocks[l].mid, a, &x.blocks[l].ln2);
      case Kind::kFc1: {
        Block& b = x.blocks[l];
        STRATA_RETURN_IF_ERROR(layers_.Linear(a.w[0], b.ln2.out, d_.T, h, d_.fl, &b.pre, false));
        STRATA_RETURN_IF_ERROR(k_->BiasAct(b.pre.f32(), nullptr, a.w[1], Fmt(), T, d_.fl, false));
        STRATA_RETURN_IF_ERROR(mem_.Make(&b.act, T * d_.fl, true));
        return k_->Gelu(b.pre.f32(), b.act.f32(), b.act.low_out(), Fmt(), T * d_.fl);
      }
      case Kind::kFc2: {
        Block& b = x.blocks[l];
        STRATA_RETURN_IF_ERROR(RowParallelOut(s, a, b, b.act, d_.fl, b.mid, &x.x[l + 1]));
        if (d_.tp == 1) EndLayerForward(b);
        return Status::Ok();
      }
      case Kind::kLnF:
        return Norm(x.x[d_.L], a, &x.lnf);
      case Kind::kHead:
        STRATA_RETURN_IF_ERROR(LoadTargets(a.micro, &x));  // a later pipeline stage's first need of them
        return layers_.Linear(a.w[0], x.lnf.out, d_.T, h, d_.Vl, &x.logits, false);
    }
    return Status::Internal("GPT: module " + std::to_string(a.module));
  }

  Status Backward(DeviceStream& s, const ModuleArgs& a, float scale, double* loss, bool* overflow) override {
    STRATA_RETURN_IF_ERROR(Begin(s, a, overflow));
    Acts& x = A(a.micro);
    const size_t l = Layer(a.module), T = d_.T, h = d_.h;
    switch (Of(a.module)) {
      case Kind::kHead: {
        DeviceTensor dlogits;
        STRATA_RETURN_IF_ERROR(mem_.Make(&dlogits, T * d_.Vl, true));
        STRATA_RETURN_IF_ERROR(Loss(x, scale, &dlogits, loss));
        STRATA_RETURN_IF_ERROR(layers_.LinearBackward(a, x.lnf.out, &dlogits, d_.T, h, d_.Vl, false, &x.d_lnf));
        mem_.Drop(dlogits);
        mem_.Drop(x.logits);
        return Status::Ok();
      }
      case Kind::kLnF:
        STRATA_RETURN_IF_ERROR(mem_.Make(&x.dx[d_.L], T * h, false, true));
        STRATA_RETURN_IF_ERROR(NormBackward(a, x.x[d_.L], x.lnf, x.d_lnf, &x.dx[d_.L]));
        DropNorm(x.lnf);
        mem_.Drop(x.d_lnf);
        return Status::Ok();
      case Kind::kFc2: {
        Block& b = x.blocks[l];
        if (x.dx[l + 1].empty()) return Missing("gradient entering", a.module, a.micro);
        STRATA_RETURN_IF_ERROR(layers_.LinearBackward(a, b.act, &x.dx[l + 1], d_.T, d_.fl, h, true, &b.d_act));
        x.d_mid[l] = std::move(x.dx[l + 1]);  // the residual's gradient
        return Status::Ok();
      }
      case Kind::kFc1: {
        Block& b = x.blocks[l];
        DeviceTensor d_pre;
        STRATA_RETURN_IF_ERROR(mem_.Make(&d_pre, T * d_.fl, false, true));
        STRATA_RETURN_IF_ERROR(k_->GeluBackward(b.pre.f32(), b.d_act.f32(), d_pre.f32(), T * d_.fl));
        STRATA_RETURN_IF_ERROR(layers_.LinearBackward(a, b.ln2.out, &d_pre, d_.T, h, d_.fl, true, &b.d_ln2));
        mem_.Drop(d_pre);
        return Status::Ok();
      }
      case Kind::kLn2: {
        Block& b = x.blocks[l];
        return NormBackward(a, b.mid, b.ln2, b.d_ln2, &x.d_mid[l]);
      }
      case Kind::kAttnOut: {
        Block& b = x.blocks[l];
        mem_.Stale(&x.d_mid[l]);  // LayerNorm's backward added into it
        STRATA_RETURN_IF_ERROR(layers_.LinearBackward(a, b.att, &x.d_mid[l], d_.T, d_.ha, h, true, &b.d_att));
        x.dx[l] = std::move(x.d_mid[l]);  // the residual's gradient
        return Status::Ok();
      }
      case Kind::kAttn: {
        Block& b = x.blocks[l];
        STRATA_RETURN_IF_ERROR(mem_.Make(&b.d_qkv, T * 3 * d_.ha, false, true));
        STRATA_ASSIGN_OR_RETURN(auto ds, mem_.Get(b.probs.size() * sizeof(float)));
        STRATA_RETURN_IF_ERROR(k_->AttentionBackward(b.qkv.f32(), b.probs.f32(), b.d_att.f32(),
                                                     reinterpret_cast<float*>(ds.data()), b.d_qkv.f32(), d_.B, d_.S,
                                                     d_.ha, d_.al));
        mem_.Put(std::move(ds));
        return Status::Ok();
      }
      case Kind::kQkv: {
        Block& b = x.blocks[l];
        return layers_.LinearBackward(a, b.ln1.out, &b.d_qkv, d_.T, h, 3 * d_.ha, true, &b.d_ln1);
      }
      case Kind::kLn1: {
        Block& b = x.blocks[l];
        if (x.dx[l].empty()) return Missing("residual gradient", a.module, a.micro);
        STRATA_RETURN_IF_ERROR(NormBackward(a, x.x[l], b.ln1, b.d_ln1, &x.dx[l]));
        mem_.Stale(&x.dx[l]);  // added into: the previous layer's fc2 rounds it afresh
        DropBlock(b);
        return Status::Ok();
      }
      case Kind::kEmbed: {
        const size_t first = d_.tp > 1 ? d_.tr * d_.Vl : 0;
        DeviceTensor dwte, dwpe;
        STRATA_RETURN_IF_ERROR(mem_.Make(&dwte, d_.Vl * h, false, true));
        STRATA_RETURN_IF_ERROR(mem_.Make(&dwpe, d_.S * h, false, true));
        STRATA_RETURN_IF_ERROR(
            k_->EmbeddingBackward(x.tokens.i32(), x.dx[0].f32(), dwte.f32(), dwpe.f32(), first, d_.Vl, T, d_.S, h));
        STRATA_RETURN_IF_ERROR(k_->AddGrad(a.grad[0], dwte.f32(), d_.Vl * h, Fmt(), a.grad_fresh[0] != 0));
        STRATA_RETURN_IF_ERROR(k_->AddGrad(a.grad[1], dwpe.f32(), d_.S * h, Fmt(), a.grad_fresh[1] != 0));
        mem_.Drop(dwte);
        mem_.Drop(dwpe);
        Release(a.micro);
        return Status::Ok();
      }
    }
    return Status::Internal("GPT: module " + std::to_string(a.module));
  }

  // The boundary after layer l: the residual stream x[l + 1] leaving it, and
  // its gradient dx[l + 1] (gpt_workload.cc).
  Result<std::vector<float>> TakeBoundary(int micro, int l, bool grad) override {
    auto it = acts_.find(micro);
    const size_t at = static_cast<size_t>(l) + 1;
    if (it == acts_.end() || l < 0 || at >= d_.L || (grad ? it->second.dx : it->second.x)[at].empty())
      return Status::Internal("GPT on the device: no " + std::string(grad ? "gradient of the " : "") +
                              "output of layer " + std::to_string(l) + " in micro step " + std::to_string(micro));
    std::vector<float> v(d_.T * d_.h);
    STRATA_RETURN_IF_ERROR(
        k_->Download(v.data(), (grad ? it->second.dx : it->second.x)[at].f32(), v.size() * sizeof(float)));
    if (grad) Release(micro);  // the gradient's send ends the micro step here
    return v;
  }
  Status PutBoundary(int micro, int l, bool grad, std::vector<float> v) override {
    const size_t at = static_cast<size_t>(l) + 1;
    if (l < 0 || at >= d_.L || v.size() != d_.T * d_.h)
      return Status::Internal("GPT boundary after layer " + std::to_string(l) + ": " + std::to_string(v.size()) +
                              " values, expected " + std::to_string(d_.T * d_.h));
    DeviceTensor& t = (grad ? A(micro).dx : A(micro).x)[at];
    STRATA_RETURN_IF_ERROR(mem_.Make(&t, v.size(), false));  // rounded when first read (EnsureLow)
    return k_->Upload(t.f32(), v.data(), v.size() * sizeof(float));
  }

  Status TensorAllReduce(int micro, int m, Operand what, const TensorReduce& reduce) override {
    auto it = acts_.find(micro);
    if (it == acts_.end() || m < 0 || static_cast<size_t>(m) >= d_.kinds.size())
      return Status::Internal("GPT: no micro step " + std::to_string(micro) + " for module " + std::to_string(m));
    Acts& x = it->second;
    const size_t l = Layer(m);
    auto sum = [&](DeviceTensor& t) {
      return layers_.ReduceOnHost(Status::Ok(), &t, t.size(), ReduceOp::kSum, reduce);
    };
    if (what == Operand::kInputGrad) {
      switch (Of(m)) {
        case Kind::kQkv:
          return sum(x.blocks[l].d_ln1);
        case Kind::kFc1:
          return sum(x.blocks[l].d_ln2);
        case Kind::kHead:
          return sum(x.d_lnf);
        default:
          break;
      }
    } else if (what == Operand::kOutput) {
      switch (Of(m)) {
        case Kind::kEmbed:
          STRATA_RETURN_IF_ERROR(sum(x.x[0]));
          STRATA_RETURN_IF_ERROR(k_->AddPositions(x.x[0].f32(), x.wpe.data(), Fmt(), d_.T, d_.S, d_.h));
          mem_.Put(std::move(x.wpe));
          return Status::Ok();
        case Kind::kAttnOut:
          return FinishRowParallel(x.blocks[l], x.x[l], &x.blocks[l].mid, reduce);
        case Kind::kFc2:
          STRATA_RETURN_IF_ERROR(FinishRowParallel(x.blocks[l], x.blocks[l].mid, &x.x[l + 1], reduce));
          EndLayerForward(x.blocks[l]);
          return Status::Ok();
        case Kind::kHead:
          return LossStatistics(x, reduce);
        default:
          break;
      }
    }
    return Status::Internal("GPT: no tensor-parallel " + std::string(OperandName(what)) + " of module " +
                            std::to_string(m));
  }

 private:
  struct Norm_ {
    DeviceTensor out, mean, rstd;  // out with its rounded copy (a GEMM's input)
  };
  struct Block {
    Norm_ ln1, ln2;
    DeviceTensor qkv, att, probs, mid, pre, act;
    DeviceTensor d_act, d_ln2, d_att, d_qkv, d_ln1;
    DeviceTensor partial;  // tensor parallelism: a row-parallel layer's partial sums, until the all-reduce
    Memory bias;           // and its bias (the plan's precision)
    bool dropped = false;  // activation checkpointing (gpt_workload.cc, EndLayerForward)
  };
  struct Acts {
    DeviceTensor tokens, targets;  // int32
    std::vector<DeviceTensor> x, dx, d_mid;
    std::vector<Block> blocks;
    Norm_ lnf;
    DeviceTensor logits, d_lnf, ce_max, ce_stats;
    Memory wpe;  // tensor parallelism: the position table until the embedding's all-reduce
  };

  int Fmt() const { return mem_.fmt(); }
  Kind Of(int m) const { return d_.kinds[static_cast<size_t>(m)]; }
  size_t Layer(int m) const { return static_cast<size_t>(std::max(d_.layers[static_cast<size_t>(m)], 0)); }
  static Status Missing(const char* what, int m, int micro) {
    return Status::Internal(std::string("GPT on the device: no ") + what + " of module " + std::to_string(m) +
                            " in micro step " + std::to_string(micro));
  }
  Status Begin(DeviceStream& s, const ModuleArgs& a, bool* overflow) {
    if (a.module < 0 || static_cast<size_t>(a.module) >= d_.kinds.size())
      return Status::Internal("GPT: no module " + std::to_string(a.module));
    const size_t groups = Of(a.module) == Kind::kAttn ? 0 : Of(a.module) == Kind::kHead ? 1 : 2;
    if (a.w.size() != groups || (overflow != nullptr && a.grad.size() != groups))
      return Status::Internal("GPT: module " + std::to_string(a.module) + " called with " + std::to_string(a.w.size()) +
                              " parameter groups, expected " + std::to_string(groups));
    mem_.set_fmt(static_cast<int>(a.precision));
    return k_->Bind(s, overflow);
  }
  Acts& A(int micro) {
    Acts& x = acts_[micro];
    if (x.x.empty()) {
      x.x.resize(d_.L + 1);
      x.dx.resize(d_.L + 1);
      x.d_mid.resize(d_.L);
      x.blocks.resize(d_.L);
    }
    return x;
  }
  Status Upload(const std::vector<int32_t>& v, DeviceTensor* t) {
    STRATA_RETURN_IF_ERROR(mem_.Make(t, v.size(), false));
    return k_->Upload(t->f32_mem.data(), v.data(), v.size() * sizeof(int32_t));
  }
  Status LoadTokens(int micro, Acts* x) {
    std::vector<int32_t> tokens, targets;
    d_.Draw(step_, micro, &tokens, &targets);
    STRATA_RETURN_IF_ERROR(Upload(tokens, &x->tokens));
    return Upload(targets, &x->targets);
  }
  Status LoadTargets(int micro, Acts* x) { return x->targets.empty() ? LoadTokens(micro, x) : Status::Ok(); }
  Status Norm(const DeviceTensor& x, const ModuleArgs& a, Norm_* n) {
    STRATA_RETURN_IF_ERROR(mem_.Make(&n->out, d_.T * d_.h, true));
    STRATA_RETURN_IF_ERROR(mem_.Make(&n->mean, d_.T, false));
    STRATA_RETURN_IF_ERROR(mem_.Make(&n->rstd, d_.T, false));
    return k_->LayerNorm(x.f32(), a.w[0], a.w[1], Fmt(), n->out.f32(), n->out.low_out(), n->mean.f32(), n->rstd.f32(),
                         d_.T, d_.h);
  }
  // dx += the LayerNorm's input gradient; gamma's and beta's into the plan's.
  Status NormBackward(const ModuleArgs& a, const DeviceTensor& x, const Norm_& n, const DeviceTensor& dy,
                      DeviceTensor* dx) {
    if (dx->empty()) return Missing("residual gradient", a.module, a.micro);
    return k_->LayerNormBackward(x.f32(), a.w[0], Fmt(), n.mean.f32(), n.rstd.f32(), dy.f32(), dx->f32(), d_.T, d_.h,
                                 a.grad[0], a.grad[1], a.grad_fresh[0] != 0, a.grad_fresh[1] != 0);
  }
  // attn_out and fc2: *out = base + (x W^T + bias); with tensor parallelism
  // the partial sums and the bias wait for the all-reduce.
  Status RowParallelOut(DeviceStream& s, const ModuleArgs& a, Block& b, const DeviceTensor& in_t, size_t in,
                        const DeviceTensor& base, DeviceTensor* out) {
    const size_t h = d_.h;
    if (d_.tp > 1) {
      STRATA_RETURN_IF_ERROR(layers_.Linear(a.w[0], in_t, d_.T, in, h, &b.partial, false));
      STRATA_ASSIGN_OR_RETURN(auto bias, layers_.KeepCopy(s, a.w[1], h));
      b.bias = std::move(bias);
      return Status::Ok();
    }
    DeviceTensor y;
    STRATA_RETURN_IF_ERROR(layers_.Linear(a.w[0], in_t, d_.T, in, h, &y, false));
    STRATA_RETURN_IF_ERROR(mem_.Make(out, d_.T * h, false));
    STRATA_RETURN_IF_ERROR(k_->Residual(base.f32(), y.f32(), a.w[1], Fmt(), d_.T, h, out->f32()));
    mem_.Drop(y);
    return Status::Ok();
  }
  Status FinishRowParallel(Block& b, const DeviceTensor& base, DeviceTensor* out, const TensorReduce& reduce) {
    if (b.partial.empty()) return Status::Internal("GPT on the device: no partial output to all-reduce");
    STRATA_RETURN_IF_ERROR(layers_.ReduceOnHost(Status::Ok(), &b.partial, b.partial.size(), ReduceOp::kSum, reduce));
    STRATA_RETURN_IF_ERROR(mem_.Make(out, d_.T * d_.h, false));
    STRATA_RETURN_IF_ERROR(k_->Residual(base.f32(), b.partial.f32(), b.bias.data(), Fmt(), d_.T, d_.h, out->f32()));
    mem_.Drop(b.partial);
    mem_.Put(std::move(b.bias));
    return Status::Ok();
  }
  // Megatron's _VocabParallelCrossEntropy.forward: the row maxima (max
  // all-reduce), then [target logit | sum of exponentials] (sum all-reduce).
  Status LossStatistics(Acts& x, const TensorReduce& reduce) {
    // Both reductions take place whatever fails before them (collectives).
    Status st = mem_.Make(&x.ce_max, d_.T, false);
    if (st.ok()) st = k_->VocabMax(x.logits.f32(), d_.Vl, d_.T, x.ce_max.f32());
    st = layers_.ReduceOnHost(st, &x.ce_max, d_.T, ReduceOp::kMax, reduce);
    if (st.ok()) st = mem_.Make(&x.ce_stats, 2 * d_.T, false);
    if (st.ok())
      st =
          k_->VocabStats(x.logits.f32(), x.targets.i32(), x.ce_max.f32(), d_.tr * d_.Vl, d_.Vl, d_.T, x.ce_stats.f32());
    return layers_.ReduceOnHost(st, &x.ce_stats, 2 * d_.T, ReduceOp::kSum, reduce);
  }
  // The mean loss over the tokens (added to *loss) and the logits' gradient.
  Status Loss(Acts& x, float scale, DeviceTensor* dlogits, double* loss) {
    STRATA_ASSIGN_OR_RETURN(auto losses, mem_.Get(d_.T * sizeof(float)));
    float* row = reinterpret_cast<float*>(losses.data());
    if (d_.tp == 1) {
      STRATA_RETURN_IF_ERROR(k_->SoftmaxXent(x.logits.f32(), x.targets.i32(), dlogits->f32(), dlogits->low_out(), Fmt(),
                                             d_.T, d_.V, scale, row));
    } else {
      if (x.ce_stats.empty()) return Status::Internal("GPT on the device: the loss's statistics were not reduced");
      STRATA_RETURN_IF_ERROR(k_->VocabGrad(x.logits.f32(), x.targets.i32(), x.ce_max.f32(), x.ce_stats.f32(),
                                           d_.tr * d_.Vl, d_.Vl, d_.T, scale, dlogits->f32(), dlogits->low_out(), Fmt(),
                                           row));
    }
    return layers_.AddMeanLoss(std::move(losses), d_.T, loss);
  }

  void DropNorm(Norm_& n) {
    mem_.Drop(n.out);
    mem_.Drop(n.mean);
    mem_.Drop(n.rstd);
  }
  void DropBlock(Block& b) {
    DropNorm(b.ln1);
    DropNorm(b.ln2);
    for (DeviceTensor* t : {&b.qkv, &b.att, &b.probs, &b.mid, &b.pre, &b.act, &b.d_act, &b.d_ln2, &b.d_att, &b.d_qkv,
                            &b.d_ln1, &b.partial})
      mem_.Drop(*t);
    mem_.Put(std::move(b.bias));
  }
  // With activation checkpointing a layer's working activations go after
  // its first forward (x[l] stays); the recompute's forward keeps them for
  // the backward that follows.
  void EndLayerForward(Block& b) {
    if (d_.checkpointing && !b.dropped) {
      DropBlock(b);
      b.dropped = true;
    } else {
      b.dropped = false;
    }
  }
  void Release(int micro) {
    auto it = acts_.find(micro);
    if (it == acts_.end()) return;
    Acts& x = it->second;
    for (DeviceTensor* t : {&x.tokens, &x.targets, &x.logits, &x.d_lnf, &x.ce_max, &x.ce_stats}) mem_.Drop(*t);
    for (auto* v : {&x.x, &x.dx, &x.d_mid})
      for (DeviceTensor& t : *v) mem_.Drop(t);
    for (Block& b : x.blocks) DropBlock(b);
    DropNorm(x.lnf);
    mem_.Put(std::move(x.wpe));
    acts_.erase(it);
  }

  GptData d_;
  std::unique_ptr<ModelKernels> k_;
  DeviceArena mem_;
  DeviceLayers layers_;
  int step_ = 0;
  std::map<int, Acts> acts_;
};

}  // namespace

Result<std::unique_ptr<Model>> NewDeviceGpt(const Plan& p, const ModelOptions& o, std::unique_ptr<ModelKernels> k) {
  STRATA_ASSIGN_OR_RETURN(auto d, GptData::Make(p, o.seed, o.rank, o.text_path, o.tensor_rank));
  return std::unique_ptr<Model>(std::make_unique<DeviceGpt>(std::move(d), std::move(k)));
}

}  // namespace strata::exec
