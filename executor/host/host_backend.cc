// The host backend: the GPU played by the CPU. Device and CPU memory are
// page-aligned host memory; every stream call runs to completion on the
// calling thread (the stream's worker), so events are complete when
// recorded. Collectives go through MPI (Comm), the Adam step through the
// fused CPU kernel, the model through the host workloads.
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "host/convert.h"
#include "host/host_adam.h"
#include "host/low_precision.h"
#include "host/pageable.h"
#include "host/worker_pool.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"
#include "strata/executor/copy_engine.h"
#include "workloads/workload.h"

namespace strata::exec {
namespace {

class DoneEvent : public Event {
 public:
  Status Synchronize() override { return Status::Ok(); }
};

// The model's math on fp32 copies of the parameters; gradients come back in
// the plan's precision.
class HostModel : public Model {
 public:
  // `largest`: the most elements of a module's groups together, for which
  // the fp32 workspaces are sized (and touched) once, now.
  HostModel(std::unique_ptr<Workload> w, size_t largest, size_t heap_bytes)
      : w_(largest, 0.0f), dw_(largest, 0.0f), heap_bytes_(heap_bytes), wl_(std::move(w)) {}
  // The workload keeps its activations on the heap, in fp32, allocated as
  // the step goes and freed by its backward; the allocator then keeps the
  // pages for the next step (jemalloc, which the CLI links, holds freed
  // pages of a thread's arena for seconds), so only the first step faults
  // them in: on a VM at 13 us a page, gpt-tiny's first step was 3.2x a
  // steady one. Growing this thread's heap by the plan's activations (fp32,
  // and their gradients) once, here, leaves that step pages already there.
  void Prepare() override {
    constexpr size_t kChunk = size_t{64} << 10;  // the arena's own pages, not a separate mapping
    std::vector<void*> chunks;
    for (size_t n = 0; n < heap_bytes_; n += kChunk) {
      void* p = std::malloc(kChunk);
      if (p == nullptr) break;
      std::memset(p, 1, kChunk);  // not 0: malloc and a zero fill become calloc, which touches nothing
      chunks.push_back(p);
    }
    for (void* p : chunks) std::free(p);
  }
  std::vector<float> InitGroup(int g) const override { return wl_->InitGroup(g); }
  void StartStep(int step) override { wl_->StartStep(step); }

  Status Forward(DeviceStream&, const ModuleArgs& a) override {
    // Low-precision weights straight into the workload's kernels when it
    // offers them (the same bits, without fp32 copies).
    if (!a.w.empty() && a.precision != Precision::kFp32 && wl_->ForwardLow(a.micro, a.module, a.w, a.precision))
      return Status::Ok();
    wl_->Forward(a.micro, a.module, Floats(a));
    return Status::Ok();
  }
  Result<std::vector<float>> TakeBoundary(int micro, int layer, bool grad) override {
    return wl_->TakeBoundary(micro, layer, grad);
  }
  Status PutBoundary(int micro, int layer, bool grad, std::vector<float> v) override {
    return wl_->PutBoundary(micro, layer, grad, std::move(v));
  }
  Status TensorAllReduce(int micro, int module, Operand what, const TensorReduce& reduce) override {
    return wl_->TensorAllReduce(micro, module, what, reduce);
  }
  Status Backward(DeviceStream&, const ModuleArgs& a, float loss_scale, double* loss, bool* overflow) override {
    if (!a.w.empty() && a.precision != Precision::kFp32 &&
        wl_->BackwardLow(a.micro, a.module, a.w, a.grad, a.grad_fresh, a.precision, loss_scale, loss, overflow))
      return Status::Ok();
    const float* w = Floats(a);
    size_t n = 0;
    for (size_t k = 0; k < a.grad.size(); ++k) n += a.w_elements[k];
    dw_.assign(n, 0.0f);
    *loss += wl_->Backward(a.micro, a.module, w, dw_.empty() ? nullptr : dw_.data(), loss_scale);
    size_t at = 0;
    for (size_t k = 0; k < a.grad.size(); ++k) {
      if (AccumulateFloatsToLow(a.grad[k], dw_.data() + at, a.w_elements[k], a.precision, a.grad_fresh[k] != 0))
        *overflow = true;
      at += a.w_elements[k];
    }
    return Status::Ok();
  }

 private:
  // The module's groups widened to fp32, end to end (null if none).
  const float* Floats(const ModuleArgs& a) {
    if (a.w.empty()) return nullptr;
    size_t n = 0;
    for (size_t e : a.w_elements) n += e;
    w_.resize(n);
    size_t at = 0;
    for (size_t k = 0; k < a.w.size(); ++k) {
      LowToFloat(a.w[k], w_.data() + at, a.w_elements[k], a.precision);
      at += a.w_elements[k];
    }
    return w_.data();
  }
  std::vector<float> w_, dw_;  // fp32 workspaces, reused (compute stream only)
  size_t heap_bytes_;          // Prepare's heap growth
  std::unique_ptr<Workload> wl_;
};

class HostStream : public DeviceStream {
 public:
  HostStream(const HostBackendOptions& o, Comm* comm, Stream kind) : o_(o), comm_(comm), kind_(kind) {}

  // Kernels, copies and the optimizer run on this stream's thread: CPU work.
  // The NVMe streams' threads wait on the device, MPI's on its peers.
  void OnWorkerThread() override {
    if (kind_ == Stream::kCompute || kind_ == Stream::kH2D || kind_ == Stream::kD2H || kind_ == Stream::kCpuOptim)
      MarkCurrentThreadCpuBound();
  }

  Status Copy(void* dst, const void* src, size_t bytes) override {
    CopyBytes(dst, src, bytes, o_.copy_threads);
    return Status::Ok();
  }
  Status Zero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status::Ok();
  }
  Status Accumulate(void* dst, const void* src, size_t n, Precision p, bool* overflow) override {
    if (AccumulateLow(dst, src, n, p)) *overflow = true;
    return Status::Ok();
  }
  Status FromFloat(void* dst, const float* src, size_t n, Precision p) override {
    FloatToLow(src, dst, n, p);
    return Status::Ok();
  }
  Status ToFloat(float* dst, const void* src, size_t n, Precision p) override {
    LowToFloat(src, dst, n, p);
    return Status::Ok();
  }

  Status AllGather(const void* src, void* dst, size_t bytes) override {
    comm_->Allgather(src, dst, bytes);
    return Status::Ok();
  }
  Status ReduceScatter(const void* src, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) override {
    return Reduce(src, dst, n, true, p, accumulate, overflow);
  }
  Status AllReduce(const void* src, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) override {
    return Reduce(src, dst, n, false, p, accumulate, overflow);
  }

  Status AdamStep(const AdamArgs& a, const AdamStepConsts& c) override {
    HostAdamStep(a, c, o_.adam_threads, grad_);
    return Status::Ok();
  }

  Result<std::unique_ptr<Event>> Record() override { return std::unique_ptr<Event>(std::make_unique<DoneEvent>()); }

 private:
  // Sums in fp32 over the ranks, averages, rounds to p before it is stored
  // or accumulated (as a gradient arriving from a copy would be).
  Status Reduce(const void* src, void* dst, size_t n, bool scatter, Precision p, bool accumulate, bool* overflow) {
    const size_t ranks = static_cast<size_t>(comm_->size());
    const size_t n_src = scatter ? n * ranks : n;
    std::vector<float> out;
    if (scatter) {
      // Each rank's block for this one travels in the plan's precision (as
      // a ring moves fp16), and is summed here in fp32 in rank order, so
      // the result does not depend on MPI's reduction order.
      const size_t eb = static_cast<size_t>(BytesPerElement(p));
      std::vector<std::byte> blocks(n_src * eb);
      comm_->AllToAll(src, blocks.data(), n * eb);
      out.assign(n, 0.0f);
      std::vector<float> block(n);
      for (size_t q = 0; q < ranks; ++q) {
        LowToFloat(blocks.data() + q * n * eb, block.data(), n, p);
        for (size_t i = 0; i < n; ++i) out[i] += block[i];
      }
    } else {
      out.resize(n_src);
      LowToFloat(src, out.data(), n_src, p);
      comm_->AllreduceSum(out.data(), n);
    }
    for (float& v : out) v /= static_cast<float>(ranks);
    if (accumulate) {
      if (AccumulateFloatsToLow(dst, out.data(), n, p)) *overflow = true;
      return Status::Ok();
    }
    FloatToLow(out.data(), dst, n, p);
    const LowPrecision lp(p);
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(lp.Load(static_cast<const std::byte*>(dst), i))) *overflow = true;
    return Status::Ok();
  }

  HostBackendOptions o_;
  Comm* comm_;
  Stream kind_;
  std::vector<float> grad_;  // Adam's fp32 gradient workspace
};

class HostBackend : public Backend {
 public:
  explicit HostBackend(const HostBackendOptions& o) : o_(o), comm_(o.comm != nullptr ? o.comm : &Comm::World()) {}
  std::string name() const override { return "host"; }
  bool HostAccessible(Tier) const override { return true; }

  ~HostBackend() override { Trim(); }
  // Frees the cached blocks.
  void Trim() {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [size, p] : pool_) FreeBlock(p, size);
    pool_.clear();
  }

  // Blocks are page-aligned and cached by size once released (as a GPU
  // caching allocator does): the plan allocates the same transient sizes
  // every iteration, and fresh pages would fault in on every use.
  //
  // Blocks of kLazyZeroBytes or more are mapped directly and zeroed lazily:
  // a fresh mapping reads as zeros, and a cached one is zeroed by dropping
  // its pages (MADV_DONTNEED), so only the pages a step touches cost
  // anything. A plan's gradient bucket is sized by reduce_bucket_size
  // (DeepSpeed's default 5e8 elements, 1 GB in fp16) of which a small model
  // writes a few KiB: a memset of the whole block took 80% of gpt-tiny's
  // step and its first touch most of the warm-up.
  static constexpr size_t kLazyZeroBytes = size_t{64} << 20;
  static bool Lazy(size_t rounded) { return rounded >= kLazyZeroBytes; }
  // A block's size: whole pages, the cache's key.
  static size_t Rounded(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }
  static std::byte* NewBlock(size_t rounded) {
    if (!Lazy(rounded)) return static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
    void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  static void FreeBlock(std::byte* p, size_t rounded) {
    if (Lazy(rounded))
      ::munmap(p, rounded);
    else
      std::free(p);
  }
  // Zeroes the first `bytes` of a block; `fresh` blocks of the lazy size are zero already.
  static void Zero(std::byte* p, size_t bytes, size_t rounded, bool fresh) {
    if (!Lazy(rounded))
      std::memset(p, 0, bytes);
    else if (!fresh && ::madvise(p, rounded, MADV_DONTNEED) != 0)
      std::memset(p, 0, bytes);
  }

  Result<Memory> Allocate(Tier t, size_t bytes, bool zeroed) override {
    if (t == Tier::kNvme) return Status::Internal("the backend does not allocate NVMe memory");
    if (bytes == 0) return Memory();
    const size_t rounded = Rounded(bytes);
    std::byte* p = nullptr;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = pool_.find(rounded);
      if (it != pool_.end()) {
        p = it->second;
        pool_.erase(it);
      }
    }
    const bool fresh = p == nullptr;
    if (p == nullptr) p = NewBlock(rounded);
    if (p == nullptr) {  // out of memory: give the cached blocks back, then try once more
      Trim();
      p = NewBlock(rounded);
    }
    if (p == nullptr)
      return Status::Internal(std::string("host backend: out of memory allocating ") +
                              FormatBytes(Bytes{static_cast<int64_t>(bytes)}) + " for the " + std::string(TierName(t)) +
                              " tier");
    if (zeroed) Zero(p, bytes, rounded, fresh);
    return Memory(p, bytes, t, &HostBackend::Release, this);
  }
  // Blocks made ahead into the cache, their pages touched (lazily zeroed
  // blocks are not: Allocate touches only what a step writes of them).
  Status Reserve(Tier t, size_t bytes, int count) override {
    if (t == Tier::kNvme || bytes == 0) return Status::Ok();
    const size_t rounded = Rounded(bytes);
    for (int i = 0; i < count; ++i) {
      std::byte* p = NewBlock(rounded);
      if (p == nullptr) return Status::Ok();  // what is not reserved is allocated when used
      if (!Lazy(rounded)) std::memset(p, 0, rounded);
      std::lock_guard<std::mutex> l(mu_);
      pool_.emplace(rounded, p);
    }
    return Status::Ok();
  }
  // Pageable CPU memory (pin_memory off) as PyTorch's CPU allocator gives
  // it (host/pageable.h); on ENOMEM the pool's cached blocks go back first.
  Result<Memory> AllocatePageable(size_t bytes, bool zeroed) override {
    return AllocatePageableMemory(
        bytes, zeroed, "host backend", [](void* self) { static_cast<HostBackend*>(self)->Trim(); }, this);
  }
  Result<std::unique_ptr<DeviceStream>> NewStream(Stream kind) override {
    return std::unique_ptr<DeviceStream>(std::make_unique<HostStream>(o_, comm_, kind));
  }
  Result<std::unique_ptr<Model>> NewModel(const Plan& p, const ModelOptions& o) override;

 private:
  static void Release(void* ctx, std::byte* p, size_t bytes) {
    auto* self = static_cast<HostBackend*>(ctx);
    std::lock_guard<std::mutex> l(self->mu_);
    self->pool_.emplace(Rounded(bytes), p);
  }

  HostBackendOptions o_;
  Comm* comm_;
  std::mutex mu_;
  std::multimap<size_t, std::byte*> pool_;  // released blocks by rounded size
};

Result<std::unique_ptr<Model>> HostBackend::NewModel(const Plan& p, const ModelOptions& o) {
  std::unique_ptr<Workload> w;
  const int threads = o_.compute_threads > 0 ? o_.compute_threads : UsableCores();
  if (p.run.model.kind == ModelKind::kMlp) {
    w = MakeMlpWorkload(p, o.seed, o.rank, threads, o.tensor_rank);
  } else {
    STRATA_ASSIGN_OR_RETURN(auto g, MakeGptWorkload(p, o.seed, o.rank, o.text_path, threads, o.tensor_rank));
    w = std::move(g);
  }
  size_t largest = 0;
  for (const PlanModule& m : p.modules) {
    size_t n = 0;
    for (int g : m.param_groups) n += static_cast<size_t>(p.param_groups[static_cast<size_t>(g)].elements.v);
    largest = std::max(largest, n);
  }
  // The plan's transient activations in fp32, twice (the workload keeps
  // each activation's gradient too), a pipeline stage's share, capped (a
  // large model's would be gigabytes of pages nobody needs ahead).
  size_t activations = 0;
  for (const Buffer& b : p.buffers)
    if (b.kind == StateKind::kActivation && !b.resident)
      activations += 2 * static_cast<size_t>(b.bytes.v) * 4 / static_cast<size_t>(BytesPerElement(p.run.precision));
  activations /= static_cast<size_t>(std::max(1, p.pipeline));
  constexpr size_t kMostHeap = size_t{256} << 20;
  return std::unique_ptr<Model>(std::make_unique<HostModel>(std::move(w), largest, std::min(activations, kMostHeap)));
}

}  // namespace

std::unique_ptr<Backend> NewHostBackend(const HostBackendOptions& o) { return std::make_unique<HostBackend>(o); }

}  // namespace strata::exec
