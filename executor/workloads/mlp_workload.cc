// The MLP workload: Linear layers with ReLU between them, softmax
// cross-entropy at the end, synthetic inputs. With tensor parallelism each
// rank holds its shard of every layer as BuildMlp (core/model.cc) splits
// them: column-parallel layers (outputs split), row-parallel ones (inputs
// split, the output's partial sums all-reduced by the plan's op, then the
// bias and the ReLU), and whole ones.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>

#include "host/convert.h"
#include "host/linear_low.h"
#include "host/worker_pool.h"
#include "strata/executor/mlp_kernels.h"
#include "workloads/mlp_data.h"
#include "workloads/workload.h"

namespace strata::exec {
namespace {

class Mlp : public Workload {
 public:
  Mlp(const Plan& p, uint64_t seed, int rank, int threads, int tensor_rank)
      : pool_(threads), d_(p, seed, rank, tensor_rank), batch_(d_.batch()), micro_steps_(d_.micro_steps()) {}

  std::vector<float> InitGroup(int g) const override { return d_.InitGroup(g); }
  // The step's samples are drawn here, before its clock starts (as a data
  // loader's prefetch would), so the first module's forward times the model.
  void StartStep(int step) override {
    step_ = step;
    for (int micro = 0; micro < micro_steps_; ++micro) {
      Acts& a = acts_[micro];
      d_.Draw(step_, micro, &a.input, &a.labels);
    }
  }

  void Forward(int micro, int m, const float* w) override { DoForward(micro, m, w, nullptr, Precision::kFp32); }
  bool ForwardLow(int micro, int m, const std::vector<const void*>& w, Precision p) override {
    DoForward(micro, m, nullptr, w[0], p, w[1]);
    return true;
  }

  // The boundary after layer l: its output out[l] (after the ReLU) and
  // grad[l], the gradient with respect to it.
  Result<std::vector<float>> TakeBoundary(int micro, int l, bool grad) override {
    auto it = acts_.find(micro);
    if (it == acts_.end() || l < 0 || l + 1 >= Layers()) return Missing(micro, l, grad);
    std::map<int, std::vector<float>>& from = grad ? it->second.grad : it->second.out;
    auto t = from.find(l);
    if (t == from.end()) return Missing(micro, l, grad);
    if (!grad) return t->second;
    std::vector<float> v = std::move(t->second);
    acts_.erase(it);
    return v;
  }
  Status PutBoundary(int micro, int l, bool grad, std::vector<float> v) override {
    if (l < 0 || l + 1 >= Layers()) return Status::Internal("MLP: no stage boundary after layer " + std::to_string(l));
    if (v.size() != batch_ * Out(l))
      return Status::Internal("MLP boundary after layer " + std::to_string(l) + ": " + std::to_string(v.size()) +
                              " values, expected " + std::to_string(batch_ * Out(l)));
    Acts& a = acts_[micro];
    (grad ? a.grad : a.out)[l] = std::move(v);
    return Status::Ok();
  }

  Status TensorAllReduce(int micro, int m, Operand what, const TensorReduce& reduce) override {
    auto it = acts_.find(micro);
    const bool row = m >= 0 && m < Layers() && SplitOf(m) == Split::kRow;
    const bool column = m > 0 && m < Layers() && SplitOf(m) == Split::kColumn;
    if (it == acts_.end() || !((what == Operand::kOutput && row) || (what == Operand::kInputGrad && column)))
      return Status::Internal("MLP: no tensor-parallel " + std::string(OperandName(what)) + " of layer " +
                              std::to_string(m) + " in micro step " + std::to_string(micro));
    Acts& a = it->second;
    if (what == Operand::kInputGrad) {
      std::vector<float>& dx = a.grad[m - 1];
      reduce(dx.data(), dx.size(), ReduceOp::kSum);
      return Status::Ok();
    }
    // The row-parallel output: the sum, then the bias (whole on every rank)
    // and the ReLU, as Megatron's RowParallelLinear adds its bias after the
    // all-reduce.
    std::vector<float>& y = a.out[m];
    reduce(y.data(), y.size(), ReduceOp::kSum);
    const std::vector<float>& bias = a.bias[m];
    for (size_t i = 0; i < batch_; ++i)
      for (size_t o = 0; o < Out(m); ++o) y[i * Out(m) + o] += bias[o];
    if (m + 1 < Layers()) ReluForward(y.data(), y.size());
    return Status::Ok();
  }

  double Backward(int micro, int m, const float* w, float* dw, float scale) override {
    return DoBackward(micro, m, w, dw, nullptr, nullptr, Precision::kFp32, scale);
  }
  bool BackwardLow(int micro, int m, const std::vector<const void*>& w, const std::vector<void*>& grad,
                   const std::vector<char>& fresh, Precision p, float scale, double* loss, bool* overflow) override {
    // One overwrite flag for both: a fresh part beside one to add into is
    // zeroed first (adding into zeros is what a fresh write gives).
    const bool both_fresh = fresh[0] && fresh[1];
    if (!both_fresh) {
      if (fresh[0]) std::memset(grad[0], 0, In(m) * Out(m) * BytesPerElement(p));
      if (fresh[1]) std::memset(grad[1], 0, Out(m) * BytesPerElement(p));
    }
    *loss += DoBackward(micro, m, nullptr, nullptr, w[0], grad[0], p, scale, overflow, both_fresh, grad[1]);
    return true;
  }

 private:
  // Weights in fp32 (w, gradient dw) or in precision p (wl, gradient gl).
  // Low precision: weight wl and bias bl, gradients gl and gb.
  void DoForward(int micro, int m, const float* w, const void* wl, Precision p, const void* bl = nullptr) {
    Acts& a = acts_[micro];
    if (m == 0 && a.input.empty()) d_.Draw(step_, micro, &a.input, &a.labels);  // a micro step StartStep did not draw
    const std::vector<float>& x = m == 0 ? a.input : a.out[m - 1];
    std::vector<float>& y = a.out[m];
    y.assign(batch_ * Out(m), 0.0f);
    if (wl == nullptr) {  // fp32 weights through the same kernels (the bias follows W)
      wl = w;
      bl = w + In(m) * Out(m);
      p = Precision::kFp32;
    }
    // A row-parallel layer's output is partial sums: its bias and ReLU wait
    // for the all-reduce (TensorAllReduce); the bias is kept in fp32 until
    // then (the plan may release the weights after this op).
    const bool row = SplitOf(m) == Split::kRow;
    if (row) {
      std::vector<float>& bias = a.bias[m];
      bias.resize(Out(m));
      LowToFloat(bl, bias.data(), Out(m), p);
    }
    LinearForwardLow(x.data(), wl, row ? nullptr : bl, y.data(), batch_, In(m), Out(m), p, &pool_);
    if (m + 1 < Layers() && !row) ReluForward(y.data(), y.size());
  }

  double DoBackward(int micro, int m, const float* w, float* dw, const void* wl, void* gl, Precision p, float scale,
                    bool* overflow = nullptr, bool grad_fresh = false, void* gb = nullptr) {
    Acts& a = acts_[micro];
    double loss = 0;
    std::vector<float> dy;
    if (m + 1 == Layers()) {
      dy.resize(batch_ * Out(m));
      loss = SoftmaxCrossEntropy(a.out[m].data(), a.labels.data(), dy.data(), batch_, Out(m), scale);
    } else {
      dy = std::move(a.grad[m]);
      ReluBackward(a.out[m].data(), dy.data(), dy.size());
    }
    const std::vector<float>& x = m == 0 ? a.input : a.out[m - 1];
    std::vector<float>* dx = nullptr;
    if (m > 0) {
      dx = &a.grad[m - 1];
      dx->assign(batch_ * In(m), 0.0f);
    }
    if (wl == nullptr) {  // fp32 weights and gradient (the bias's follows W's)
      wl = w;
      gl = dw;
      gb = dw != nullptr ? dw + In(m) * Out(m) : nullptr;
      p = Precision::kFp32;
    }
    if (LinearBackwardLow(x.data(), wl, dy.data(), dx ? dx->data() : nullptr, gl, gb, batch_, In(m), Out(m), p,
                          grad_fresh, &pool_) &&
        overflow != nullptr)
      *overflow = true;
    if (m == 0) acts_.erase(micro);
    return loss;
  }

  static Status Missing(int micro, int l, bool grad) {
    return Status::Internal("MLP: no " + std::string(grad ? "gradient of the " : "") + "output of layer " +
                            std::to_string(l) + " in micro step " + std::to_string(micro) + " to send");
  }

  struct Acts {
    std::vector<float> input;
    std::vector<int32_t> labels;
    std::map<int, std::vector<float>> out;   // module -> output (after ReLU)
    std::map<int, std::vector<float>> grad;  // module -> d loss / d output
    std::map<int, std::vector<float>> bias;  // row-parallel module -> its bias until the all-reduce
  };
  using Split = MlpData::Split;
  Split SplitOf(int m) const { return d_.SplitOf(m); }
  size_t In(int m) const { return d_.In(m); }
  size_t Out(int m) const { return d_.Out(m); }
  int Layers() const { return d_.Layers(); }

  WorkerPool pool_;  // the compute stream's: one kernel at a time
  MlpData d_;
  size_t batch_;
  int micro_steps_;
  int step_ = 0;
  std::map<int, Acts> acts_;
};

}  // namespace

std::unique_ptr<Workload> MakeMlpWorkload(const Plan& p, uint64_t seed, int rank, int threads, int tensor_rank) {
  return std::make_unique<Mlp>(p, seed, rank, threads, tensor_rank);
}

}  // namespace strata::exec
