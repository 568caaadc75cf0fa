// The MLP on a GPU (device_model.h): the host workload's model (mlp_data.h:
// the same shapes, weights and samples; tensor-parallel shards and pipeline
// boundaries as mlp_workload.cc) computed by ModelKernels in mixed
// precision, as a GPU trains it: GEMMs on the plan's precision with fp32
// accumulation, fp32 outputs, the bias and ReLU applied in fp32 and the
// result rounded to the precision for the next GEMM; gradients with respect
// to activations in fp32, rounded for the GEMMs. Activations live in device
// memory from a micro step's forward to its backward, then go back to a
// free list reused in stream order (every call is on the compute stream).
#include <cstring>
#include <map>
#include <utility>

#include "devmodel/arena.h"
#include "devmodel/device_model.h"
#include "devmodel/layers.h"
#include "devmodel/model_kernels.h"
#include "strata/executor/model_math.h"
#include "workloads/mlp_data.h"

namespace strata::exec {
namespace {

class DeviceMlp : public Model {
 public:
  DeviceMlp(const Plan& p, const ModelOptions& o, std::unique_ptr<ModelKernels> k)
      : k_(std::move(k)),
        mem_(k_.get()),
        layers_(k_.get(), &mem_),
        d_(p, o.seed, o.rank, o.tensor_rank),
        batch_(d_.batch()) {}

  std::vector<float> InitGroup(int g) const override { return d_.InitGroup(g); }
  // The samples are drawn before the step's clock starts (mlp_workload.cc).
  void StartStep(int step) override {
    step_ = step;
    samples_.clear();
    for (int micro = 0; micro < d_.micro_steps(); ++micro)
      d_.Draw(step, micro, &samples_[micro].x, &samples_[micro].labels);
  }

  Status Forward(DeviceStream& s, const ModuleArgs& a) override {
    const int m = a.module;
    STRATA_RETURN_IF_ERROR(Check(a, false));
    STRATA_RETURN_IF_ERROR(k_->Bind(s, nullptr));
    mem_.set_fmt(static_cast<int>(a.precision));
    Acts& acts = acts_[a.micro];
    const DeviceTensor* x = nullptr;
    if (m == 0) {
      STRATA_RETURN_IF_ERROR(LoadInput(a.micro, &acts));
      x = &acts.input;
    } else {
      auto in = acts.out.find(m - 1);
      if (in == acts.out.end()) return Missing("input", m, a.micro);
      STRATA_RETURN_IF_ERROR(mem_.EnsureLow(&in->second));  // a received boundary's first use
      x = &in->second;
    }
    const size_t in = d_.In(m), out = d_.Out(m);
    DeviceTensor& y = acts.out[m];  // a recomputed forward (activation checkpointing) replaces it
    STRATA_RETURN_IF_ERROR(layers_.Linear(a.w[0], *x, batch_, in, out, &y, m + 1 < d_.Layers()));
    if (d_.SplitOf(m) == MlpData::Split::kRow) {
      // Partial sums: the bias waits for the all-reduce (kept: the plan may
      // release the weights after this op), as RowParallelLinear adds it.
      STRATA_ASSIGN_OR_RETURN(auto bias, layers_.KeepCopy(s, a.w[1], out));
      acts.bias[m] = std::move(bias);
      return Status::Ok();
    }
    return k_->BiasAct(y.f32(), y.low_out(), a.w[1], mem_.fmt(), batch_, out, m + 1 < d_.Layers());
  }

  Status Backward(DeviceStream& s, const ModuleArgs& a, float loss_scale, double* loss, bool* overflow) override {
    const int m = a.module;
    STRATA_RETURN_IF_ERROR(Check(a, true));
    STRATA_RETURN_IF_ERROR(k_->Bind(s, overflow));
    mem_.set_fmt(static_cast<int>(a.precision));
    auto it = acts_.find(a.micro);
    if (it == acts_.end() || !it->second.out.count(m)) return Missing("output", m, a.micro);
    Acts& acts = it->second;
    const size_t in = d_.In(m), out = d_.Out(m);
    DeviceTensor& y = acts.out[m];
    DeviceTensor dy;
    if (m + 1 == d_.Layers()) {
      STRATA_RETURN_IF_ERROR(LoadLabels(a.micro, &acts));
      STRATA_RETURN_IF_ERROR(mem_.Make(&dy, batch_ * out, true));
      STRATA_ASSIGN_OR_RETURN(auto losses, mem_.Get(batch_ * sizeof(float)));
      STRATA_RETURN_IF_ERROR(k_->SoftmaxXent(y.f32(), acts.labels.i32(), dy.f32(), dy.low_out(), mem_.fmt(), batch_,
                                             out, loss_scale, reinterpret_cast<float*>(losses.data())));
      STRATA_RETURN_IF_ERROR(layers_.AddMeanLoss(std::move(losses), batch_, loss));
    } else {
      auto g = acts.grad.find(m);
      if (g == acts.grad.end()) return Missing("output gradient", m, a.micro);
      dy = std::move(g->second);
      acts.grad.erase(g);
      STRATA_RETURN_IF_ERROR(mem_.AddLow(&dy));  // ReluBackward writes it
      STRATA_RETURN_IF_ERROR(k_->ReluBackward(y.f32(), dy.f32(), dy.low_out(), mem_.fmt(), batch_ * out));
    }
    const DeviceTensor& x = m == 0 ? acts.input : acts.out[m - 1];
    STRATA_RETURN_IF_ERROR(
        layers_.LinearBackward(a, x, &dy, batch_, in, out, true, m > 0 ? &acts.grad[m - 1] : nullptr));
    mem_.Drop(dy);
    if (m == 0) Release(a.micro);
    return Status::Ok();
  }

  // The boundary after layer l: its output (after the ReLU) or the gradient
  // with respect to it, fp32 (mlp_workload.cc).
  Result<std::vector<float>> TakeBoundary(int micro, int l, bool grad) override {
    auto it = acts_.find(micro);
    if (it == acts_.end() || l < 0 || l + 1 >= d_.Layers())
      return Missing(grad ? "boundary gradient" : "boundary", l, micro);
    auto& from = grad ? it->second.grad : it->second.out;
    auto t = from.find(l);
    if (t == from.end()) return Missing(grad ? "boundary gradient" : "boundary", l, micro);
    std::vector<float> v(batch_ * d_.Out(l));
    STRATA_RETURN_IF_ERROR(k_->Download(v.data(), t->second.f32(), v.size() * sizeof(float)));
    if (grad) Release(micro);  // the gradient's send ends the micro step here
    return v;
  }
  Status PutBoundary(int micro, int l, bool grad, std::vector<float> v) override {
    if (l < 0 || l + 1 >= d_.Layers())
      return Status::Internal("MLP: no stage boundary after layer " + std::to_string(l));
    if (v.size() != batch_ * d_.Out(l))
      return Status::Internal("MLP boundary after layer " + std::to_string(l) + ": " + std::to_string(v.size()) +
                              " values, expected " + std::to_string(batch_ * d_.Out(l)));
    Acts& acts = acts_[micro];
    DeviceTensor& t = (grad ? acts.grad : acts.out)[l];
    STRATA_RETURN_IF_ERROR(mem_.Make(&t, v.size(), false));  // the low copy when first read (EnsureLow)
    return k_->Upload(t.f32(), v.data(), v.size() * sizeof(float));
  }

  Status TensorAllReduce(int micro, int m, Operand what, const TensorReduce& reduce) override {
    auto it = acts_.find(micro);
    const bool row = m >= 0 && m < d_.Layers() && d_.SplitOf(m) == MlpData::Split::kRow;
    const bool column = m > 0 && m < d_.Layers() && d_.SplitOf(m) == MlpData::Split::kColumn;
    if (it == acts_.end() || !((what == Operand::kOutput && row) || (what == Operand::kInputGrad && column)))
      return Status::Internal("MLP: no tensor-parallel " + std::string(OperandName(what)) + " of layer " +
                              std::to_string(m) + " in micro step " + std::to_string(micro));
    Acts& acts = it->second;
    DeviceTensor& t = what == Operand::kInputGrad ? acts.grad[m - 1] : acts.out[m];
    STRATA_RETURN_IF_ERROR(layers_.ReduceOnHost(Status::Ok(), &t, t.size(), ReduceOp::kSum, reduce));
    if (what == Operand::kInputGrad) return Status::Ok();
    // The row-parallel output: the bias (whole on every rank), the ReLU.
    auto b = acts.bias.find(m);
    if (b == acts.bias.end()) return Missing("bias", m, micro);
    // The reduction dropped t's rounded copy; the next layer's EnsureLow remakes it.
    STRATA_RETURN_IF_ERROR(
        k_->BiasAct(t.f32(), nullptr, b->second.data(), mem_.fmt(), batch_, d_.Out(m), m + 1 < d_.Layers()));
    mem_.Put(std::move(b->second));
    acts.bias.erase(b);
    return Status::Ok();
  }

 private:
  struct Acts {
    DeviceTensor input, labels;        // labels: int32
    std::map<int, DeviceTensor> out;   // module -> output (after ReLU)
    std::map<int, DeviceTensor> grad;  // module -> d loss / d output
    std::map<int, Memory> bias;        // row-parallel module -> its bias until the all-reduce
  };
  struct Sample {
    std::vector<float> x;
    std::vector<int32_t> labels;
  };

  Status Check(const ModuleArgs& a, bool backward) const {
    if (a.module < 0 || a.module >= d_.Layers() || a.w.size() != 2 ||
        (backward && (a.grad.size() != 2 || a.grad_fresh.size() != 2)))
      return Status::Internal("MLP: module " + std::to_string(a.module) + " called with " + std::to_string(a.w.size()) +
                              " parameter groups (a Linear layer has its weight and bias)");
    return Status::Ok();
  }
  static Status Missing(const char* what, int m, int micro) {
    return Status::Internal(std::string("MLP on the device: no ") + what + " of layer " + std::to_string(m) +
                            " in micro step " + std::to_string(micro));
  }

  const Sample& Samples(int micro) {
    auto it = samples_.find(micro);
    if (it == samples_.end()) {  // a micro step StartStep did not draw
      d_.Draw(step_, micro, &samples_[micro].x, &samples_[micro].labels);
      it = samples_.find(micro);
    }
    return it->second;
  }
  // The first layer's input (stage 0), its low copy.
  Status LoadInput(int micro, Acts* acts) {
    const Sample& sm = Samples(micro);
    STRATA_RETURN_IF_ERROR(mem_.Make(&acts->input, sm.x.size(), false));  // a recomputed forward's replaced
    STRATA_RETURN_IF_ERROR(k_->Upload(acts->input.f32(), sm.x.data(), sm.x.size() * sizeof(float)));
    return mem_.EnsureLow(&acts->input);
  }
  // The labels, for the loss (the last stage).
  Status LoadLabels(int micro, Acts* acts) {
    if (!acts->labels.empty()) return Status::Ok();
    const Sample& sm = Samples(micro);
    STRATA_RETURN_IF_ERROR(mem_.Make(&acts->labels, sm.labels.size(), false));  // int32, as many bytes
    return k_->Upload(acts->labels.f32_mem.data(), sm.labels.data(), sm.labels.size() * sizeof(int32_t));
  }
  void Release(int micro) {
    auto it = acts_.find(micro);
    if (it == acts_.end()) return;
    Acts& a = it->second;
    mem_.Drop(a.input);
    mem_.Drop(a.labels);
    for (auto& [m, t] : a.out) mem_.Drop(t);
    for (auto& [m, t] : a.grad) mem_.Drop(t);
    for (auto& [m, b] : a.bias) mem_.Put(std::move(b));
    acts_.erase(it);
  }

  std::unique_ptr<ModelKernels> k_;
  DeviceArena mem_;
  DeviceLayers layers_;
  MlpData d_;
  size_t batch_;
  int step_ = 0;
  std::map<int, Sample> samples_;
  std::map<int, Acts> acts_;
};

}  // namespace

Result<std::unique_ptr<Model>> NewDeviceModel(const Plan& p, const ModelOptions& o, std::unique_ptr<ModelKernels> k) {
  if (p.run.model.kind != ModelKind::kMlp) return NewDeviceGpt(p, o, std::move(k));
  return std::unique_ptr<Model>(std::make_unique<DeviceMlp>(p, o, std::move(k)));
}

}  // namespace strata::exec
