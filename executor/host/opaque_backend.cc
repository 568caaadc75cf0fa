// A checking backend for tests: GPU-tier addresses carry a tag bit that
// makes them non-canonical on x86-64 and AArch64, so any host dereference
// of device memory by the interpreter faults; every stream and model call
// strips the tag before forwarding to the wrapped backend. A run through it
// that finishes with the usual digest shows the interpreter reaches device
// memory only through the backend, as it must for CUDA.
#include <cstdint>

#include "strata/executor/backend.h"

namespace strata::exec {
namespace {

constexpr uintptr_t kTag = uintptr_t{1} << 62;

template <typename T>
T* Strip(T* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<T*>(u & ~kTag);
}

class OpaqueStream : public DeviceStream {
 public:
  explicit OpaqueStream(std::unique_ptr<DeviceStream> base) : base_(std::move(base)) {}
  DeviceStream& base() { return *base_; }

  void OnWorkerThread() override { base_->OnWorkerThread(); }
  Status Copy(void* dst, const void* src, size_t bytes) override { return base_->Copy(Strip(dst), Strip(src), bytes); }
  Status Zero(void* dst, size_t bytes) override { return base_->Zero(Strip(dst), bytes); }
  Status Accumulate(void* dst, const void* src, size_t n, Precision p, bool* overflow) override {
    return base_->Accumulate(Strip(dst), Strip(src), n, p, overflow);
  }
  Status FromFloat(void* dst, const float* src, size_t n, Precision p) override {
    return base_->FromFloat(Strip(dst), Strip(src), n, p);
  }
  Status ToFloat(float* dst, const void* src, size_t n, Precision p) override {
    return base_->ToFloat(Strip(dst), Strip(src), n, p);
  }
  Status AllGather(const void* src, void* dst, size_t bytes) override {
    return base_->AllGather(Strip(src), Strip(dst), bytes);
  }
  Status ReduceScatter(const void* src, void* dst, size_t n, Precision p, bool acc, bool* overflow) override {
    return base_->ReduceScatter(Strip(src), Strip(dst), n, p, acc, overflow);
  }
  Status AllReduce(const void* src, void* dst, size_t n, Precision p, bool acc, bool* overflow) override {
    return base_->AllReduce(Strip(src), Strip(dst), n, p, acc, overflow);
  }
  Status AdamStep(const AdamArgs& a, const AdamStepConsts& c) override {
    AdamArgs b = a;
    b.master = Strip(a.master);
    b.grad = Strip(a.grad);
    b.exp_avg = Strip(a.exp_avg);
    b.exp_avg_sq = Strip(a.exp_avg_sq);
    b.out = Strip(a.out);
    return base_->AdamStep(b, c);
  }
  Result<std::unique_ptr<Event>> Record() override { return base_->Record(); }

 private:
  std::unique_ptr<DeviceStream> base_;
};

class OpaqueModel : public Model {
 public:
  explicit OpaqueModel(std::unique_ptr<Model> base) : base_(std::move(base)) {}
  std::vector<float> InitGroup(int g) const override { return base_->InitGroup(g); }
  void Prepare() override { base_->Prepare(); }
  void StartStep(int step) override { base_->StartStep(step); }
  Status Forward(DeviceStream& s, const ModuleArgs& a) override {
    return base_->Forward(static_cast<OpaqueStream&>(s).base(), Stripped(a));
  }
  Status Backward(DeviceStream& s, const ModuleArgs& a, float scale, double* loss, bool* overflow) override {
    return base_->Backward(static_cast<OpaqueStream&>(s).base(), Stripped(a), scale, loss, overflow);
  }

 private:
  static ModuleArgs Stripped(ModuleArgs a) {
    for (const void*& w : a.w) w = Strip(w);
    for (void*& g : a.grad) g = Strip(g);
    return a;
  }
  std::unique_ptr<Model> base_;
};

class OpaqueBackend : public Backend {
 public:
  explicit OpaqueBackend(Backend* base) : base_(base) {}
  std::string name() const override { return "opaque(" + base_->name() + ")"; }
  bool HostAccessible(Tier t) const override { return t != Tier::kGpu && base_->HostAccessible(t); }
  Result<Memory> Allocate(Tier t, size_t bytes, bool zeroed) override {
    auto m = base_->Allocate(t, bytes, zeroed);
    if (!m.ok() || t != Tier::kGpu || m->data() == nullptr) return m;
    // The tagged block keeps the real one alive and releases it with itself.
    auto* held = new Memory(std::move(*m));
    auto* tagged = reinterpret_cast<std::byte*>(reinterpret_cast<uintptr_t>(held->data()) | kTag);
    return Memory(
        tagged, bytes, t, [](void* ctx, std::byte*, size_t) { delete static_cast<Memory*>(ctx); }, held);
  }
  // The base's pageable memory: fresh mappings as PyTorch's (host backend).
  Result<Memory> AllocatePageable(size_t bytes, bool zeroed) override { return base_->AllocatePageable(bytes, zeroed); }
  Result<DeviceMemory> GpuMemory() override { return base_->GpuMemory(); }
  Result<std::unique_ptr<DeviceStream>> NewStream(Stream kind) override {
    STRATA_ASSIGN_OR_RETURN(auto s, base_->NewStream(kind));
    return std::unique_ptr<DeviceStream>(std::make_unique<OpaqueStream>(std::move(s)));
  }
  Result<std::unique_ptr<Model>> NewModel(const Plan& p, const ModelOptions& o) override {
    STRATA_ASSIGN_OR_RETURN(auto m, base_->NewModel(p, o));
    return std::unique_ptr<Model>(std::make_unique<OpaqueModel>(std::move(m)));
  }

 private:
  Backend* base_;
};

}  // namespace

std::unique_ptr<Backend> NewOpaqueDeviceBackend(Backend* base) { return std::make_unique<OpaqueBackend>(base); }

}  // namespace strata::exec
