// The scenario: a model, the hardware it trains on, the training settings and
// the ZeRO configuration. Plain options structs (after LevelDB's Options): each
// field has its default here; YAML and DeepSpeed JSON are parsed into them by
// the config layer only. Key names and defaults follow DeepSpeed where it
// models the same knob.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/fsdp.h"
#include "strata/core/tier.h"
#include "strata/core/units.h"

namespace strata {

enum class ModelKind { kTransformer, kMlp };
inline constexpr int kNumModelKinds = 2;

// A transformer's MLP: GPT-2's two matrices with GeLU (OPT's ReLU has the
// same shapes), or Llama's SwiGLU (gate, up and down).
enum class MlpKind { kGelu, kSwiGlu };
enum class NormKind { kLayerNorm, kRmsNorm };   // RMSNorm: a weight, no bias
enum class PositionKind { kLearned, kRotary };  // rotary: no parameters
inline constexpr int kNumMlpKinds = 2, kNumNormKinds = 2, kNumPositionKinds = 2;

struct ModelSpec {
  ModelKind kind = ModelKind::kTransformer;
  // Transformer decoder. The defaults are GPT-2's architecture; Llama-family
  // models set mlp swiglu, norm rmsnorm, position rotary, bias false,
  // tie_embeddings false and num_kv_heads (grouped-query attention).
  int layers = 0;
  int64_t hidden_size = 0;
  int num_heads = 0;
  int num_kv_heads = 0;         // 0 means num_heads (multi-head attention)
  int64_t ffn_hidden_size = 0;  // 0 means 4 * hidden_size
  int64_t vocab_size = 50304;
  int64_t seq_length = 1024;
  // Rows of a learned position table (0 means seq_length; OPT's is
  // max_position_embeddings + 2).
  int64_t max_position_embeddings = 0;
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  bool bias = true;            // Linear biases (all of them)
  bool qkv_bias = false;       // with bias false: biases on Q, K and V only (Qwen2)
  bool tie_embeddings = true;  // the LM head reuses the token table
  // Mixture of experts (Mixtral): each layer's MLP is num_experts expert
  // MLPs behind a router, and each token goes through experts_per_token of
  // them. 0 experts: a dense MLP.
  int num_experts = 0;
  int experts_per_token = 0;  // 0 means 2 (Mixtral's top-2)
  // Attention as one fused kernel (FlashAttention): no s x s scores in HBM
  // (neither traffic nor kept activations); its backward recomputes the
  // scores (2.5x the forward's FLOPs). false: Megatron's unfused attention
  // (two batched GEMMs, softmax and dropout over the scores).
  bool flash_attention = false;
  // Megatron-LM's kernel fusions (its --no-masked-softmax-fusion,
  // --no-bias-gelu-fusion, --no-bias-dropout-fusion; on by default, as
  // there). Off, each is PyTorch's separate kernels (megatron/model/
  // transformer.py, fused_softmax.py): the attention mask as its own pass
  // over the scores each way (masked_fill_ before the softmax); fc1's bias
  // added before GeLU; x + bias, dropout and + residual as three passes.
  // Simulated cost only: the executor computes the same numbers either way.
  bool masked_softmax_fusion = true;
  bool bias_gelu_fusion = true;
  bool bias_dropout_fusion = true;
  // DeepSpeed's TiledLinear (runtime/zero/tiling.py) in place of a GeLU
  // MLP's fc1 and fc2 (model.tiled_linear: {in_splits, out_splits}): each
  // is out_splits x in_splits Linears, each its own module, so ZeRO-3
  // fetches one tile at a time (ZeRO-Infinity's memory-centric tiling).
  int tiled_in_splits = 1;
  int tiled_out_splits = 1;
  bool tiled() const { return tiled_in_splits * tiled_out_splits > 1; }
  // MLP: layer widths, input first ([1000, 1000, 10] = two Linear layers).
  std::vector<int64_t> sizes;

  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  bool moe() const { return num_experts > 0; }
  int top_k() const { return experts_per_token > 0 ? experts_per_token : 2; }
  int64_t position_rows() const { return max_position_embeddings > 0 ? max_position_embeddings : seq_length; }
  // GPT-2's architecture, which the executor's GPT workload computes (its
  // attention unfused).
  bool Gpt2Style() const {
    return mlp == MlpKind::kGelu && norm == NormKind::kLayerNorm && position == PositionKind::kLearned && bias &&
           tie_embeddings && kv_heads() == num_heads && position_rows() == seq_length && !moe() && !flash_attention &&
           !tiled();
  }
  bool operator==(const ModelSpec&) const = default;
};

// How the simulator times compute ops (hardware.gpu.compute_model).
//   roofline: each op is its module's kernels (the plan's KernelWork): a
//             GEMM at peak_flops x efficiency x its shape's wave/tile
//             quantisation, or at hbm_bandwidth if its bytes bind; memory-bound
//             kernels at hbm_bandwidth; launch_latency per kernel
//             (core/gpu_cost.h).
//   flat:     every op's FLOPs at peak_flops x efficiency, nothing else (what
//             `strata calibrate` measures: whole ops on the host backend).
enum class ComputeModel { kRoofline, kFlat };

// Trivially copyable (the simulator's helper receives it as bytes): names of
// presets stay in the config layer.
struct GpuSpec {
  // The device memory CUDA reports (cudaMemGetInfo's total, PyTorch's
  // "total capacity"): a little under the datasheet's size.
  Bytes memory;
  // Of `memory`, what the training process holds outside its tensors: the
  // CUDA context with the framework's kernels loaded, library workspaces,
  // NCCL's buffers. The planner gives the tensors memory - reserved_memory
  // (a GPU preset sets it: docs/simulator.md "Presets").
  Bytes reserved_memory{0};
  FlopRate peak_flops;  // dense tensor-core rate at the training precision
  Bandwidth hbm_bandwidth{900e9};
  // Fraction of peak_flops that a large GEMM achieves (cuBLAS at shapes
  // that fill every SM). A preset sets it from a published measurement;
  // without one the loader warns that compute runs at peak (1.0).
  double efficiency = 1.0;
  ComputeModel compute_model = ComputeModel::kRoofline;
  // Streaming multiprocessors and the GEMM output tile one of them computes
  // at a time: a GEMM's tiles run in waves of `sms`, so a shape whose tiles
  // leave SMs idle in its last wave (or pad its edge tiles) runs slower.
  // 0 SMs: no quantisation.
  int sms = 0;
  int tile_m = 128;
  int tile_n = 128;
  Seconds launch_latency;  // per kernel launch (roofline model)
  // Bytes per second at which a rank reduces a reduce-scatter's or
  // allreduce's data after the ring has moved it; 0 = the reduction is free
  // (fused into the transfer, as NCCL's is). The host backend's (fp32
  // conversion and an MPI reduction on the CPU) is measured by calibrate.
  Bandwidth reduction_bandwidth{0};
};
struct CpuSpec {
  Bytes memory;
  Bandwidth memory_bandwidth{100e9};
  int cores = 16;
  // Parameters per second one core steps with CPU Adam when memory does not
  // bind (DeepSpeed's cpu_adam, vectorised); the node's Adam runs at
  // min(cores x adam_core_rate, memory_bandwidth / bytes per parameter)
  // (gpu_cost.h CpuAdamSeconds). 0: memory-bound only.
  double adam_core_rate = 0;
  // One copy's rate through CUDA's pinned staging buffer: a copy from or to
  // pageable memory is staged by the calling thread's memcpy, so one copy
  // cannot use the node's whole memory bandwidth (measured here on an H100
  // host: pageable copies at 0.12-0.27 of pinned; docs/executor.md). The
  // staging pass moves 2 bytes of memory traffic per byte copied (a read
  // and a write), at min(this rate, the copy's share of memory_bandwidth);
  // given as the copy's bytes per second. 0: no per-copy limit.
  Bandwidth staging_bandwidth{0};
  // Host time to fault in one fresh 4 KiB page (the kernel maps and zeroes
  // it on first touch). Large pageable buffers allocated per iteration are
  // fresh mappings each time (glibc mmaps blocks of 32 MiB and more,
  // PyTorch's CPU allocator keeps no cache), so the first copy into one
  // pays this per page on the copying thread (scheduler FreshPageBytes).
  // About 1 us on bare metal (docs/simulator.md); `strata calibrate`
  // measures the host's. 0: not charged.
  Seconds page_fault_time{1e-6};
};
struct LinkSpec {
  Bandwidth bandwidth;  // per direction
  Seconds latency;      // fixed cost per transfer (per collective for nvlink/network)
};
// PCIe between the GPUs and the host: each GPU's own link (LinkSpec
// bandwidth), GPUs grouped under switches whose uplink they share, and the
// host's root ports all switches share (DGX-2: 12 GB/s for one GPU alone,
// about 3 GB/s each with all 16 copying; ZeRO-Infinity paper Fig. 2b).
struct PcieSpec : LinkSpec {
  int gpus_per_switch = 0;     // 0: no switch level
  Bandwidth switch_bandwidth;  // a switch's uplink, per direction
  Bandwidth host_bandwidth;    // the node's aggregate, per direction; 0 = no limit
};
// The network per node: `nics` adapters of `bandwidth` each (NCCL spreads a
// collective's rings over them), per direction.
struct NetworkSpec : LinkSpec {
  int nics = 1;
};
struct NvmeSpec {
  Bytes capacity;  // per node; 0 = no NVMe
  // The node's NVMe is `drives` devices striped together (RAID-0, as a
  // DGX-2's): rates below are per drive and add up.
  int drives = 1;
  Bandwidth read_bandwidth{3e9};   // per drive
  Bandwidth write_bandwidth{2e9};  // per drive
  // Reads and writes in flight together share this much (one device, as
  // SimGrid's disks share a read-write constraint); 0 = independent
  // directions. Measured by `strata calibrate`.
  Bandwidth readwrite_bandwidth{0};  // per drive
  Seconds latency;                   // fixed cost per read or write op (submission, small requests)
  // Endurance, per drive (docs/endurance.md): the rated drive writes per
  // day over the warranty, or the rated bytes written (TBW); either gives
  // the other with one drive's capacity and warranty_years. 0: not rated.
  double rated_dwpd = 0;
  Bytes rated_tbw;
  double warranty_years = 5;
  // NAND bytes written per host byte; 0: from the writes' size
  // (cost/endurance.h DefaultWriteAmplification).
  double write_amplification = 0;
  Bytes drive_capacity() const { return Bytes(capacity.v / std::max(1, drives)); }
  // The rated bytes one drive may be written over its warranty (0: not rated).
  double rated_bytes() const {
    if (rated_tbw.v > 0) return static_cast<double>(rated_tbw.v);
    return rated_dwpd * static_cast<double>(drive_capacity().v) * 365.0 * warranty_years;
  }
  Bandwidth node_read() const { return {read_bandwidth.bytes_per_s * drives}; }
  Bandwidth node_write() const { return {write_bandwidth.bytes_per_s * drives}; }
  Bandwidth node_readwrite() const { return {readwrite_bandwidth.bytes_per_s * drives}; }
};

struct HardwareSpec {
  int nodes = 1;
  int gpus_per_node = 1;
  GpuSpec gpu;
  CpuSpec cpu;
  PcieSpec pcie{{Bandwidth{16e9}}};          // per GPU, per direction
  LinkSpec nvlink{Bandwidth{0}};             // per GPU, per direction; 0 = none (peers go over PCIe)
  NetworkSpec network{{Bandwidth{12.5e9}}};  // per NIC, per direction
  NvmeSpec nvme;

  int world_size() const { return nodes * gpus_per_node; }
  // A node's network bandwidth per direction: all its NICs.
  Bandwidth node_network() const { return {network.bandwidth.bytes_per_s * network.nics}; }
};

// The parallelism section: Megatron-LM's tensor and pipeline degrees
// beside ZeRO's data parallelism (world / (tensor x pipeline) ranks), in
// Megatron's rank order (core/parallel.h).
struct ParallelismSpec {
  int tensor = 1;
  int pipeline = 1;
  // Megatron's sequence parallelism: the tensor-parallel region's
  // replicated activations split over the sequence; each allreduce becomes
  // an allgather and a reduce-scatter.
  bool sequence_parallel = false;
};

struct TrainingSpec {
  int micro_batch_size = 1;
  int gradient_accumulation_steps = 1;
  Precision precision = Precision::kFp16;
  bool activation_checkpointing = false;
  // DeepSpeed's activation_checkpointing.cpu_checkpointing: keep the layer
  // checkpoints in CPU memory between forward and backward.
  bool cpu_checkpointing = false;
  // DeepSpeed's activation_checkpointing.partition_activations (ZeRO-R's
  // Pa): each tensor-parallel rank keeps 1/tensor of a layer's checkpoint
  // and the checkpoint is allgathered before the layer's recomputation
  // (checkpointing.py gather_partitioned_activations). No effect without
  // tensor parallelism, or with sequence parallelism (already a shard).
  bool partition_activations = false;
  // DeepSpeed's activation_checkpointing.synchronize_checkpoint_boundary
  // (Megatron's --synchronize-each-layer): torch.cuda.synchronize() at the
  // start and end of each checkpointed segment's forward and backward
  // (checkpointing.py CheckpointFunction): the host waits for every GPU
  // stream, so nothing issued after the boundary starts before the work
  // issued before it (prefetches, reductions, copies) has finished.
  bool synchronize_checkpoint_boundary = false;
  // Megatron-LM v1.1.5-ZeRO3's --split-transformers (DeepSpeedExamples,
  // the ZeRO-Infinity paper's code): each transformer layer is two
  // checkpointed segments, attention (ln1 .. attn_out and its residual add)
  // and MLP (ln2 .. fc2), each keeping its own input: two checkpoints per
  // layer, half the working activations recomputed at a time. Transformer
  // only; not with pipeline parallelism (that code has none).
  bool split_transformers = false;
};

// DeepSpeed's offload_param.device / offload_optimizer.device.
enum class OffloadDevice { kNone, kCpu, kNvme };
std::string_view OffloadDeviceName(OffloadDevice d);

struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;
  int buffer_count = 5;                // swap buffers in the pinned pool
  Elements buffer_size{100'000'000};   // elements per swap buffer
  Elements max_in_cpu{1'000'000'000};  // elements kept in CPU when on NVMe
  bool pin_memory = false;
};

struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;
  int buffer_count = 4;  // optimizer swap buffers (NVMe)
  bool pin_memory = false;
  bool pipeline_read = false;   // overlap reading sub-group k+1 with step k
  bool pipeline_write = false;  // overlap writing sub-group k with step k+1
  // The share of the optimizer states offloaded (DeepSpeed's
  // offload_optimizer.ratio, ZeRO-3 only; 1: all of them).
  double ratio = 1.0;
};

struct ZeroConfig {
  int stage = 0;
  OffloadParamConfig offload_param;
  OffloadOptimizerConfig offload_optimizer;
  Elements stage3_prefetch_bucket_size{50'000'000};
  Elements stage3_max_live_parameters{1'000'000'000};
  Elements stage3_max_reuse_distance{1'000'000'000};
  Elements stage3_param_persistence_threshold{100'000};
  Elements sub_group_size{1'000'000'000};
  // DeepSpeed's default: true for stage 3, false otherwise (set by the loader
  // when the key is absent).
  bool overlap_comm = false;
  Elements reduce_bucket_size{500'000'000};
  Elements allgather_bucket_size{500'000'000};
  // ZeRO++ (stage 3; runtime/zero/config.py): hpZ's secondary parameter
  // partition over groups of this many consecutive ranks (0 and 1: off);
  // qwZ's int8 parameter allgathers; qgZ's int4 all-to-all gradient
  // reduction across nodes.
  int zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_gradients = false;
  bool ZeroPlusPlus() const {
    return zero_hpz_partition_size > 1 || zero_quantized_weights || zero_quantized_gradients;
  }
};

// DeepSpeed's "aio" section: how NVMe swapping submits I/O.
struct AioConfig {
  Bytes block_size{1'048'576};
  int queue_depth = 8;
  int intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;
  bool operator==(const AioConfig&) const = default;
};

// Eviction policy of the planner's parameter caches (see
// planner/eviction.h). Names: lru, lfu, fifo, belady, cost_aware.
enum class EvictionKind { kLru, kLfu, kFifo, kBelady, kCostAware };

// How stage 3 issues parameter fetches (policy.prefetch).
//   deepspeed: DeepSpeed's coordinator (partitioned_param_coordinator.py):
//              the trace queue, bucket budget with overshoot, max_live
//              counting kept groups, NVMe read-ahead by free swap buffers.
//   window:    Strata's: each fetch is issued when the elements still to
//              fetch up to it fit stage3_prefetch_bucket_size and those
//              gathered fit stage3_max_live_parameters (a sliding window).
// The parameter caches (gpu_cache, cpu_cache) use the window.
enum class PrefetchKind { kDeepSpeed, kWindow };

// Which DeepSpeed release's stage-3 mechanisms to plan (policy.deepspeed_stage3):
//   current  DeepSpeed since v0.6.0 (what docs/fidelity.md cites);
//   v0.5     v0.4.0-v0.5.10, the release line the ZeRO-Infinity paper ran;
//   v0.3     v0.3.16 and the paper's own code (jeffra/DeepSpeed a1e9753);
//   v0.3.13  ZeRO-3 Offload as released (PR #834), no NVMe offload.
// Each is a ReleaseProfile of named flags (release_profile.h); what each
// release changed, and where, is the table in docs/fidelity.md ("DeepSpeed
// releases").
enum class DeepSpeedStage3 { kCurrent, kV05, kV03, kV0313 };

// Compression of what goes to NVMe (policy.compression; Strata's, off by
// default; docs/endurance.md "Compression"): each write request is
// compressed on its own after a byte shuffle, and read back whole.
// Lossless: the trained weights are the same bits.
enum class CodecKind { kNone, kLz4, kZstd };
struct CompressionConfig {
  CodecKind codec = CodecKind::kNone;
  int level = 0;     // the codec's level; 0: its profile's (codec_profile.h)
  double ratio = 0;  // planned stored / raw bytes; 0: the profile's, by data
  // Threads that compress (or decompress) one NVMe op's frames side by
  // side, per NVMe stream: the codec runs at about 1 GB/s a thread, well
  // under a drive's write rate.
  int threads = 1;
  bool operator==(const CompressionConfig&) const = default;
};

// The "policy" section. With both caches at 0 (the default) the planner does
// what DeepSpeed does: free gathered parameters after use unless they are
// reused within stage3_max_reuse_distance.
struct PolicyConfig {
  EvictionKind eviction = EvictionKind::kLru;
  Bytes gpu_cache;  // per rank: gathered parameters kept on the GPU after use
  Bytes cpu_cache;  // per rank: NVMe-homed partitions kept in pinned CPU memory
  // NVMe optimizer with pipeline_read: the optimizer states (master, m, v)
  // of the first sub-group are read into its swap buffer while the backward
  // pass runs (they do not depend on it); only its gradients wait for the
  // backward. DeepSpeed reads them at the start of the step (false).
  bool prefetch_optimizer_states = false;
  // cpu_checkpointing: Strata's pipelined checkpoint copies (true): each
  // layer's checkpoint leaves for pinned CPU memory on the D2H stream while
  // the next layer computes, and comes back on the H2D stream one layer
  // ahead of its recomputation. DeepSpeed's (false; checkpointing.py
  // CheckpointFunction): with partition_activations, or before its offload
  // engine (deepspeed_stage3 v0.5), synchronous copies into pageable CPU
  // memory and back before the recomputation, on the compute stream;
  // otherwise the engine's pinned side-stream copies, brought back only
  // when the recomputation asks (planner PlanBuilder::CheckpointCopy).
  bool prefetch_checkpoints = false;
  PrefetchKind prefetch = PrefetchKind::kDeepSpeed;
  DeepSpeedStage3 deepspeed_stage3 = DeepSpeedStage3::kCurrent;
  // Turns the release profile's aligned_trace on (policy.aligned_trace; the
  // deprecated policy.v05_aligned_trace sets it too): the v0.5/v0.3
  // coordinator's prefetch and reuse as written. Off, those releases run
  // them as shipped: the top module's reset hook puts every step after the
  // first off by one (v0.3.13, without that hook, is aligned either way).
  bool aligned_trace = false;
  // Stage 3: the host time of ZeRO-3's module hooks, as the release profile
  // gives it (hook ops on the host stream); false leaves it out (what
  // Strata's executor, which runs no hooks, does: `strata validate`).
  bool host_hooks = true;
  // Write buffering (Strata's, off at 0; docs/endurance.md): an NVMe write
  // whose every piece is smaller than this waits for the next write on its
  // stream that ends or starts where it does, and the two go to the drive
  // as one run in aio.block_size requests (the pieces of a request that
  // spans several staged through pinned memory).
  Bytes write_buffer;
  CompressionConfig compression;
  // Striping (Strata's; docs/endurance.md "Striping"): every NVMe swap
  // file split over these directories, one per drive, in aio.block_size
  // units, each file's first unit on the drive that balances the bytes
  // written. Empty: each swapper's nvme_path (DeepSpeed's one directory).
  std::vector<std::string> stripe_paths;
  // Delayed parameter update (Strata's; ZeRO-Offload's DPU, docs/dpu.md):
  // policy.delayed_update.warmup_steps, -1 for off. After that many
  // ordinary steps and one step that only computes gradients, each step's
  // CPU optimizer applies the previous step's gradients while the forward
  // and backward run. ZeRO stages 1-2 with offload_optimizer cpu.
  int delayed_update_warmup = -1;
};

struct Scenario {
  std::string name;
  ModelSpec model;
  HardwareSpec hardware;
  TrainingSpec training;
  ZeroConfig zero;
  AioConfig aio;
  PolicyConfig policy;
  ParallelismSpec parallelism;
  // framework: fsdp reads the fsdp section instead of zero_optimization
  // and aio (which it then must not have).
  Framework framework = Framework::kDeepSpeed;
  FsdpSpec fsdp;
};

// A semantic problem with a scenario, named by the dotted key path of the
// offending setting ("zero_optimization.stage"). The config layer turns the
// path into file:line:column.
struct ScenarioIssue {
  std::string path;
  std::string message;
};

// The ranges every key must lie in (docs/limits.md): far beyond any real
// model or machine, and small enough that sizes computed from them never
// overflow 64 bits and a plan fits in a few GiB of memory.
namespace limits {
inline constexpr int64_t kLayers = 4096;
inline constexpr int64_t kHiddenSize = int64_t{1} << 20;
inline constexpr int64_t kHeads = int64_t{1} << 16;
inline constexpr int64_t kFfnSize = int64_t{1} << 22;
inline constexpr int64_t kVocab = int64_t{1} << 24;
inline constexpr int64_t kSeqLength = int64_t{1} << 20;
inline constexpr int64_t kPositions = int64_t{1} << 24;
inline constexpr int64_t kExperts = 1024;
inline constexpr int64_t kMlpWidth = int64_t{1} << 24;
inline constexpr int64_t kMlpLayers = 4096;
inline constexpr double kParameters = 1e15;            // a model's total
inline constexpr double kLayerActivationBytes = 1e15;  // one layer, one micro batch
inline constexpr int64_t kNodes = int64_t{1} << 17;
inline constexpr int64_t kGpusPerNode = 1024;
inline constexpr int64_t kWorldSize = int64_t{1} << 17;
inline constexpr int64_t kMicroBatch = int64_t{1} << 16;
inline constexpr int64_t kAccumulationSteps = int64_t{1} << 16;
// Module passes per iteration (modules x micro batches x forward, backward
// and recomputation): bounds the plan's op count (about five ops a pass).
inline constexpr double kModulePasses = 2e6;
// Parameter tensors of a transformer (experts' included): each is a
// parameter group the planner gives its own fetch, reduce and step ops.
// 4x DeepSeek-V3's (61 layers x 256 experts x 3, about 47k).
inline constexpr double kParameterTensors = 262144;
inline constexpr int64_t kMemoryBytes = int64_t{1} << 60;  // any capacity
inline constexpr double kBandwidth = 1e16;                 // bytes/s
inline constexpr double kFlops = 1e20;                     // FLOP/s per GPU
inline constexpr double kLatency = 3600;                   // seconds
inline constexpr int64_t kCores = int64_t{1} << 16;
inline constexpr int64_t kSms = int64_t{1} << 16;  // GPU streaming multiprocessors
inline constexpr int64_t kTile = 4096;             // GEMM tile side
inline constexpr int64_t kDevices = 1024;          // NICs or drives per node
inline constexpr int64_t kBufferCount = 4096;
inline constexpr int64_t kElements = int64_t{1} << 50;  // any element count
inline constexpr int64_t kAioBlockSize = int64_t{1} << 30;
inline constexpr int64_t kAioQueueDepth = 1024;
inline constexpr int64_t kAioParallelism = 64;
inline constexpr int64_t kCompressionThreads = 256;
inline constexpr int64_t kWarmupSteps = int64_t{1} << 30;  // policy.delayed_update.warmup_steps
}  // namespace limits

// Checks values that parse but cannot be right: sizes and rates outside
// their range (limits above), stage outside 0..3, offload combinations
// DeepSpeed rejects, a model or plan too large to hold. Empty = valid.
std::vector<ScenarioIssue> CheckScenario(const Scenario& s);
// The fsdp section against the model and the machine (framework: fsdp;
// part of CheckScenario): units that do not sum to the layers, a mesh that
// is not the data-parallel ranks, an integer reshard_after_forward that
// does not divide the shard group, parallelism FSDP is not modelled with.
std::vector<ScenarioIssue> CheckFsdp(const Scenario& s);
// The hardware section's part of CheckScenario alone (the simulator's
// helper checks the hardware it is sent).
std::vector<ScenarioIssue> CheckHardwareSpec(const HardwareSpec& h);

}  // namespace strata
