// The plan interpreter's state and steps (private to executor/runtime/):
// the Runner RunTraining drives, split by concern over runner.cc (the
// iteration, op scheduling, I/O), runner_state.cc (initial weights,
// checkpoints, the optimizer step, the end of an iteration),
// runner_ops.cc (an op's work: moves, staging, collectives, the model's
// calls) and runner_parallel.cc (pipeline boundaries, tensor-parallel
// collectives, tied tables, the digest). See runner.cc for the contract.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "io/codec.h"
#include "io/swap_codec.h"
#include "runtime/checkpoint.h"
#include "runtime/storage.h"
#include "runtime/stream_threads.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"
#include "strata/executor/env.h"
#include "strata/executor/runner.h"

namespace strata::exec::detail {

// A parameter group's low-precision home, or (FSDP2, which keeps none) its
// fp32 shard: the buffer whose stage holds the group.
inline BufferId HomeOf(const PlanParamGroup& g) { return g.home_buffer >= 0 ? g.home_buffer : g.master_buffer; }
// The groups whose all-gathers run in a sub-communicator of consecutive
// ranks (the Runner's hpz_): hpZ's secondary partition (ZeRO++) and FSDP2's
// post-forward shard (an integer reshard_after_forward).
inline bool IsSubGroupGather(const CommGroup& g) { return g.name == "hpz" || g.name == "fsdp_post_forward"; }

class Runner {
 public:
  // `dp`, `tp`: this rank's data-parallel and tensor-parallel groups (the
  // world, and null, without tensor or pipeline parallelism); `hpz`: its
  // hpZ group (ZeRO++), null without.
  Runner(const Plan& p, const RunOptions& o, Env* env, Backend* be, Comm* dp, Comm* tp, Comm* hpz = nullptr)
      : p_(p),
        o_(o),
        env_(env),
        be_(be),
        store_(p, env, be, o.nvme_dir, Comm::World().rank(), o.keep_swap_files),
        prec_(p.run.precision),
        lp_bytes_(BytesPerElement(p.run.precision)),
        dp_(dp),
        tp_(tp),
        hpz_(hpz) {}

  Result<RunResult> Run();

 private:
  // The busiest resource of this step as it ran: its busy time.
  // Each stream runs one op at a time, so it is a resource; when the
  // hardware says NVMe reads and writes share the device
  // (nvme.readwrite_bandwidth), the device is one resource, busy while
  // either direction is (the union of their spans).
  double BusiestResource() const;

  static Status Prefix(const Op& op, const Status& st);

  // One op: allocations, the work, frees; its span is recorded.
  Status RunOp(const Op& op, double t0);

  // Before the first step, after the store is open (runner.cc).
  Status Prepare();
  // Run `ops` (this stage's, in plan order), the rest of the plan's ops
  // taken as done.
  Status RunSequential(double t0, const std::vector<OpId>& ops);

  // A worker per stream (stream_threads_, the same threads every step); an
  // op starts when its deps are done (its stream predecessor is done by
  // construction). A finished op wakes only the workers whose next op it
  // may have unblocked (one condition variable per stream: waking all seven
  // on a two-core host delays the one that can run). The first error stops
  // everyone.
  Status RunParallel(double t0, const std::vector<OpId>& ops);
  // One step's ops. A delayed update (RunSpec::delayed_warmup) runs its
  // warm-up steps as ordinary ones (every other op, then the step's ops:
  // the step on this iteration's gradients), the step at the warm-up's end
  // without the step's ops, and later steps as planned (the step on the
  // gradients the previous step left).
  Status RunStep(int step, double t0);
  std::unique_ptr<StreamThreads> stream_threads_;  // started by Prepare when parallel

  DeviceStream& S(Stream s) { return *streams_[static_cast<int>(s)]; }
  Status Sync(Stream s);
  Status Io(IoRequest::Op kind, const Region& r, std::byte* mem, Stream stream);
  // Every NVMe transfer, on the stream's engine: under compression
  // (policy.compression) through the swap codec (swap_codec.h) with the
  // stream's codecs, then SubmitIo.
  Status RunIo(Stream stream, std::span<const IoRequest> io);
  // Requests on striped files (policy.stripe_paths) split over their parts,
  // then to the engine in batches whose requests share no 4 KiB block where
  // one writes, each through RunChecked.
  Status SubmitIo(IoEngine& engine, std::span<const IoRequest> io);
  // The engine, with the swap checksums (see swap_checksums.h) when the
  // options keep them, of the bytes the files hold: writes are hashed
  // before they are issued (their memory is stable until done), reads
  // checked before anything uses them.
  Status RunChecked(IoEngine& engine, std::span<const IoRequest> io);
  static constexpr uint64_t kCodecWindow = uint64_t{256} << 20;
  // Makes the swap codec and the streams' codecs (no codec: none).
  Status OpenCodecs();
  // Host bytes to and from a region, wherever it lives; done on return.
  // Used outside the iteration (initial weights, digest).
  Status HostToRegion(const Region& r, const std::byte* in);
  Status RegionToHost(const Region& r, std::byte* out);

  // The starting state: the model's initial weights, or a checkpoint's
  // weights, moments, step counters and loss scaler.
  Status Init(RunResult& r);
  // Refuses (or with overwrite_checkpoints empties) a checkpoint directory
  // holding checkpoints this run does not resume from.
  Status ClaimCheckpointDir();

  // This rank's share of the optimizer state: group segments and the
  // regions of master, exp_avg and exp_avg_sq holding each (stages 1-2: its
  // slice of the flat buffer; else its partition of each group, or all of
  // it unpartitioned, which only rank 0 reports when every rank holds a
  // replica).
  struct OwnSegment {
    StateSegment seg;
    Region master, exp_avg, exp_avg_sq;
  };
  std::vector<OwnSegment> OwnSegments() const;

  // Writes a checkpoint after `steps` steps (every rank, collectively).
  Status Save(RunResult& r, int steps);

  // Initial weights: the model's (the seed alone: the same whatever the
  // placement) or a checkpoint's, written where the plan keeps them.
  Status InitWeights(const std::vector<std::vector<float>>* from);

  Status Execute(const Op& op);
  static bool SharesBlock(const IoRequest& a, const IoRequest& b);
  // An op's file transfers on its stream's engine (RunIo), its write
  // requests counted as the engine cuts them.
  Status RunBatches(const Op& op, std::span<const IoRequest> io);
  // A coalesced NVMe write (write buffering; write_requests.h): its runs in
  // aio-block requests, a request of several moves' bytes gathered first.
  Status CoalescedWrite(const Op& op);

  // Scratch memory in buffer b's tier for op's stream work, valid until the
  // op has synchronized (RunOp releases it then).
  Result<std::byte*> Temporary(const Op& op, BufferId b, size_t bytes);

  // Collectives on memory buffers (see DeviceStream: reductions sum in fp32,
  // average over the ranks and round to the plan's precision).
  Status Collective(const Op& op, const Move& m);

  // NVMe traffic goes between a file and memory the host can address (the
  // planner stages it through CPU memory): returned as a request for the
  // op's engine batch. The rest is the stream's copy or accumulation
  // (returned request with no file).
  Result<IoRequest> DoMove(const Op& op, const Move& m);

  // A copy between the GPU and pageable CPU memory, as CUDA makes it: chunk
  // by chunk through a pinned staging buffer (the stream's, reused in
  // stream order), one more pass over the bytes. Accumulating moves add
  // from the staging buffer into the destination (a pageable one on the
  // host: the CUDA backend's OnHost).
  Status StagedCopy(std::byte* dst, const std::byte* src, size_t bytes, bool accumulate, Stream stream);
  // n 16-bit values widened to fp32 into pageable memory: each chunk widened
  // into the staging buffer by the stream, then copied over.
  Status StagedWiden(float* dst, const std::byte* src, size_t n, Stream stream);
  // The stream's pinned staging buffer (allocated at first use).
  Status Staging(Stream stream, std::byte** at);

  ModuleArgs Args(const Op& op);
  Status Forward(const Op& op);
  // The loss is read after the op's event (the model accumulates into it).
  Status Backward(const Op& op);

  Status Step(const Op& op);

  // Gradients start from zero each iteration (but a delayed update's
  // pending ones); the loss scale moves as DeepSpeed's dynamic scaler does
  // (fp16 only). Returns whether the optimizer applied gradients this step.
  Result<bool> EndIteration(RunResult& r);

  // Message tags: a boundary's by micro step and direction (MPI keeps the
  // order of messages with one tag between two ranks, so wrapping is safe);
  // the tied tables' gradients and the digest's groups apart from them.
  static constexpr int kTiedTag = 16384, kDigestTag = 16385;

  // A stage boundary's activations or their gradient (plan.h: a send or
  // receive without moves), between the workload and the rank at this
  // rank's position in the peer stage. The host workloads keep activations
  // in fp32 and send them so (the plan counts them in its precision, as
  // Megatron sends them): a pipeline computes what one stage would, bit for
  // bit. The send returns once posted (Comm::Send), the receive once here.
  Status Boundary(const Op& op);

  // A tensor-parallel collective on the workload's activation (plan.h,
  // Operand): summed over the tensor-parallel group in fp32 (the host
  // workloads keep activations in fp32; the plan counts its precision).
  Status TensorCollective(const Op& op);
  // hpZ's allgather of a secondary partition, in its group (through host
  // memory, as the tied transfers go).
  Status HpzGather(const Op& op);
  // A compute op's copies after its work (hpZ's secondary partition, on
  // the rank its move names).
  Status ComputeMoves(const Op& op);

  // A tied table's gradient between the first and the last stage (moves on
  // the gradient buffer, plan.h): sent whole; the peer's added into ours
  // (received into a block of the destination's tier: Accumulate works on
  // stream memory).
  Status TiedTransfer(const Op& op);

  // Every rank's spans of one step (`mine`, begun at `t0` on this process's
  // clock), for the timeline; this rank's alone on one rank. On one host the
  // ranks' steady clocks are one clock: each rank's spans are shifted by how
  // much later than the earliest rank it began the step, so the timeline
  // shows how far apart the ranks ran. Across hosts each rank's spans stay
  // at its own start (the step begins after the previous step's loss
  // all-reduce, so the starts differ by that collective's exit skew).
  Result<std::vector<OpSpan>> GatherSpans(std::vector<OpSpan> mine, double t0);

  // SHA-256 of the fp32 master weights, group by group in the model's
  // order, partitions gathered in data-parallel rank order without padding:
  // the same for any data-parallel and pipeline layout of the ranks (with
  // tensor parallelism, each group's shards in tensor-parallel rank order). Pipeline stages send their groups
  // to rank 0; a table two stages hold (tied) counts once (the copies are
  // the same: their gradients are summed before either steps).
  Result<std::string> Digest();

  const Plan& p_;
  RunOptions o_;
  Env* env_;
  Backend* be_;
  BufferStore store_;
  // The checkpoint directory's lock, held for the run when it saves: two
  // runs never write one directory.
  std::unique_ptr<FileLock> checkpoint_lock_;
  Precision prec_;
  int64_t lp_bytes_;
  std::unique_ptr<IoEngine> engines_[kNumStreams];
  std::unique_ptr<SwapCodec> swap_codec_;  // policy.compression, or null
  // Each stream's codecs, one per compression thread, with swap_codec_.
  std::vector<std::unique_ptr<Codec>> codecs_[kNumStreams];
  std::unique_ptr<DeviceStream> streams_[kNumStreams];
  Memory bounce_[kNumStreams];  // pinned staging for pageable copies, per stream (StagedCopy)
  // Non-finite values seen by each stream's ops (its worker's only).
  bool overflow_seen_[kNumStreams] = {};
  std::unique_ptr<Model> model_;  // used by the compute stream only
  std::mutex span_mu_;
  std::vector<OpSpan> spans_;
  double loss_sum_ = 0;
  std::vector<Memory> temps_[kNumStreams];  // an op's scratch blocks (Temporary), per stream
  std::atomic<bool> overflow_{false};
  std::atomic<int64_t> nvme_write_requests_{0};  // this step's (RunResult::nvme_write_requests)
  std::mutex overflow_mu_;                       // guards overflow_agreed_ (Step runs on several streams)
  bool overflow_agreed_ = false;
  Comm* comm_ = nullptr;
  Comm* dp_;   // the data-parallel group's communicator
  Comm* tp_;   // the tensor-parallel group's (null without tensor parallelism)
  Comm* hpz_;  // hpZ's group (null without)
  int rank_ = 0;
  int stage_ = 0;            // this rank's pipeline stage
  int drank_ = 0;            // its index in its data-parallel group
  int dsize_ = 1;            // the group's size
  std::vector<OpId> ops_;    // this stage's ops, in plan order
  std::vector<int> groups_;  // this stage's parameter groups
  int64_t flat_ = 0;         // this stage's flat partition (stages 1-2), else 0
  float scale_ = 1.0f;
  int64_t adam_steps_ = 0;
  int good_steps_ = 0;
  int saves_ = 0;
  // Delayed update: the ops of phase step (step_ops_) and the rest
  // (rest_ops_); whether this step's optimizer applies the previous step's
  // gradients (delayed_now_), which overflowed or not (pending_overflow_)
  // at which loss scale (pending_scale_); whether any step op applied
  // gradients this step (applied_).
  std::vector<OpId> step_ops_, rest_ops_;
  // The steps' gradient buffer under a delayed update (-1 without): it
  // keeps the pending gradients from one step to the next, not zeroed, its
  // memory swapped with RunSpec::delayed_grads' after the backward filled
  // that (delayed_grads is zeroed as any resident gradient).
  BufferId pending_grads_ = -1;
  bool delayed_now_ = false;
  bool step_ran_ = true;  // the step's ops ran this step (all but a delayed update's step N)
  bool pending_overflow_ = false;
  float pending_scale_ = 1.0f;
  std::atomic<bool> applied_{false};

 public:
  void SetScale(float s) { scale_ = s; }
};

}  // namespace strata::exec::detail
