// The CUDA backend (backend.h): device memory from cudaMalloc, pinned CPU
// memory from cudaHostAlloc, a cudaStream_t per plan stream with events,
// copies by cudaMemcpyAsync, the element-wise kernels and the fused Adam of
// kernels.cu, collectives through NCCL (its communicator bootstrapped over
// MPI: rank 0's unique id broadcast by Comm).
//
// Reductions keep the host backend's contract (backend.h): a reduce-scatter
// moves each rank's block in the plan's precision (NCCL point to point) and
// sums them in fp32 in rank order; an all-reduce sums fp32 values with
// NCCL's ring (its order, fixed for a given communicator); both divide by
// the ranks and round to the precision. Every CUDA, NCCL status becomes a
// Status naming the call, the file and line, and the error string (after
// nccl-tests' CUDACHECK/NCCLCHECK).
//
// The CPU optimizer (Stream::kCpuOptim, offload_optimizer.device cpu or
// nvme): its step runs on the host, as DeepSpeed's DeepSpeedCPUAdam steps
// the CPU partition (CudaStream::OnHost); its copies stay on CUDA. So do
// Zero, Accumulate, FromFloat and ToFloat given pageable CPU memory
// (pin_memory off), which a kernel cannot address; collectives take device
// or pinned memory (every plan gives them GPU buffers).
//
// The model: the device model (devmodel/device_model.h: the MLP and the
// GPT) on cuBLAS and model_kernels.cu / gpt_kernels.cu. Memory is cached
// (Allocate).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/cuda_common.h"
#include "cuda/kernels.h"
#include "devmodel/device_model.h"
#include "host/convert.h"
#include "host/host_adam.h"
#include "host/pageable.h"
#include "host/worker_pool.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"

namespace strata::exec {
namespace {

int Fmt(Precision p) { return static_cast<int>(p); }  // kernels.h: Precision's values
constexpr ncclDataType_t kNcclByte = ncclUint8;

// The overflow flag's trip to the host: at Record() the stream copies its
// device flag into one of these page-locked slots and clears the flag, both
// in stream order; the event owns the slot and the callers' bools that were
// watching, and sets them once synchronized (backend.h: a flag is visible
// after an event recorded after the call).
constexpr int kSlots = 64;

// Polls `done` (a cudaEventQuery or cudaStreamQuery) until the work ends,
// and meanwhile NCCL's asynchronous error (as nccl-tests'
// testStreamSynchronize does): a peer that died or a network failure
// leaves an NCCL kernel spinning forever, so on an error the communicator
// is aborted (ncclCommAbort, which ends its kernels) and the wait fails
// with the reason instead of hanging.
template <typename Query>
Status PollUntilDone(Shared* shared, Query done, const char* what) {
  for (int polls = 0;; ++polls) {
    const cudaError_t e = done();
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) return CudaError(e, what, __FILE__, __LINE__);
    if (shared->nccl != nullptr && polls % 64 == 63) {
      // try_lock: a thread holding the lock may be the one stuck in NCCL
      // (a connection set up at a first collective); the next poll retries.
      std::unique_lock<std::mutex> l(shared->nccl_mu, std::try_to_lock);
      if (l.owns_lock() && !shared->aborted) {
        ncclResult_t async = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(shared->nccl, &async);
        if (r != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
          shared->abort_reason = NcclError(r != ncclSuccess ? r : async,
                                           "NCCL (asynchronous error; communicator aborted)", __FILE__, __LINE__);
          ncclCommAbort(shared->nccl);
          shared->aborted = true;
        }
      }
    }
    if (shared->aborted) return shared->abort_reason;
    if (polls < 256)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // Work that ended because another thread aborted the communicator did not
  // complete.
  if (shared->aborted) return shared->abort_reason;
  return Status::Ok();
}

class CudaEvent : public Event {
 public:
  CudaEvent(cudaEvent_t e, Shared* shared, volatile int* slot, std::vector<bool*> watchers)
      : e_(e), shared_(shared), slot_(slot), watchers_(std::move(watchers)) {}
  ~CudaEvent() override { cudaEventDestroy(e_); }
  Status Synchronize() override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_RETURN_IF_ERROR(PollUntilDone(
        shared_, [&] { return cudaEventQuery(e_); }, "cudaEventQuery"));
    if (slot_ != nullptr && *slot_ != 0)
      for (bool* w : watchers_) *w = true;
    return Status::Ok();
  }

 private:
  cudaEvent_t e_;
  Shared* shared_;
  volatile int* slot_;  // null: nothing was watched
  std::vector<bool*> watchers_;
};

class CudaStream : public DeviceStream, public CudaStreamAccess {
 public:
  CudaStream(cudaStream_t s, int* flag, int* slots, Shared* shared, bool host_math)
      : s_(s), flag_(flag), slots_(slots), shared_(shared), host_math_(host_math) {}
  ~CudaStream() override {
    cudaSetDevice(shared_->device);
    cudaStreamSynchronize(s_);
    cudaFree(flag_);
    cudaFreeHost(slots_);
    cudaFree(scratch_);
    for (void* p : retired_) cudaFree(p);
    cudaStreamDestroy(s_);
  }
  // The current device is per thread: every thread issuing this stream's
  // work selects the backend's (each entry point does too: a caller may use
  // another thread).
  void OnWorkerThread() override { cudaSetDevice(shared_->device); }

  cudaStream_t stream() const override { return s_; }
  int* overflow_flag() const override { return flag_; }
  void Watch(bool* overflow) override {
    if (overflow != nullptr && (watchers_.empty() || watchers_.back() != overflow)) watchers_.push_back(overflow);
  }

  Status Copy(void* dst, const void* src, size_t bytes) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s_));
    return Status::Ok();
  }
  Status Zero(void* dst, size_t bytes) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_ASSIGN_OR_RETURN(auto host, OnHost({{dst, "the memory to zero"}}));
    if (host)
      std::memset(dst, 0, bytes);
    else
      STRATA_CUDA(cudaMemsetAsync(dst, 0, bytes, s_));
    return Status::Ok();
  }
  Status Accumulate(void* dst, const void* src, size_t n, Precision p, bool* overflow) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_ASSIGN_OR_RETURN(auto host, OnHost({{dst, "the sum"}, {src, "the addend"}}));
    if (host) {
      if (AccumulateLow(dst, src, n, p)) *overflow = true;  // the host backend's kernel and flag
      return Status::Ok();
    }
    Watch(overflow);
    STRATA_CUDA(cuda::Accumulate(dst, src, n, Fmt(p), flag_, s_));
    return Status::Ok();
  }
  Status FromFloat(void* dst, const float* src, size_t n, Precision p) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_ASSIGN_OR_RETURN(auto host, OnHost({{dst, "the rounded copy"}, {src, "the fp32 values"}}));
    if (host)
      FloatToLow(src, dst, n, p);  // e.g. a skipped step's copy-out of the CPU master (Runner::Step)
    else
      STRATA_CUDA(cuda::FromFloat(dst, src, n, Fmt(p), nullptr, s_));
    return Status::Ok();
  }
  Status ToFloat(float* dst, const void* src, size_t n, Precision p) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_ASSIGN_OR_RETURN(auto host, OnHost({{dst, "the fp32 copy"}, {src, "the values to widen"}}));
    if (host)
      LowToFloat(src, dst, n, p);
    else
      STRATA_CUDA(cuda::ToFloat(dst, src, n, Fmt(p), s_));
    return Status::Ok();
  }

  Status AllGather(const void* src, void* dst, size_t bytes) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    if (shared_->nccl == nullptr) return Copy(dst, src, bytes);
    std::lock_guard<std::mutex> l(shared_->nccl_mu);
    if (shared_->aborted) return shared_->abort_reason;
    STRATA_NCCL(ncclAllGather(src, dst, bytes, kNcclByte, shared_->nccl, s_));
    return Status::Ok();
  }
  Status ReduceScatter(const void* src, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    const size_t ranks = static_cast<size_t>(shared_->ranks), eb = static_cast<size_t>(BytesPerElement(p));
    // Every rank's block for this one, in the plan's precision, in rank
    // order; then the fp32 sums, 256-byte aligned.
    const size_t sum_at = (n * ranks * eb + 255) / 256 * 256;
    STRATA_ASSIGN_OR_RETURN(auto blocks, Scratch(sum_at + n * 4));
    std::byte* gathered = blocks;
    float* sum = reinterpret_cast<float*>(gathered + sum_at);
    if (shared_->nccl == nullptr) {
      STRATA_CUDA(cudaMemcpyAsync(gathered, src, n * eb, cudaMemcpyDefault, s_));
    } else {
      std::lock_guard<std::mutex> l(shared_->nccl_mu);
      if (shared_->aborted) return shared_->abort_reason;
      STRATA_NCCL(ncclGroupStart());
      ncclResult_t r = ncclSuccess;
      for (size_t q = 0; q < ranks && r == ncclSuccess; ++q) {
        r = ncclSend(static_cast<const std::byte*>(src) + q * n * eb, n * eb, kNcclByte, static_cast<int>(q),
                     shared_->nccl, s_);
        if (r == ncclSuccess)
          r = ncclRecv(gathered + q * n * eb, n * eb, kNcclByte, static_cast<int>(q), shared_->nccl, s_);
      }
      const ncclResult_t end = ncclGroupEnd();  // the group is closed on every path
      STRATA_NCCL(r);
      STRATA_NCCL(end);
    }
    STRATA_CUDA(cuda::SumBlocks(sum, gathered, n, ranks, Fmt(p), s_));
    return Finish(sum, dst, n, p, accumulate, overflow);
  }
  Status AllReduce(const void* src, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_ASSIGN_OR_RETURN(auto scratch, Scratch(n * 4));
    float* sum = reinterpret_cast<float*>(scratch);
    STRATA_CUDA(cuda::ToFloat(sum, src, n, Fmt(p), s_));
    if (shared_->nccl != nullptr) {
      std::lock_guard<std::mutex> l(shared_->nccl_mu);
      if (shared_->aborted) return shared_->abort_reason;
      STRATA_NCCL(ncclAllReduce(sum, sum, n, ncclFloat32, ncclSum, shared_->nccl, s_));
    }
    STRATA_CUDA(cuda::Divide(sum, n, static_cast<float>(shared_->ranks), s_));
    return Finish(sum, dst, n, p, accumulate, overflow);
  }

  Status AdamStep(const AdamArgs& a, const AdamStepConsts& c) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_ASSIGN_OR_RETURN(const bool host, OnHost({{a.master, "the fp32 master weights"},
                                                     {a.grad, "the gradient"},
                                                     {a.exp_avg, "exp_avg"},
                                                     {a.exp_avg_sq, "exp_avg_sq"},
                                                     {a.out, "the copy-out"}}));
    if (host) {
      // DeepSpeedCPUAdam's step on the CPU partition: the host backend's
      // (cpu_adam.h, the fused kernel's bits) on Shared::adam_threads threads.
      HostAdamStep(a, c, shared_->adam_threads, grad_);
      return Status::Ok();
    }
    const cuda::AdamKernelArgs k{a.master, a.grad, a.grad_fp32, a.exp_avg, a.exp_avg_sq, a.out, Fmt(a.precision), a.n};
    STRATA_CUDA(cuda::Adam(k, c, s_));
    return Status::Ok();
  }

  Result<std::unique_ptr<Event>> Record() override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    volatile int* slot = nullptr;
    if (!watchers_.empty()) {
      int* host = slots_ + next_slot_;
      next_slot_ = (next_slot_ + 1) % kSlots;
      STRATA_CUDA(cudaMemcpyAsync(host, flag_, sizeof(int), cudaMemcpyDeviceToHost, s_));
      STRATA_CUDA(cudaMemsetAsync(flag_, 0, sizeof(int), s_));
      slot = host;
    }
    cudaEvent_t e;
    STRATA_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    const cudaError_t r = cudaEventRecord(e, s_);
    if (r != cudaSuccess) {
      cudaEventDestroy(e);
      return CudaError(r, "cudaEventRecord", __FILE__, __LINE__);
    }
    std::vector<bool*> watchers;
    watchers.swap(watchers_);
    return std::unique_ptr<Event>(std::make_unique<CudaEvent>(e, shared_, slot, std::move(watchers)));
  }

 private:
  // A device workspace of at least `bytes`, reused in stream order (kept
  // until the stream goes).
  // A larger one replaces it; the old one is kept to the stream's end
  // (queued work may still read it): no wait and no cudaFree mid-run,
  // which would synchronize the device under in-flight NCCL kernels.
  Result<std::byte*> Scratch(size_t bytes) {
    if (bytes > scratch_bytes_) {
      void* p = nullptr;
      STRATA_CUDA(cudaMalloc(&p, bytes));
      if (scratch_ != nullptr) retired_.push_back(scratch_);
      scratch_ = p;
      scratch_bytes_ = bytes;
    }
    return static_cast<std::byte*>(scratch_);
  }
  // Whether a call's math runs on the host: always on the CPU optimizer's
  // stream (host_math_), and wherever an operand is pageable CPU memory
  // (offload's pin_memory off), which a kernel cannot touch. Host math
  // waits for the stream's work so far first (a copy into an operand may be
  // in flight) and refuses an operand in GPU memory, naming it.
  Result<bool> OnHost(std::initializer_list<std::pair<const void*, const char*>> operands) {
    bool host = host_math_;
    const char* device = nullptr;
    for (const auto& [ptr, what] : operands) {
      cudaPointerAttributes attr{};
      STRATA_CUDA(cudaPointerGetAttributes(&attr, ptr));
      if (attr.type == cudaMemoryTypeUnregistered) host = true;
      if (attr.type == cudaMemoryTypeDevice && device == nullptr) device = what;
    }
    if (!host) return false;
    if (device != nullptr)
      return Status::Internal(host_math_ ? std::string("the CPU optimizer's stream was given ") + device +
                                               " in GPU memory: its operands must be CPU memory"
                                         : std::string(device) +
                                               " is in GPU memory and another operand in pageable "
                                               "CPU memory, which a kernel cannot address");
    STRATA_RETURN_IF_ERROR(PollUntilDone(
        shared_, [&] { return cudaStreamQuery(s_); }, "cudaStreamQuery"));
    return true;
  }

  // The reduced fp32 values rounded into dst, or added into it.
  Status Finish(const float* sum, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) {
    Watch(overflow);
    if (accumulate)
      STRATA_CUDA(cuda::AccumulateFloats(dst, sum, n, Fmt(p), flag_, s_));
    else
      STRATA_CUDA(cuda::FromFloat(dst, sum, n, Fmt(p), flag_, s_));
    return Status::Ok();
  }

  cudaStream_t s_;
  int* flag_;   // device: 1 once a watched result was not finite since the last Record
  int* slots_;  // page-locked, kSlots ints (Record)
  int next_slot_ = 0;
  Shared* shared_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<void*> retired_;   // earlier scratch blocks, freed with the stream
  std::vector<bool*> watchers_;  // callers to tell at the next Record's event
  // Stream::kCpuOptim's: its element-wise math runs on the host (OnHost).
  bool host_math_;
  std::vector<float> grad_;  // a 16-bit gradient widened for the host step
};

class CudaBackend : public Backend {
 public:
  CudaBackend(int device, std::unique_ptr<Shared> shared) : device_(device), shared_(std::move(shared)) {}
  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaDeviceSynchronize();
    for (auto& [bytes, p] : device_pool_) cudaFree(p);
    for (auto& [bytes, p] : host_pool_) cudaFreeHost(p);
    if (shared_->nccl != nullptr && !shared_->aborted) ncclCommDestroy(shared_->nccl);
  }
  std::string name() const override { return "cuda"; }
  bool HostAccessible(Tier t) const override { return t == Tier::kCpu; }

  // A caching allocator, as the host backend's: released blocks are kept by
  // size and handed out again, so a step allocates nothing once warm.
  // cudaMalloc and cudaFree synchronize the device, which would stall every
  // stream per op and can deadlock against an NCCL kernel whose peer waits
  // in MPI. Reuse is safe in stream order: the interpreter frees a buffer
  // only after the ops using it have synchronized (runner.cc, RunOp).
  Result<Memory> Allocate(Tier t, size_t bytes, bool zeroed) override {
    if (t == Tier::kNvme) return Status::Internal("the backend does not allocate NVMe memory");
    if (bytes == 0) return Memory();
    STRATA_CUDA(cudaSetDevice(device_));
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    void* p = Reuse(t, rounded);
    if (p == nullptr) {
      // CPU memory is page-locked: copies to and from the GPU run at the
      // link's rate and asynchronously (DeepSpeed's pin_memory).
      if (t == Tier::kGpu)
        STRATA_CUDA(cudaMalloc(&p, rounded));
      else
        STRATA_CUDA(cudaHostAlloc(&p, rounded, cudaHostAllocPortable));
    }
    Memory m(static_cast<std::byte*>(p), bytes, t,
             t == Tier::kGpu ? &CudaBackend::ReleaseDevice : &CudaBackend::ReleaseHost, this);
    if (zeroed && t == Tier::kGpu) {
      // Done before any stream sees the memory: the backend's streams are
      // non-blocking, nothing orders them after this thread's stream.
      STRATA_CUDA(cudaMemsetAsync(p, 0, bytes, cudaStreamPerThread));
      STRATA_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
    } else if (zeroed) {
      std::memset(p, 0, bytes);
    }
    return m;
  }
  // Pageable CPU memory (pin_memory off): page-aligned for O_DIRECT NVMe
  // I/O; the driver stages its copies to and from the GPU through its own
  // pinned buffers (synchronously for the host), as PyTorch's pageable
  // tensors are copied.
  Result<Memory> AllocatePageable(size_t bytes, bool zeroed) override {
    return AllocatePageableMemory(bytes, zeroed, "cuda backend");
  }
  Result<DeviceMemory> GpuMemory() override {
    STRATA_CUDA(cudaSetDevice(device_));
    DeviceMemory m;
    STRATA_CUDA(cudaMemGetInfo(&m.free, &m.total));
    return m;
  }
  Result<std::unique_ptr<DeviceStream>> NewStream(Stream kind) override {
    STRATA_CUDA(cudaSetDevice(device_));
    cudaStream_t s;
    STRATA_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int* flag = nullptr;
    int* slots = nullptr;
    cudaError_t e = cudaMalloc(&flag, sizeof(int));
    if (e == cudaSuccess) e = cudaMemset(flag, 0, sizeof(int));
    if (e == cudaSuccess) e = cudaDeviceSynchronize();  // the flag is clear before the stream's first kernel
    if (e == cudaSuccess) e = cudaHostAlloc(&slots, kSlots * sizeof(int), cudaHostAllocPortable);
    if (e != cudaSuccess) {
      cudaFree(flag);
      cudaStreamDestroy(s);
      return CudaError(e, "creating a stream's overflow flag", __FILE__, __LINE__);
    }
    std::memset(slots, 0, kSlots * sizeof(int));
    return std::unique_ptr<DeviceStream>(
        std::make_unique<CudaStream>(s, flag, slots, shared_.get(), kind == Stream::kCpuOptim));
  }
  // The device model (devmodel/) on cuBLAS and model_kernels.cu.
  Result<std::unique_ptr<Model>> NewModel(const Plan& p, const ModelOptions& o) override {
    STRATA_ASSIGN_OR_RETURN(auto k, NewCudaModelKernels(device_, this));
    return NewDeviceModel(p, o, std::move(k));
  }

 private:
  void* Reuse(Tier t, size_t rounded) {
    std::lock_guard<std::mutex> l(mu_);
    auto& pool = t == Tier::kGpu ? device_pool_ : host_pool_;
    auto it = pool.find(rounded);
    if (it == pool.end()) return nullptr;
    void* p = it->second;
    pool.erase(it);
    return p;
  }
  static void Keep(void* ctx, std::byte* p, size_t bytes, bool device) {
    auto* self = static_cast<CudaBackend*>(ctx);
    std::lock_guard<std::mutex> l(self->mu_);
    (device ? self->device_pool_ : self->host_pool_).emplace((bytes + 4095) / 4096 * 4096, p);
  }
  static void ReleaseDevice(void* ctx, std::byte* p, size_t bytes) { Keep(ctx, p, bytes, true); }
  static void ReleaseHost(void* ctx, std::byte* p, size_t bytes) { Keep(ctx, p, bytes, false); }

  std::mutex mu_;
  std::multimap<size_t, void*> device_pool_, host_pool_;  // released blocks by rounded size

  int device_;
  std::unique_ptr<Shared> shared_;
};

int NodeLocalRank() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::max(0, std::atoi(v));
  return Comm::World().rank();
}

}  // namespace

Result<std::unique_ptr<Backend>> NewCudaBackend(const CudaBackendOptions& o) {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0)
    return Status::Internal(std::string("no CUDA device: cudaGetDeviceCount: ") +
                            (e != cudaSuccess ? std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e)
                                              : std::string("0 devices")));
  Comm* comm = o.comm != nullptr ? o.comm : &Comm::World();
  // One GPU per rank: the rank's index on its node, from the launcher's
  // environment (torchrun's LOCAL_RANK, Open MPI's
  // OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, Slurm's
  // SLURM_LOCALID), modulo the devices this process sees; without one, the
  // world rank (mpirun's default mapping puts consecutive ranks on a node).
  const int device = o.device >= 0 ? o.device : NodeLocalRank() % devices;
  STRATA_CUDA(cudaSetDevice(device));
  auto shared = std::make_unique<Shared>();
  shared->device = device;
  shared->ranks = comm->size();
  shared->adam_threads = o.adam_threads > 0 ? o.adam_threads : UsableCores();
  if (comm->size() > 1) {
    // NCCL's bootstrap: rank 0's unique id, broadcast over MPI with its
    // status, so that a failure there ends every rank rather than leaving
    // the others in the broadcast.
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    ncclResult_t got = ncclSuccess;
    if (comm->rank() == 0) got = ncclGetUniqueId(&id);
    std::string msg(1 + sizeof id, '\0');
    msg[0] = got == ncclSuccess ? 'y' : 'n';
    std::memcpy(msg.data() + 1, &id, sizeof id);
    msg = comm->Broadcast(msg);
    if (msg.size() != 1 + sizeof id || msg[0] != 'y')
      return Status::Internal("ncclGetUniqueId failed on rank 0" +
                              (comm->rank() == 0 ? std::string(": NCCL ") + ncclGetErrorString(got) : std::string()));
    std::memcpy(&id, msg.data() + 1, sizeof id);
    STRATA_NCCL(ncclCommInitRank(&shared->nccl, comm->size(), id, comm->rank()));
  }
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, std::move(shared)));
}

}  // namespace strata::exec
