// The plan: one training iteration as plain data. It is the single contract
// between the scheduler and its consumers (simulator, executor, GUI); when a
// consumer needs more, the plan grows here, with tests.
//
// SPMD contract. A plan is the program of every rank: all `world_size` ranks
// run the same ops on their own partitions (ZeRO pads partitions so they are
// equal). GPU-tier bytes are per rank; CPU and NVMe tiers are per node, so a
// node holds gpus_per_node copies of each rank's CPU/NVMe buffers.
//
// Pipeline stages (Plan::pipeline > 1). Stages run different layers, so the
// plan holds every stage's program: each op and buffer names its `stage`,
// and the ranks of stage s (Plan::StageOf) run the ops of stage s on the
// buffers of stage s, SPMD among themselves. Streams are per rank, so "the
// op before it on the same stream" is the one before it of the same stage.
// The only dependencies between stages are point-to-point transfers: a
// kRecv op depends on its kSend (of the neighbouring stage), which it
// names in `deps`. One list keeps one contract: ids, deps, the JSON and
// the validator stay as they are, and with pipeline 1 every op is stage 0.
//
// Ordering contract. An op may start when every op in `deps` has ended and the
// op before it on the same stream has started *and* ended (streams are FIFO
// queues, like CUDA streams). Ops are listed in a valid sequential order: a
// single thread running them in list order respects both rules.
//
// Memory contract. Buffers in `Plan::buffers` with `resident` set exist for
// the whole iteration (steady state between iterations). Every other buffer
// is allocated when the op listing it in `allocs` starts and freed when the op
// listing it in `frees` ends. `reads`/`writes` name the buffers an op touches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/fsdp.h"
#include "strata/core/gpu_cost.h"
#include "strata/core/tier.h"
#include "strata/core/units.h"
#include "strata/plan/run_spec.h"

namespace strata {

using OpId = int32_t;
using BufferId = int32_t;

enum class OpKind {
  kForward,        // compute: forward of one module
  kBackward,       // compute: backward (and recomputation) of one module
  kCopyH2D,        // host -> device copy over PCIe
  kCopyD2H,        // device -> host copy over PCIe
  kNvmeRead,       // NVMe -> host memory
  kNvmeWrite,      // host memory -> NVMe
  kAllGather,      // collective over `group`; bytes = gathered (full) size
  kReduceScatter,  // collective over `group`; bytes = input (full) size
  kAllReduce,      // collective over `group`; bytes = buffer size
  kOptimizerStep,  // Adam on one sub-group; on GPU (stream compute) or CPU (stream cpu_optim)
  kSend,           // point-to-point: `bytes` to the same-position rank of stage `peer_stage`
  kRecv,           // point-to-point: the matching receive; deps name its kSend
  kHook,           // host time of the modelled framework (stream host): ZeRO-3's module hooks
};
inline constexpr int kNumOpKinds = 13;

// kHost is the training loop's host thread (Python, in the frameworks Strata
// models): its ops take `host_seconds` and move nothing; what the host
// issues after one depends on it (the planner's Emitter).
enum class Stream { kCompute, kH2D, kD2H, kNvmeRead, kNvmeWrite, kComm, kCpuOptim, kHost };
inline constexpr int kNumStreams = 8;

enum class Phase { kForward, kBackward, kStep };
inline constexpr int kNumPhases = 3;

// The activation a tensor-parallel collective without moves acts on (the
// workload keeps activations, not the plan's buffers): its module's input
// or output in the forward (a recomputation's too), or their gradients in
// the backward. Megatron's row-parallel output is all-reduced (kOutput),
// a column-parallel input gradient too (kInputGrad); under sequence
// parallelism the input is gathered (kInput) and the output gradient
// (kOutputGrad).
enum class Operand { kNone, kInput, kOutput, kInputGrad, kOutputGrad };
inline constexpr int kNumOperands = 5;
std::string_view OperandName(Operand o);
bool ParseOperand(std::string_view s, Operand* out);

// What a buffer holds: the categories a memory timeline stacks.
enum class StateKind {
  kParam16,       // low-precision parameters (partition or persistent copy)
  kGrad,          // gradients (accumulated partition or replica)
  kMaster32,      // fp32 master parameters
  kMoments,       // Adam first and second moments
  kActivation,    // saved activations and checkpoints
  kSwapBuffer,    // pinned swap / staging buffers (NVMe and PCIe)
  kGatherBuffer,  // gathered full parameters (prefetch)
  kCommBuffer,    // gradient buckets awaiting reduction
};
inline constexpr int kNumStateKinds = 8;

// Estimator categories: model states, activations, buffers.
enum class StateCategory { kModelStates, kActivations, kBuffers };
StateCategory CategoryOf(StateKind k);

std::string_view OpKindName(OpKind k);
std::string_view StreamName(Stream s);
std::string_view PhaseName(Phase p);
std::string_view StateKindName(StateKind k);
// Parse the names above; false when unknown.
bool ParseOpKind(std::string_view s, OpKind* out);
bool ParseStream(std::string_view s, Stream* out);
bool ParsePhase(std::string_view s, Phase* out);
bool ParseStateKind(std::string_view s, StateKind* out);

// Link classes of the traffic an op generates (for summaries).
enum class LinkClass { kNone, kH2D, kD2H, kNvmeRead, kNvmeWrite, kCollective, kP2P };
inline constexpr int kNumLinkClasses = 7;
LinkClass LinkClassOf(OpKind k);
std::string_view LinkClassName(LinkClass c);

struct Buffer {
  BufferId id = 0;
  std::string name;
  Tier tier = Tier::kGpu;
  StateKind kind = StateKind::kParam16;
  Bytes bytes;
  bool resident = false;
  // CPU memory only: page-locked (DeepSpeed's pin_memory). A copy between
  // the GPU and pageable memory goes through a pinned staging buffer (as
  // CUDA's does): one more pass over the bytes by the CPU.
  bool pinned = true;
  // False: memory the modelled system holds but no op of the plan reads or
  // writes (DeepSpeedCPUAdam's pinned double buffer): counted in its tier by
  // the estimator, the validator, the timeline and the executor's capacity
  // check like any buffer, never allocated by an executor. Resident, and
  // named by no op (the validator's "unbacked").
  bool backed = true;
  int stage = 0;  // the pipeline stage whose ranks hold it
  // Transient buffers only: zero when allocated. A transient buffer's bytes
  // are undefined until an op writes them, unless it is `cleared`; the
  // planner clears exactly those in which an op reads bytes that no op
  // wrote since the allocation (fresh_bytes.h: an accumulation into a
  // fresh accumulator, a gather from a partition filled rank by rank), and
  // the validator refuses a plan that reads such bytes of a buffer not
  // cleared ("unwritten_read"). Resident buffers are zero before the first
  // op (executors allocate them once), and resident gradients after each
  // iteration's optimizer step (the optimizer's zero_grad).
  bool cleared = false;
  // NVMe only: which of RunSpec::nvme_dirs holds its swap file (-1 on the
  // other tiers); under striping (RunSpec::striped), its first unit.
  int nvme_dir = -1;
  bool operator==(const Buffer&) const = default;
};

// A byte range of a buffer. kOpOutput stands for the op's own result (the
// optimizer's new low-precision parameters of its tile).
inline constexpr BufferId kOpOutput = -2;
struct Region {
  BufferId buffer = -1;
  Bytes offset;
  Bytes bytes;
  bool valid() const { return buffer != -1; }
  Bytes end() const { return offset + bytes; }
  bool operator==(const Region&) const = default;
};

// What a data-moving op does with bytes (the executor's contract). Elements
// are in the plan's low-precision format except fp32 optimizer state.
//  - copies and NVMe I/O: dst = src (same size); with `accumulate`,
//    dst += src elementwise (gradients).
//  - allgather: src is this rank's shard, dst the whole: dst's r-th shard is
//    rank r's src.
//  - reduce_scatter: src is the whole, dst this rank's shard of the sum over
//    ranks (+= with `accumulate`).
//  - allreduce: dst = the sum over ranks of src (src and dst may coincide).
//  - with `widen` (copies and reduce-scatters): src holds low-precision
//    elements and dst receives them as fp32 (dst.bytes = 4 / element size
//    x src.bytes, a reduce-scatter's shard of the low-precision sum), as
//    DeepSpeed's upcast of gradients for the fp32 optimizer and FSDP2's
//    cast of the reduce output to the parameter's dtype; exact.
//  - with `narrow` (allgathers only): src holds fp32 elements (this rank's
//    fp32 shard), cast to the low precision as they are copied in (dst.bytes
//    = ranks x element size / 4 x src.bytes): FSDP2's all-gather copy-in,
//    which rounds as the optimizer's low-precision output does.
//  - optimizer_step: src.buffer is kOpOutput and src.offset the byte offset
//    in the tile's low-precision output; dst is where it goes.
//  - forward and backward: copies after the op's work, dst = src (hpZ's
//    secondary partition, each rank's slice of the gathered whole: moves
//    naming ranks).
//  - send: src goes to the peer stage's rank (dst unset); recv: dst
//    receives what the matching send's move of the same index sent (+= with
//    `accumulate`; src unset). A send or receive without moves carries
//    bytes the workload passes itself (a stage boundary's activations).
// Regions are the same on every rank (the plan is SPMD), except for moves
// naming a `rank` (DeepSpeed's stages 1-2 cut one flat buffer across ranks,
// so what a rank owns depends on the rank; see Plan::flat_partition):
//  - copies, NVMe I/O, optimizer outputs and compute ops' copies: the move
//    runs on that rank only
//    (the op moves nothing on a rank none of its moves names);
//  - allgather: that rank's contribution (its shard); each rank runs the
//    collective once, with its own move;
//  - allreduce: a reduction to that rank: every rank contributes src, only
//    `rank` stores the sum into dst (DeepSpeed's bucket all-reduce of which
//    each rank keeps the slices it owns).
struct Move {
  Region src, dst;
  bool accumulate = false;
  bool widen = false;
  int rank = -1;  // -1: every rank
  bool narrow = false;
  bool operator==(const Move&) const = default;
};

struct Op {
  OpId id = 0;
  std::string name;
  OpKind kind = OpKind::kForward;
  Stream stream = Stream::kCompute;
  Phase phase = Phase::kForward;
  int micro_step = 0;
  int module = -1;  // index into Plan::modules, -1 if none
  // The module's layer, -1 if none. A stage boundary's send or receive
  // (no moves): the last layer before the boundary, whose output (phase
  // forward) or the gradient of it (phase backward) crosses.
  int layer = -1;
  double flops = 0;  // compute and optimizer ops
  // kHook: the host's time in it (the planner's model of the framework's
  // host work, docs/fidelity.md "ZeRO-3's hooks"); 0 for every other kind.
  double host_seconds = 0;
  Bytes bytes;  // bytes moved (copies, I/O, collectives) or touched (optimizer)
  // GPU-memory traffic (bytes read plus bytes written) of side kernels the
  // op's stream runs around its main work, charged at gpu.hbm_bandwidth
  // (op_cost.h OpCopySeconds): a collective's copy, fill and scale kernels
  // (flattening a bucket or a list of views, copying results back out,
  // pre-dividing gradients), after the transfer; a compute op's (DeepSpeed
  // v0.5's debug norms of the module's parameters); a copy's, after its
  // DMA (stage 2's add of the CPU gradient accumulator; like `bytes`, the
  // mean rank's when the moves name ranks, each rank's in proportion to
  // its own bytes). 0: none.
  Bytes copy_bytes;
  // Collectives moving their data quantized (ZeRO++: 8 bits for qwZ's
  // parameters, 4 for qgZ's gradients; `bytes` then counts the quantized
  // data and its fp32 scales); 0: in the plan's formats. Strata's executor
  // refuses them.
  int quant_bits = 0;
  // NVMe writes under write buffering (policy.write_buffer): the moves
  // whose destinations meet in one buffer are written as one run
  // (write_requests.h), not each on its own.
  bool coalesce = false;
  // NVMe reads and writes under compression (RunSpec::compression): the
  // planned stored / raw bytes of the op's traffic, its moves' ratios
  // (codec_profile.h PlannedRatio, by each NVMe buffer's element size)
  // weighted by their bytes; 1 on every other op and without a codec. The
  // drive moves bytes x stored; the host runs the codec over all of them.
  double stored = 1;
  // Backward: bit k set stores the gradient of group k into grads[k] (=)
  // instead of adding it (+=): the region holds no earlier gradient (a
  // fresh slot of an IPG bucket, a new gradient buffer), as DeepSpeed
  // copies a fresh param.grad into its bucket. Groups past the 32nd always
  // add.
  uint32_t grads_store = 0;
  Elements elements;                 // optimizer: parameters stepped
  int group = -1;                    // collectives: index into Plan::groups
  int stage = 0;                     // the pipeline stage whose ranks run it
  int peer_stage = -1;               // kSend/kRecv: the stage on the other end
  Operand operand = Operand::kNone;  // tensor-parallel collectives (group "tp"): what they act on
  std::vector<OpId> deps;
  std::vector<BufferId> allocs;  // allocated when the op starts
  std::vector<BufferId> frees;   // freed when the op ends
  std::vector<BufferId> reads;
  std::vector<BufferId> writes;
  // Data layout (the executor's contract).
  std::vector<Move> moves;  // data-moving ops, and the optimizer's outputs
  // Compute: the module's low-precision parameters, one region per group of
  // PlanModule::param_groups, in that order (the module computes on them
  // as if they were back to back); backward: where each group's gradient is
  // accumulated (+=; stored, =, where grads_store says), in the same order.
  // A gradient region longer than its group is a padded slot (stage 3 pads
  // each group to a multiple of the ranks): the gradient fills its first
  // elements, and a store writes zeros over the rest. Empty when the module has none.
  std::vector<Region> params;
  std::vector<Region> grads;
  // optimizer_step: the tile is flat elements [flat_begin, flat_begin +
  // elements) of this rank's partition; fp32 master weights, moments and the
  // gradient are read (and the first three updated) here. The gradient is
  // fp32 when grad_in.bytes = 4 x elements (offload_optimizer in stage 3),
  // else in the plan's low precision.
  int64_t flat_begin = 0;
  Region master, exp_avg, exp_avg_sq, grad_in;
  bool operator==(const Op&) const = default;
};

// A kind of communication group ("dp": ZeRO's data-parallel group; "tp":
// the tensor-parallel group). `ranks` is rank 0's group: 0, stride, 2
// stride, ... (core/parallel.h: Megatron's rank order); every rank belongs
// to one group of the kind, the same shape shifted (RanksOf). A collective
// naming the group runs in every rank's own group at once.
struct CommGroup {
  std::string name;
  std::vector<int> ranks;
  bool operator==(const CommGroup&) const = default;
  int size() const { return static_cast<int>(ranks.size()); }
  int stride() const { return ranks.size() > 1 ? ranks[1] - ranks[0] : 1; }
  // r's position in its group, and its group's ranks, ascending.
  int IndexOf(int rank) const { return (rank / stride()) % size(); }
  std::vector<int> RanksOf(int rank) const;
  // The rank after r in its group's ring (r itself in a group of one).
  int Next(int rank) const { return rank + (IndexOf(rank) + 1 == size() ? 1 - size() : 1) * stride(); }
  int Prev(int rank) const { return rank + (IndexOf(rank) == 0 ? size() - 1 : -1) * stride(); }
};

// A parameter group (one parameter tensor) as partitioned by ZeRO (the
// executor's layout). Stages
// 1-2 (Plan::flat_partition > 0) do not partition groups: partition_elements
// is the whole group, flat_offset its offset in the whole flat buffer, and
// master_offset the start of the rank's fp32 partition (the same for every
// group), which holds flat elements [r S, (r+1) S).
struct PlanParamGroup {
  std::string name;
  Elements elements;            // unpartitioned
  Elements partition_elements;  // per rank, padded; equals elements when not partitioned
  Elements flat_offset;         // offset of this rank's partition in the flat per-rank partition
  bool persistent = false;      // full copy kept on every GPU (stage3 persistence threshold)
  Tier home = Tier::kGpu;       // where the low-precision partition lives between uses
  // Offset of its low-precision copy in its home buffer: the replica (stages
  // 0-2: the whole group), the persistent buffer (the whole group) or the
  // partition buffer of its home tier (this rank's partition).
  Bytes home_offset;
  BufferId home_buffer = -1;  // that buffer
  // Where this rank's fp32 master partition of the group lives (its
  // optimizer sub-group's tier: GPU, CPU or NVMe).
  BufferId master_buffer = -1;
  Bytes master_offset;
  // Where its Adam moments live, laid out as the master (same tier, same
  // element order): what a checkpoint saves and a resume restores.
  BufferId exp_avg_buffer = -1;
  Bytes exp_avg_offset;
  BufferId exp_avg_sq_buffer = -1;
  Bytes exp_avg_sq_offset;
  bool operator==(const PlanParamGroup&) const = default;
};

struct PlanModule {
  std::string name;
  int layer = -1;
  std::vector<int> param_groups;  // its parameter tensors, in order
  double fwd_flops = 0;
  // Its kernels forward (also a recomputation) and backward, as the
  // roofline compute model charges them (core/gpu_cost.h): GEMM shapes and
  // memory-bound bytes. A compute op of the module is its fwd (kind
  // forward) or bwd (kind backward).
  KernelWork fwd, bwd;
  bool operator==(const PlanModule&) const = default;
};

// What the planner's parameter caches did (scenario "policy" section).
// Accesses are uses of fetched parameter groups not kept by reuse distance;
// the CPU tier sees the GPU misses of NVMe-homed groups. Fetch bytes are the
// parameter traffic of the plan (NVMe reads, H2D copies and allgathers of
// parameters); compulsory bytes are the same for each group fetched once.
struct CacheStats {
  std::string eviction;  // policy name
  Bytes gpu_capacity, cpu_capacity;
  int64_t gpu_accesses = 0, gpu_hits = 0;
  int64_t cpu_accesses = 0, cpu_hits = 0;
  Bytes fetch_nvme_read, fetch_h2d, fetch_allgather;
  Bytes compulsory_nvme_read, compulsory_h2d, compulsory_allgather;
  // The most parameter reads from NVMe that Strata's window prefetch
  // (policy.prefetch: window) keeps in flight at once: issued, their
  // module not yet computed. Each needs a swap buffer (offload_param.
  // buffer_count). 0 under DeepSpeed's coordinator, which reads ahead only
  // into free swap buffers.
  int64_t window_nvme_reads = 0;
  bool operator==(const CacheStats&) const = default;
};

struct Plan {
  std::string scenario;
  // Whose schedule it is: DeepSpeed ZeRO (zero_stage) or PyTorch FSDP2
  // (zero_stage 3: parameters, gradients and optimizer states sharded; each
  // parameter group's partition is its rows cut over the ranks, padded,
  // partition_elements = ceil(rows / ranks) x row elements; docs/fsdp.md).
  Framework framework = Framework::kDeepSpeed;
  int world_size = 1;
  int nodes = 1;
  int gpus_per_node = 1;
  int zero_stage = 0;
  int micro_steps = 1;
  int pipeline = 1;  // pipeline stages; ranks of stage s: StageOf
  // With pipeline > 1: stage s holds the whole model's layers
  // [stage_layers[s], stage_layers[s + 1]) (pipeline + 1 entries), and its
  // flat_partition is stage_flat_partition[s] (flat_partition is stage 0's).
  std::vector<int> stage_layers;
  std::vector<Elements> stage_flat_partition;
  // Stages 1-2 (DeepSpeed's stage_1_and_2.py): the low-precision replica is
  // one flat buffer of every group whole, in order, padded to a multiple of
  // 2 x world_size elements; rank r owns its elements [r x flat_partition,
  // (r + 1) x flat_partition), which may cut groups. The fp32 master,
  // moments and gradient partitions hold those elements. 0: each group is
  // partitioned on its own (stage 3; stage 0 has no partition).
  Elements flat_partition;
  Bytes capacity[kNumTiers];  // gpu per rank; cpu, nvme per node
  // Of the GPU's memory, what the process holds outside its tensors
  // (hardware.gpu.reserved_memory: the CUDA context and its kernels),
  // already taken out of capacity[kGpu]; reports name it
  // (GpuReservedNote).
  Bytes gpu_reserved;
  // Model facts consumers report against (so they need not re-derive them).
  Elements total_params;
  double model_flops = 0;             // per rank per iteration: 3x forward, no recomputation
  int64_t samples_per_iteration = 0;  // global
  int64_t tokens_per_sample = 0;
  std::vector<PlanParamGroup> param_groups;
  std::vector<PlanModule> modules;
  CacheStats cache;
  std::vector<CommGroup> groups;  // [0] "dp" (ZeRO's); "tp" with tensor, "pp" with pipeline parallelism
  std::vector<Buffer> buffers;    // id == index
  std::vector<Op> ops;            // id == index
  RunSpec run;                    // what an executor needs besides (run_spec.h)

  bool operator==(const Plan&) const = default;
  // Bytes of `tier` for one node, given one rank's bytes.
  int64_t NodeScale(Tier t) const { return t == Tier::kGpu ? 1 : gpus_per_node; }
  // A rank's index in ZeRO's data-parallel group (groups[0]): what moves
  // naming a `rank` (stages 1-2's flat partition) mean by it.
  int DataRank(int rank) const { return groups.empty() ? rank : groups[0].IndexOf(rank); }
  int data_parallel() const { return groups.empty() ? world_size : groups[0].size(); }
  // The pipeline stage of a rank: pipeline is the outermost axis (Megatron's
  // order, core/parallel.h), world / pipeline consecutive ranks per stage.
  int StageOf(int rank) const { return rank / (world_size / pipeline); }
  int RanksPerStage() const { return world_size / pipeline; }
  int tensor_parallel() const { return world_size / std::max(1, pipeline * data_parallel()); }
  // "tensor 4 x data 128" (the axes above 1, pipeline between; "data 1"
  // on one rank): how the world is laid out, for reports' headers.
  std::string LayoutText() const {
    std::string out;
    for (auto [name, n] : {std::pair<const char*, int>{"tensor", tensor_parallel()}, {"pipeline", pipeline}})
      if (n > 1) out += std::string(name) + " " + std::to_string(n) + " x ";
    return out + "data " + std::to_string(data_parallel());
  }
  // The rank at r's position in stage `stage` (a kSend's receiver).
  int PeerRank(int rank, int stage) const { return rank + (stage - StageOf(rank)) * RanksPerStage(); }
  // Buffer b's swap directory (RunSpec::nvme_dirs[b.nvme_dir]); "" when
  // the plan names none (b not on NVMe, or no nvme_path given).
  const std::string& SwapDirOf(const Buffer& b) const;
};

// Streams are per rank, so per stage: op's stream among the plan's
// pipeline x kNumStreams (stream order is the list order within a slot).
inline size_t StreamSlot(const Op& op) {
  return static_cast<size_t>(op.stage) * kNumStreams + static_cast<size_t>(op.stream);
}
inline size_t StreamSlots(const Plan& plan) {
  return static_cast<size_t>(plan.pipeline > 1 ? plan.pipeline : 1) * kNumStreams;
}

inline bool IsPointToPoint(OpKind k) { return k == OpKind::kSend || k == OpKind::kRecv; }
inline bool IsCollective(OpKind k) {
  return k == OpKind::kAllGather || k == OpKind::kReduceScatter || k == OpKind::kAllReduce;
}

// True for a move of an H2D or D2H copy whose CPU side (an H2D's source, a
// D2H's destination) is a pageable buffer (Buffer::pinned false): its bytes
// pass through a pinned staging buffer first. IsPageableCopy: any of the
// op's moves is.
bool IsPageableMove(const Plan& plan, const Op& op, const Move& m);
bool IsPageableCopy(const Plan& plan, const Op& op);

// Fresh pages. A transient (not resident) pageable CPU buffer of at least
// kFreshMappingBytes that an op allocates is a new mapping every iteration:
// PyTorch's CPU allocator keeps no cache (c10 alloc_cpu: posix_memalign and
// free) and glibc serves blocks that large with mmap and returns them with
// munmap (malloc.c: DEFAULT_MMAP_THRESHOLD_MAX, 4 x 1024 x 1024 x
// sizeof(long) on 64-bit; its dynamic threshold never rises above it).
// DeepSpeed's blocking CPU checkpoints are such buffers (checkpointing.py:
// new_empty(..., device='cpu') each forward, dropped in the backward).
// FreshPageBytes: the bytes of such buffers `op` allocates and its moves on
// data-parallel rank `rank` write (a D2H's destinations; each buffer whole,
// once: DeepSpeed touches every page of the new buffer before the copy),
// whose pages the host faults in on first touch
// (hardware.cpu.page_fault_time per 4 KiB); rank -1: every rank's.
inline constexpr int64_t kFreshMappingBytes = int64_t{32} << 20;
inline constexpr int64_t kHostPageBytes = 4096;
// Whether `b` is such a buffer: transient pageable CPU memory of at least
// kFreshMappingBytes.
inline bool IsFreshMapping(const Buffer& b) {
  return b.tier == Tier::kCpu && !b.pinned && !b.resident && b.bytes.v >= kFreshMappingBytes;
}
int64_t FreshPageBytes(const Plan& plan, const Op& op, int rank);

// For a GPU over-capacity message: "; the capacity is hardware.gpu.memory M
// less R of hardware.gpu.reserved_memory", or "" when nothing is reserved.
std::string GpuReservedNote(const Plan& plan);

// Bytes a copy or NVMe op moves on `rank` (its data-parallel rank,
// Plan::DataRank): op.bytes unless its moves name ranks, then the
// destination bytes of the moves that run there.
int64_t OpBytesOnRank(const Op& op, int rank);
// Whether any move of the op names a rank.
bool HasRankMoves(const Op& op);

}  // namespace strata
