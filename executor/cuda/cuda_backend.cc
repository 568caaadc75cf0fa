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
// Not yet (issue #17): the model's kernels (the MLP and GPT forward and
// backward on cuBLAS); NewModel says so.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/kernels.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"

namespace strata::exec {
namespace {

Status CudaError(cudaError_t e, const char* call, const char* file, int line) {
  return Status::Internal(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                          cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
Status NcclError(ncclResult_t r, const char* call, const char* file, int line) {
  return Status::Internal(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": NCCL " +
                          ncclGetErrorString(r));
}
#define STRATA_CUDA(call)                                                      \
  do {                                                                         \
    const cudaError_t strata_e = (call);                                       \
    if (strata_e != cudaSuccess) return CudaError(strata_e, #call, __FILE__, __LINE__); \
  } while (0)
#define STRATA_NCCL(call)                                                      \
  do {                                                                         \
    const ncclResult_t strata_r = (call);                                      \
    if (strata_r != ncclSuccess) return NcclError(strata_r, #call, __FILE__, __LINE__); \
  } while (0)

int Fmt(Precision p) { return static_cast<int>(p); }  // kernels.h: Precision's values
constexpr ncclDataType_t kNcclByte = ncclUint8;

// What the backend's streams share: the device, the NCCL communicator (null
// with one rank) and its size.
struct Shared {
  int device = 0;
  ncclComm_t nccl = nullptr;
  int ranks = 1;
  std::mutex nccl_mu;  // NCCL calls on one communicator are issued in one order
};

// The overflow flag's trip to the host: at Record() the stream copies its
// device flag into one of these page-locked slots and clears the flag, both
// in stream order; the event owns the slot and the callers' bools that were
// watching, and sets them once synchronized (backend.h: a flag is visible
// after an event recorded after the call).
constexpr int kSlots = 64;

class CudaEvent : public Event {
 public:
  CudaEvent(cudaEvent_t e, int device, volatile int* slot, std::vector<bool*> watchers)
      : e_(e), device_(device), slot_(slot), watchers_(std::move(watchers)) {}
  ~CudaEvent() override { cudaEventDestroy(e_); }
  Status Synchronize() override {
    STRATA_CUDA(cudaSetDevice(device_));
    STRATA_CUDA(cudaEventSynchronize(e_));
    if (slot_ != nullptr && *slot_ != 0)
      for (bool* w : watchers_) *w = true;
    return Status::Ok();
  }

 private:
  cudaEvent_t e_;
  int device_;
  volatile int* slot_;  // null: nothing was watched
  std::vector<bool*> watchers_;
};

class CudaStream : public DeviceStream {
 public:
  CudaStream(cudaStream_t s, int* flag, int* slots, Shared* shared) : s_(s), flag_(flag), slots_(slots), shared_(shared) {}
  ~CudaStream() override {
    cudaSetDevice(shared_->device);
    cudaStreamSynchronize(s_);
    cudaFree(flag_);
    cudaFreeHost(slots_);
    cudaFree(scratch_);
    cudaStreamDestroy(s_);
  }
  // The current device is per thread: every thread issuing this stream's
  // work selects the backend's (each entry point does too: a caller may use
  // another thread).
  void OnWorkerThread() override { cudaSetDevice(shared_->device); }

  Status Copy(void* dst, const void* src, size_t bytes) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s_));
    return Status::Ok();
  }
  Status Zero(void* dst, size_t bytes) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_CUDA(cudaMemsetAsync(dst, 0, bytes, s_));
    return Status::Ok();
  }
  Status Accumulate(void* dst, const void* src, size_t n, Precision p, bool* overflow) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    Watch(overflow);
    STRATA_CUDA(cuda::Accumulate(dst, src, n, Fmt(p), flag_, s_));
    return Status::Ok();
  }
  Status FromFloat(void* dst, const float* src, size_t n, Precision p) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_CUDA(cuda::FromFloat(dst, src, n, Fmt(p), nullptr, s_));
    return Status::Ok();
  }
  Status ToFloat(float* dst, const void* src, size_t n, Precision p) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    STRATA_CUDA(cuda::ToFloat(dst, src, n, Fmt(p), s_));
    return Status::Ok();
  }

  Status AllGather(const void* src, void* dst, size_t bytes) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    if (shared_->nccl == nullptr) return Copy(dst, src, bytes);
    std::lock_guard<std::mutex> l(shared_->nccl_mu);
    STRATA_NCCL(ncclAllGather(src, dst, bytes, kNcclByte, shared_->nccl, s_));
    return Status::Ok();
  }
  Status ReduceScatter(const void* src, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
    const size_t ranks = static_cast<size_t>(shared_->ranks), eb = static_cast<size_t>(BytesPerElement(p));
    // Every rank's block for this one, in the plan's precision, in rank
    // order; then the fp32 sums, 256-byte aligned.
    const size_t sum_at = (n * ranks * eb + 255) / 256 * 256;
    auto blocks = Scratch(sum_at + n * 4);
    if (!blocks.ok()) return blocks.status();
    std::byte* gathered = *blocks;
    float* sum = reinterpret_cast<float*>(gathered + sum_at);
    if (shared_->nccl == nullptr) {
      STRATA_CUDA(cudaMemcpyAsync(gathered, src, n * eb, cudaMemcpyDefault, s_));
    } else {
      std::lock_guard<std::mutex> l(shared_->nccl_mu);
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
    auto scratch = Scratch(n * 4);
    if (!scratch.ok()) return scratch.status();
    float* sum = reinterpret_cast<float*>(*scratch);
    STRATA_CUDA(cuda::ToFloat(sum, src, n, Fmt(p), s_));
    if (shared_->nccl != nullptr) {
      std::lock_guard<std::mutex> l(shared_->nccl_mu);
      STRATA_NCCL(ncclAllReduce(sum, sum, n, ncclFloat32, ncclSum, shared_->nccl, s_));
    }
    STRATA_CUDA(cuda::Divide(sum, n, static_cast<float>(shared_->ranks), s_));
    return Finish(sum, dst, n, p, accumulate, overflow);
  }

  Status AdamStep(const AdamArgs& a, const AdamStepConsts& c) override {
    STRATA_CUDA(cudaSetDevice(shared_->device));
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
    return std::unique_ptr<Event>(std::make_unique<CudaEvent>(e, shared_->device, slot, std::move(watchers)));
  }

 private:
  void Watch(bool* overflow) {
    if (overflow != nullptr && (watchers_.empty() || watchers_.back() != overflow)) watchers_.push_back(overflow);
  }
  // A device workspace of at least `bytes`, reused in stream order (kept
  // until the stream goes).
  Result<std::byte*> Scratch(size_t bytes) {
    if (bytes > scratch_bytes_) {
      STRATA_CUDA(cudaStreamSynchronize(s_));  // the old one may still be read
      STRATA_CUDA(cudaFree(scratch_));
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      STRATA_CUDA(cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    return static_cast<std::byte*>(scratch_);
  }
  // The reduced fp32 values rounded into dst, or added into it.
  Status Finish(const float* sum, void* dst, size_t n, Precision p, bool accumulate, bool* overflow) {
    Watch(overflow);
    if (accumulate) STRATA_CUDA(cuda::AccumulateFloats(dst, sum, n, Fmt(p), flag_, s_));
    else STRATA_CUDA(cuda::FromFloat(dst, sum, n, Fmt(p), flag_, s_));
    return Status::Ok();
  }

  cudaStream_t s_;
  int* flag_;   // device: 1 once a watched result was not finite since the last Record
  int* slots_;  // page-locked, kSlots ints (Record)
  int next_slot_ = 0;
  Shared* shared_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<bool*> watchers_;  // callers to tell at the next Record's event
};

class CudaBackend : public Backend {
 public:
  CudaBackend(int device, std::unique_ptr<Shared> shared) : device_(device), shared_(std::move(shared)) {}
  ~CudaBackend() override {
    if (shared_->nccl != nullptr) ncclCommDestroy(shared_->nccl);
  }
  std::string name() const override { return "cuda"; }
  bool HostAccessible(Tier t) const override { return t == Tier::kCpu; }

  Result<Memory> Allocate(Tier t, size_t bytes, bool zeroed) override {
    if (t == Tier::kNvme) return Status::Internal("the backend does not allocate NVMe memory");
    if (bytes == 0) return Memory();
    STRATA_CUDA(cudaSetDevice(device_));
    void* p = nullptr;
    if (t == Tier::kGpu) {
      STRATA_CUDA(cudaMalloc(&p, bytes));
      Memory m(static_cast<std::byte*>(p), bytes, t, &CudaBackend::FreeDevice, nullptr);
      if (zeroed) {
        // Done before any stream sees the memory: the backend's streams are
        // non-blocking, nothing orders them after the default stream.
        STRATA_CUDA(cudaMemsetAsync(p, 0, bytes, cudaStreamPerThread));
        STRATA_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
      }
      return m;
    }
    // CPU memory is page-locked: copies to and from the GPU run at the
    // link's rate and asynchronously (DeepSpeed's pin_memory).
    STRATA_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    if (zeroed) std::memset(p, 0, bytes);
    return Memory(static_cast<std::byte*>(p), bytes, t, &CudaBackend::FreeHost, nullptr);
  }
  Result<std::unique_ptr<DeviceStream>> NewStream(Stream) override {
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
    return std::unique_ptr<DeviceStream>(std::make_unique<CudaStream>(s, flag, slots, shared_.get()));
  }
  Result<std::unique_ptr<Model>> NewModel(const Scenario& s, const Plan&, const ModelOptions&) override {
    return Status::InvalidArgument("the CUDA backend has no model kernels yet (the " +
                                   std::string(s.model.kind == ModelKind::kMlp ? "MLP" : "GPT") +
                                   "'s forward and backward on cuBLAS, issue #17): run with --backend host");
  }

 private:
  static void FreeDevice(void*, std::byte* p, size_t) { cudaFree(p); }
  static void FreeHost(void*, std::byte* p, size_t) { cudaFreeHost(p); }

  int device_;
  std::unique_ptr<Shared> shared_;
};

}  // namespace

Result<std::unique_ptr<Backend>> NewCudaBackend(const CudaBackendOptions& o) {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0)
    return Status::Internal(std::string("no CUDA device: cudaGetDeviceCount: ") +
                            (e != cudaSuccess ? std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e)
                                              : std::string("0 devices")));
  Comm* comm = o.comm != nullptr ? o.comm : &Comm::World();
  // One GPU per rank: mpirun's default mapping puts consecutive world
  // ranks on a node, so the world rank modulo the devices this process
  // sees is its local index when a node runs one rank per GPU. (The
  // node-local rank from MPI_COMM_TYPE_SHARED would not need that.)
  const int device = o.device >= 0 ? o.device : Comm::World().rank() % devices;
  STRATA_CUDA(cudaSetDevice(device));
  auto shared = std::make_unique<Shared>();
  shared->device = device;
  shared->ranks = comm->size();
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
