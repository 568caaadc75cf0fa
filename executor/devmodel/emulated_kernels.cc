// The device model's kernels emulated on the host (model_kernels.h): each
// kernel is model_math.h's per-thread function in a loop over its threads,
// in thread order (the threads are independent: every output has one
// writer), on the host backend's memory. Slow and exact: CI runs the whole
// device model through it, the CUDA kernels run the same functions.
#include <cstring>

#include "devmodel/device_model.h"
#include "devmodel/model_kernels.h"
#include "strata/executor/model_math.h"

namespace strata::exec {
namespace {

class EmulatedKernels : public ModelKernels {
 public:
  explicit EmulatedKernels(Backend* backend) : backend_(backend) {}

  Status Bind(DeviceStream&, bool* overflow) override {
    overflow_ = overflow;
    return Status::Ok();
  }
  Result<Memory> Alloc(size_t bytes) override {
    if (!backend_->HostAccessible(Tier::kGpu))
      return Status::Internal("emulated device kernels need a backend whose GPU memory the host can address");
    return backend_->Allocate(Tier::kGpu, bytes, false);
  }
  Status Upload(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::Ok();
  }
  Status Download(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::Ok();
  }

  Status Gemm(bool ta, bool tb, size_t m, size_t n, size_t k, const void* a, size_t lda, const void* b, size_t ldb,
              float* c, size_t ldc, int fmt, bool accumulate) override {
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < m; ++i) dm::GemmElement(ta, tb, k, a, lda, b, ldb, c, ldc, fmt, accumulate, i, j);
    return Status::Ok();
  }
  Status BiasAct(float* y, void* low, const void* bias, int fmt, size_t rows, size_t cols, bool relu) override {
    for (size_t i = 0; i < rows * cols; ++i) dm::BiasActElement(y, low, bias, fmt, cols, relu, i);
    return Status::Ok();
  }
  Status ReluBackward(const float* y, float* dy, void* low, int fmt, size_t n) override {
    for (size_t i = 0; i < n; ++i) dm::ReluBackwardElement(y, dy, low, fmt, i);
    return Status::Ok();
  }
  Status SoftmaxXent(const float* logits, const int32_t* labels, float* dlogits, void* low, int fmt, size_t batch,
                     size_t classes, float scale, float* losses) override {
    for (size_t r = 0; r < batch; ++r)
      losses[r] = dm::SoftmaxXentRow(logits, labels, dlogits, low, fmt, batch, classes, scale, r);
    return Status::Ok();
  }
  Status AddGrad(void* grad, const float* src, size_t n, int fmt, bool fresh) override {
    for (size_t i = 0; i < n; ++i) Flag(dm::AddToGrad(grad, i, src[i], fmt, fresh));
    return Status::Ok();
  }
  Status ColumnSumsToGrad(void* grad, const float* m, size_t rows, size_t cols, int fmt, bool fresh) override {
    for (size_t c = 0; c < cols; ++c) Flag(dm::AddToGrad(grad, c, dm::ColumnSum(m, rows, cols, c), fmt, fresh));
    return Status::Ok();
  }
  Status Round(void* dst, const float* src, size_t n, int fmt) override {
    for (size_t i = 0; i < n; ++i) dm::StoreAs(dst, i, src[i], fmt);
    return Status::Ok();
  }

 private:
  void Flag(float stored) {
    if (!dm::Finite(stored) && overflow_ != nullptr) *overflow_ = true;
  }

  Backend* backend_;
  bool* overflow_ = nullptr;
};

// The host backend with the device model as its model.
class EmulatedDeviceBackend : public Backend {
 public:
  explicit EmulatedDeviceBackend(Backend* base) : base_(base) {}
  std::string name() const override { return "emulated"; }
  bool HostAccessible(Tier t) const override { return base_->HostAccessible(t); }
  Result<Memory> Allocate(Tier t, size_t bytes, bool zeroed) override { return base_->Allocate(t, bytes, zeroed); }
  Result<std::unique_ptr<DeviceStream>> NewStream(Stream kind) override { return base_->NewStream(kind); }
  Result<std::unique_ptr<Model>> NewModel(const Scenario& s, const Plan& p, const ModelOptions& o) override {
    return NewDeviceModel(s, p, o, NewEmulatedKernels(base_));
  }

 private:
  Backend* base_;
};

}  // namespace

std::unique_ptr<Backend> NewEmulatedDeviceBackend(Backend* base) { return std::make_unique<EmulatedDeviceBackend>(base); }

std::unique_ptr<ModelKernels> NewEmulatedKernels(Backend* backend) { return std::make_unique<EmulatedKernels>(backend); }

}  // namespace strata::exec
