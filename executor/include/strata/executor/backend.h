// The device the plan interpreter drives: memory per tier, streams with
// events, copies, and the kernels a plan's ops need (the model's forward and
// backward, gradient accumulation, collectives, the fused Adam step). The
// interpreter (runner.cc) touches tier memory only through this interface,
// so a CUDA backend (cudaMalloc/cudaMallocHost, cudaStream_t, cudaEvent_t,
// cuBLAS, NCCL, the fused Adam kernel over adam_math.h) fits in without
// changing it. The host backend plays the GPU on the CPU (host_backend.cc).
//
// Addresses: Memory::data() is an address in its tier's address space. For
// a tier where HostAccessible() is false (device memory) the caller must not
// dereference it: it only passes it back to stream calls. Addresses of
// HostAccessible tiers are ordinary host pointers (NVMe I/O uses them).
//
// Ordering: calls on one DeviceStream run in call order, possibly asynchronously
// to the caller. Their effects (and any `bool* overflow` they set) are
// visible once an Event recorded after them has been synchronized; every
// pointer passed must stay valid until then. Streams are used by one thread
// at a time; different streams may be used from different threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/core/tier.h"
#include "strata/executor/adam_math.h"
#include "strata/plan/plan.h"

namespace strata::exec {

class Comm;
class DeviceStream;

// A block of one tier's memory, zeroed when allocated. Move-only; returned
// to its backend on destruction. REQUIRES: it does not outlive the backend.
class Memory {
 public:
  using Release = void (*)(void* ctx, std::byte* p, size_t bytes);
  Memory() = default;
  Memory(std::byte* p, size_t bytes, Tier tier, Release release, void* ctx)
      : p_(p), n_(bytes), tier_(tier), release_(release), ctx_(ctx) {}
  Memory(Memory&& o) noexcept { *this = std::move(o); }
  Memory& operator=(Memory&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(tier_, o.tier_);
    std::swap(release_, o.release_);
    std::swap(ctx_, o.ctx_);
    return *this;
  }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  ~Memory() {
    if (release_ != nullptr && p_ != nullptr) release_(ctx_, p_, n_);
  }
  std::byte* data() const { return p_; }
  size_t size() const { return n_; }
  Tier tier() const { return tier_; }

 private:
  std::byte* p_ = nullptr;
  size_t n_ = 0;
  Tier tier_ = Tier::kCpu;
  Release release_ = nullptr;
  void* ctx_ = nullptr;
};

// A point in a stream's work; Synchronize() waits until everything the
// stream was given before Record() is done, and reports its first failure.
class Event {
 public:
  virtual ~Event() = default;
  virtual Status Synchronize() = 0;
};

// One module's call: its parameters and gradients, one entry per parameter
// group of the module (PlanModule::param_groups), in order, in `precision`,
// in any tier the stream can compute on (empty when the module has none;
// gradients are empty in the forward). The module computes as if its
// groups lay end to end.
struct ModuleArgs {
  int micro = 0;
  int module = 0;
  std::vector<const void*> w;
  std::vector<size_t> w_elements;
  std::vector<void*> grad;  // grad[k] has w_elements[k] elements
  // grad_fresh[k]: the plan stores this gradient (Op::grads_store): grad[k]
  // holds no earlier gradient and may hold anything (its buffer is not
  // cleared), and Backward writes every element, as accumulating into
  // zeros would, instead of adding into it.
  std::vector<char> grad_fresh;
  Precision precision = Precision::kFp32;
};

// Tensor parallelism: what a model asks of the plan's collective on one of
// its activations: reduce `data` (n fp32 values in host memory) over the
// tensor-parallel ranks in place.
enum class ReduceOp { kSum, kMax };
using TensorReduce = std::function<void(float* data, size_t n, ReduceOp op)>;

// The model's math on the backend, created by Backend::NewModel. Parameter
// and gradient regions are in the plan's precision, in any tier the stream
// can compute on. Activations stay inside the model between the forward and
// the backward of a micro step. Used by the compute stream only.
class Model {
 public:
  virtual ~Model() = default;
  // Initial fp32 values of parameter group `g` (its elements, unpadded), in
  // host memory: from the seed alone, the same whatever the placement.
  virtual std::vector<float> InitGroup(int g) const = 0;
  // Once, before the first step, on the thread that runs the compute
  // stream: what the first step would otherwise set up in its own time.
  virtual void Prepare() {}
  virtual void StartStep(int step) = 0;
  // The forward of a module for a micro step, on stream `s` (of the same
  // backend).
  virtual Status Forward(DeviceStream& s, const ModuleArgs& a) = 0;
  // Backward: the micro step's gradient, scaled by loss_scale and rounded
  // to the precision, is accumulated into each a.grad[k] (written, when
  // a.grad_fresh[k]); *loss += the
  // micro batch's loss when the module computes it; *overflow |= any
  // accumulated value is not finite.
  virtual Status Backward(DeviceStream& s, const ModuleArgs& a, float loss_scale, double* loss, bool* overflow) = 0;
  // Pipeline stages: the tensor crossing the stage boundary after layer
  // `layer` in micro step `micro` (a send or receive without moves names
  // the layer, plan.h): the layer's output (grad false) or the loss's
  // gradient with respect to it (grad true), fp32 in host memory.
  // TakeBoundary hands out what this stage computed (the stream's work
  // before it done); sending the gradient ends the micro step on this
  // stage. PutBoundary stores what the neighbouring stage sent.
  virtual Result<std::vector<float>> TakeBoundary(int /*micro*/, int /*layer*/, bool /*grad*/) {
    return Status::InvalidArgument("this backend's model does not run pipeline stages");
  }
  virtual Status PutBoundary(int /*micro*/, int /*layer*/, bool /*grad*/, std::vector<float> /*v*/) {
    return Status::InvalidArgument("this backend's model does not run pipeline stages");
  }
  // Tensor parallelism: a tensor-parallel all-reduce without moves (plan.h,
  // Operand) on module `module`'s activation in micro step `micro`: the
  // model reduces its tensor(s) with `reduce` (a vocabulary-parallel loss's
  // statistics take three reductions, one a maximum), then finishes the
  // module.
  virtual Status TensorAllReduce(int /*micro*/, int /*module*/, Operand /*what*/, const TensorReduce& /*reduce*/) {
    return Status::InvalidArgument("this backend's model is not split for tensor parallelism");
  }
};

struct ModelOptions {
  uint64_t seed = 1234;
  int rank = 0;           // the data-parallel rank (its samples; the same on every pipeline stage)
  int tensor_rank = 0;    // its index in its tensor-parallel group (which shard of each split tensor)
  std::string text_path;  // GPT: the text whose bytes are the tokens
};

// Arguments of one Adam step over a tile (see adam_math.h for the math).
struct AdamArgs {
  float* master;      // fp32 master weights (updated)
  const void* grad;   // gradients in `precision` (fp32 if grad_fp32), scaled by the loss scale
  float* exp_avg;     // first moment (updated)
  float* exp_avg_sq;  // second moment (updated)
  void* out;          // the new weights in `precision` (also when fp32)
  Precision precision;
  size_t n;                // elements
  bool grad_fp32 = false;  // gradients already fp32 (DeepSpeed's offloaded optimizer)
};

class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
  // dst = src, `bytes` bytes, between any tiers' memory or host memory.
  virtual Status Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual Status Zero(void* dst, size_t bytes) = 0;
  // dst[i] = round(dst[i] + src[i]) in precision p; *overflow |= any result
  // is not finite.
  virtual Status Accumulate(void* dst, const void* src, size_t n, Precision p, bool* overflow) = 0;
  // dst[i] = round(src[i]) in precision p (src fp32).
  virtual Status FromFloat(void* dst, const float* src, size_t n, Precision p) = 0;
  // dst[i] = src[i] widened to fp32 (src in precision p; exact). A copy
  // whose destination may be in another tier, like Copy.
  virtual Status ToFloat(float* dst, const void* src, size_t n, Precision p) = 0;

  // Collectives over the data-parallel group (every rank calls them in the
  // same order): the backend's communicator (HostBackendOptions::comm). AllGather: dst (ranks x bytes) = every rank's
  // src.
  virtual Status AllGather(const void* src, void* dst, size_t bytes) = 0;
  // Sum over ranks in fp32 (in rank order for ReduceScatter), divided by the ranks, rounded to p; stored or
  // (accumulate) added into dst. ReduceScatter: src has ranks x n elements,
  // dst this rank's n; AllReduce: both have n.
  virtual Status ReduceScatter(const void* src, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) = 0;
  virtual Status AllReduce(const void* src, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) = 0;

  virtual Status AdamStep(const AdamArgs& args, const AdamStepConsts& c) = 0;

  virtual Result<std::unique_ptr<Event>> Record() = 0;

  // Called once on the thread that will issue this stream's ops, before the
  // first (the interpreter's worker for the stream). The host backend marks
  // the threads of its device work as CPU-bound (worker_pool.h), so that
  // they do not preempt the NVMe and MPI workers that wake them.
  virtual void OnWorkerThread() {}
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Whether the host may dereference this tier's addresses (and NVMe I/O
  // may target them). The CPU tier always is; the GPU tier is not on CUDA.
  virtual bool HostAccessible(Tier t) const = 0;
  // REQUIRES: t is kGpu or kCpu. Zeroed memory unless `zeroed` is false (the
  // caller overwrites every byte before reading any: the contents are then
  // unspecified); capacity is accounted by the caller (the plan's tier
  // limits), the backend fails only when it cannot allocate.
  virtual Result<Memory> Allocate(Tier t, size_t bytes, bool zeroed = true) = 0;
  // CPU memory that is not page-locked (a plan buffer with pinned false:
  // DeepSpeed's pin_memory off), page-aligned for NVMe I/O. Copies between
  // it and the GPU are staged by the driver. Backends without the
  // distinction give Allocate(kCpu, ...).
  virtual Result<Memory> AllocatePageable(size_t bytes, bool zeroed) { return Allocate(Tier::kCpu, bytes, zeroed); }
  // Memory the plan will allocate: `count` blocks of `bytes` made now and
  // kept for Allocate(t, bytes, ...) to hand out (a caching allocator's
  // blocks, their first touches paid before the first step rather than in
  // it). Default: nothing kept.
  virtual Status Reserve(Tier t, size_t bytes, int count) {
    (void)t, (void)bytes, (void)count;
    return Status::Ok();
  }
  // The device's memory as its driver reports it: the total, and what is
  // free now (the rest is this process's context and allocations, and other
  // processes'). NotFound on backends without a device.
  struct DeviceMemory {
    size_t total = 0, free = 0;
  };
  virtual Result<DeviceMemory> GpuMemory() { return Status::NotFound(name() + " backend: no device memory to query"); }
  virtual Result<std::unique_ptr<DeviceStream>> NewStream(Stream kind) = 0;
  virtual Result<std::unique_ptr<Model>> NewModel(const Plan& p, const ModelOptions& o) = 0;
};

struct HostBackendOptions {
  Comm* comm = nullptr;     // the data-parallel group's; default: Comm::World()
  int copy_threads = 2;     // threads per large copy
  int adam_threads = 1;     // threads per Adam step
  int compute_threads = 1;  // threads of the model's large kernels (0: the cores this process may use)
};

// The GPU played by the CPU: device memory is page-aligned host memory,
// kernels run on the calling stream worker's thread, copies on copy threads.
std::unique_ptr<Backend> NewHostBackend(const HostBackendOptions& o);

struct CudaBackendOptions {
  Comm* comm = nullptr;  // the data-parallel group's (NCCL's communicator is made over it); default: Comm::World()
  int device = -1;       // -1: the rank modulo the devices this process sees
  int adam_threads = 0;  // host threads of a step on the CPU optimizer's stream (0: the usable cores)
};

// The CUDA backend (executor/cuda/, built when configure finds the toolkit
// and NCCL: cmake/cuda.cmake, STRATA_CUDA): cudaMalloc'd device memory,
// page-locked CPU memory (both cached), a CUDA stream per plan stream, the element-wise
// kernels and the fused Adam of adam_math.h's math, NCCL collectives
// (their reductions keep this file's contract: fp32 sums, rank order for
// the reduce-scatter), and the device model (executor/devmodel/: the MLP
// and the GPT on cuBLAS and per-thread kernels). Fails with "no CUDA device: ..." where the driver reports
// none, or in a build without the backend.
Result<std::unique_ptr<Backend>> NewCudaBackend(const CudaBackendOptions& o);

// For tests: a backend whose GPU-tier addresses are not host pointers
// (dereferencing one faults), forwarding to `base`. A run through it proves
// the interpreter reaches device memory only through the backend.
std::unique_ptr<Backend> NewOpaqueDeviceBackend(Backend* base);

}  // namespace strata::exec
