// The device model's kernels emulated on the host (model_kernels.h): each
// kernel is model_math.h's per-thread function in a loop over its threads,
// in thread order (the threads are independent: every output has one
// writer), on the host backend's memory. Slow and exact: CI runs the whole
// device model through it, the CUDA kernels run the same functions.
#include <cstring>
#include <vector>

#include "devmodel/device_model.h"
#include "devmodel/model_kernels.h"
#include "strata/executor/model_math.h"
#include "strata/executor/transformer_math.h"

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

  // GemmElement for every (i, j), computed as DotInOrder over op(A)'s rows
  // and op(B)'s columns widened once: the same bits, without a format
  // switch and a strided load per product (14x slower under ASan).
  Status Gemm(bool ta, bool tb, size_t m, size_t n, size_t k, const void* a, size_t lda, const void* b, size_t ldb,
              float* c, size_t ldc, int fmt, bool accumulate) override {
    std::vector<float> rows(m * k), cols(n * k);
    for (size_t i = 0; i < m; ++i)
      for (size_t p = 0; p < k; ++p) rows[i * k + p] = dm::LoadAs(a, ta ? i * lda + p : p * lda + i, fmt);
    for (size_t j = 0; j < n; ++j)
      for (size_t p = 0; p < k; ++p) cols[j * k + p] = dm::LoadAs(b, tb ? p * ldb + j : j * ldb + p, fmt);
    for (size_t j = 0; j < n; ++j)
      for (size_t i = 0; i < m; ++i) {
        const float s = dm::DotInOrder(&rows[i * k], &cols[j * k], k);
        float& out = c[j * ldc + i];
        out = accumulate ? out + s : s;
      }
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
  Status Zero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status::Ok();
  }

  Status Embedding(const int32_t* tokens, const void* wte, const void* wpe, int fmt, size_t first, size_t vl, float* x,
                   size_t T, size_t seq, size_t h) override {
    for (size_t i = 0; i < T * h; ++i) dm::EmbeddingElement(tokens, wte, wpe, fmt, first, vl, x, seq, h, i);
    return Status::Ok();
  }
  Status AddPositions(float* x, const void* wpe, int fmt, size_t T, size_t seq, size_t h) override {
    for (size_t i = 0; i < T * h; ++i) dm::AddPositionElement(x, wpe, fmt, seq, h, i);
    return Status::Ok();
  }
  Status EmbeddingBackward(const int32_t* tokens, const float* dx, float* dwte, float* dwpe, size_t first, size_t vl,
                           size_t T, size_t seq, size_t h) override {
    for (size_t i = 0; i < h; ++i) dm::EmbeddingBackwardChannel(tokens, dx, dwte, dwpe, first, vl, T, seq, h, i);
    return Status::Ok();
  }
  Status LayerNorm(const float* x, const void* gamma, const void* beta, int fmt, float* y, void* low, float* mean,
                   float* rstd, size_t rows, size_t h) override {
    for (size_t r = 0; r < rows; ++r) dm::LayerNormRow(x, gamma, beta, fmt, y, low, mean, rstd, h, 1e-5f, r);
    return Status::Ok();
  }
  Status LayerNormBackward(const float* x, const void* gamma, int fmt, const float* mean, const float* rstd,
                           const float* dy, float* dx, size_t rows, size_t h, void* dgamma, void* dbeta,
                           bool fresh_gamma, bool fresh_beta) override {
    for (size_t r = 0; r < rows; ++r) dm::LayerNormBackwardRow(x, gamma, fmt, mean, rstd, dy, dx, h, r);
    for (size_t i = 0; i < h; ++i) {
      float dg, db;
      dm::LayerNormParamColumn(x, mean, rstd, dy, rows, h, i, &dg, &db);
      Flag(dm::AddToGrad(dgamma, i, dg, fmt, fresh_gamma));
      Flag(dm::AddToGrad(dbeta, i, db, fmt, fresh_beta));
    }
    return Status::Ok();
  }
  Status Gelu(const float* x, float* y, void* low, int fmt, size_t n) override {
    for (size_t i = 0; i < n; ++i) dm::GeluElement(x, y, low, fmt, i);
    return Status::Ok();
  }
  Status GeluBackward(const float* x, const float* dy, float* dx, size_t n) override {
    for (size_t i = 0; i < n; ++i) dm::GeluBackwardElement(x, dy, dx, i);
    return Status::Ok();
  }
  Status Residual(const float* base, const float* y, const void* bias, int fmt, size_t rows, size_t h,
                  float* out) override {
    for (size_t i = 0; i < rows * h; ++i) dm::ResidualElement(base, y, bias, fmt, h, out, i);
    return Status::Ok();
  }
  Status Attention(const float* qkv, float* out, void* low, int fmt, float* probs, size_t B, size_t s, size_t h,
                   size_t heads) override {
    for (size_t q = 0; q < B * heads * s; ++q) dm::AttentionQuery(qkv, out, low, fmt, probs, s, h, heads, q);
    return Status::Ok();
  }
  Status AttentionBackward(const float* qkv, const float* probs, const float* dout, float* ds, float* dqkv, size_t B,
                           size_t s, size_t h, size_t heads) override {
    for (size_t q = 0; q < B * heads * s; ++q) dm::AttentionBackwardQuery(qkv, probs, dout, ds, dqkv, s, h, heads, q);
    for (size_t k = 0; k < B * heads * s; ++k) dm::AttentionBackwardKey(qkv, probs, dout, ds, dqkv, s, h, heads, k);
    return Status::Ok();
  }
  Status VocabMax(const float* logits, size_t vl, size_t T, float* row_max) override {
    for (size_t t = 0; t < T; ++t) row_max[t] = dm::VocabRowMax(logits, vl, t);
    return Status::Ok();
  }
  Status VocabStats(const float* logits, const int32_t* targets, const float* row_max, size_t first, size_t vl,
                    size_t T, float* stats) override {
    for (size_t t = 0; t < T; ++t) dm::VocabRowStats(logits, targets, row_max, first, vl, T, stats, t);
    return Status::Ok();
  }
  Status VocabGrad(const float* logits, const int32_t* targets, const float* row_max, const float* stats, size_t first,
                   size_t vl, size_t T, float scale, float* dlogits, void* low, int fmt, float* losses) override {
    for (size_t t = 0; t < T; ++t)
      losses[t] = dm::VocabRowGrad(logits, targets, row_max, stats, first, vl, T, scale, dlogits, low, fmt, t);
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
  // The base's pageable memory: fresh mappings as PyTorch's (host backend).
  Result<Memory> AllocatePageable(size_t bytes, bool zeroed) override { return base_->AllocatePageable(bytes, zeroed); }
  Result<DeviceMemory> GpuMemory() override { return base_->GpuMemory(); }
  Result<std::unique_ptr<DeviceStream>> NewStream(Stream kind) override { return base_->NewStream(kind); }
  Result<std::unique_ptr<Model>> NewModel(const Plan& p, const ModelOptions& o) override {
    return NewDeviceModel(p, o, NewEmulatedKernels(base_));
  }

 private:
  Backend* base_;
};

}  // namespace

std::unique_ptr<Backend> NewEmulatedDeviceBackend(Backend* base) {
  return std::make_unique<EmulatedDeviceBackend>(base);
}

std::unique_ptr<ModelKernels> NewEmulatedKernels(Backend* backend) {
  return std::make_unique<EmulatedKernels>(backend);
}

}  // namespace strata::exec
