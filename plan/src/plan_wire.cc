#include "strata/plan/plan_wire.h"

#include <concepts>
#include <cstring>
#include <type_traits>

namespace strata {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'W', 'I', 'R', '1'};

// A struct's fields in wire order: the one list both directions walk.
#define STRATA_WIRE_FIELDS(Type, ...)                 \
  template <class IO, class T>                        \
  requires std::same_as<std::remove_const_t<T>, Type> \
  void Fields(IO& io, T& x) { io(__VA_ARGS__); }

STRATA_WIRE_FIELDS(Gemm, x.m, x.n, x.k, x.batch)
STRATA_WIRE_FIELDS(KernelWork, x.gemms, x.mem_bytes, x.launches, x.elem_bytes)
STRATA_WIRE_FIELDS(Region, x.buffer, x.offset, x.bytes)
STRATA_WIRE_FIELDS(Move, x.src, x.dst, x.accumulate, x.widen, x.rank, x.narrow)
STRATA_WIRE_FIELDS(Buffer, x.id, x.name, x.tier, x.kind, x.bytes, x.resident, x.pinned, x.backed, x.cleared, x.stage,
                   x.nvme_dir)
STRATA_WIRE_FIELDS(CommGroup, x.name, x.ranks)
STRATA_WIRE_FIELDS(PlanParamGroup, x.name, x.elements, x.partition_elements, x.flat_offset, x.persistent, x.home,
                   x.home_offset, x.home_buffer, x.master_buffer, x.master_offset, x.exp_avg_buffer, x.exp_avg_offset,
                   x.exp_avg_sq_buffer, x.exp_avg_sq_offset)
STRATA_WIRE_FIELDS(PlanModule, x.name, x.layer, x.param_groups, x.fwd_flops, x.fwd, x.bwd)
STRATA_WIRE_FIELDS(CacheStats, x.eviction, x.gpu_capacity, x.cpu_capacity, x.gpu_accesses, x.gpu_hits, x.cpu_accesses,
                   x.cpu_hits, x.fetch_nvme_read, x.fetch_h2d, x.fetch_allgather, x.compulsory_nvme_read,
                   x.compulsory_h2d, x.compulsory_allgather, x.window_nvme_reads)
STRATA_WIRE_FIELDS(ModelSpec, x.kind, x.layers, x.hidden_size, x.num_heads, x.num_kv_heads, x.ffn_hidden_size,
                   x.vocab_size, x.seq_length, x.max_position_embeddings, x.mlp, x.norm, x.position, x.bias, x.qkv_bias,
                   x.tie_embeddings, x.num_experts, x.experts_per_token, x.flash_attention, x.masked_softmax_fusion,
                   x.bias_gelu_fusion, x.bias_dropout_fusion, x.tiled_in_splits, x.tiled_out_splits, x.sizes)
STRATA_WIRE_FIELDS(AioConfig, x.block_size, x.queue_depth, x.intra_op_parallelism, x.single_submit, x.overlap_events)
STRATA_WIRE_FIELDS(CompressionConfig, x.codec, x.level, x.ratio, x.threads)
STRATA_WIRE_FIELDS(RunSpec, x.model, x.precision, x.micro_batch_size, x.activation_checkpointing, x.split_transformers,
                   x.partition_activations, x.sequence_parallel, x.aio, x.nvme_shared, x.nvme_dirs, x.compression,
                   x.striped, x.delayed_warmup, x.delayed_grads)
STRATA_WIRE_FIELDS(Op, x.id, x.name, x.kind, x.stream, x.phase, x.micro_step, x.module, x.layer, x.flops,
                   x.host_seconds, x.bytes, x.copy_bytes, x.quant_bits, x.coalesce, x.stored, x.grads_store, x.elements,
                   x.group, x.stage, x.peer_stage, x.operand, x.deps, x.allocs, x.frees, x.reads, x.writes, x.moves,
                   x.params, x.grads, x.flat_begin, x.master, x.exp_avg, x.exp_avg_sq, x.grad_in)
STRATA_WIRE_FIELDS(Plan, x.scenario, x.framework, x.world_size, x.nodes, x.gpus_per_node, x.zero_stage, x.micro_steps,
                   x.pipeline, x.stage_layers, x.stage_flat_partition, x.flat_partition, x.capacity, x.gpu_reserved,
                   x.total_params, x.model_flops, x.samples_per_iteration, x.tokens_per_sample, x.param_groups,
                   x.modules, x.cache, x.groups, x.buffers, x.ops, x.run)
#undef STRATA_WIRE_FIELDS

// A field added to one of these structs must join its list above (and the
// JSON codec): these sizes are the layouts the lists were written for.
static_assert(sizeof(Plan) == 672 && sizeof(Op) == 440 && sizeof(Buffer) == 72 && sizeof(Region) == 24 &&
                  sizeof(Move) == 64 && sizeof(CommGroup) == 56 && sizeof(PlanParamGroup) == 120 &&
                  sizeof(PlanModule) == 152 && sizeof(KernelWork) == 40 && sizeof(Gemm) == 32 &&
                  sizeof(CacheStats) == 136 && sizeof(RunSpec) == 232 && sizeof(ModelSpec) == 120 &&
                  sizeof(AioConfig) == 24 && sizeof(CompressionConfig) == 24,
              "a plan struct changed: update its STRATA_WIRE_FIELDS list, then these sizes");

// How many values each enum has (decoding refuses the rest).
template <typename E>
constexpr int kEnumCount = 0;
template <>
constexpr int kEnumCount<Tier> = kNumTiers;
template <>
constexpr int kEnumCount<StateKind> = kNumStateKinds;
template <>
constexpr int kEnumCount<OpKind> = kNumOpKinds;
template <>
constexpr int kEnumCount<Stream> = kNumStreams;
template <>
constexpr int kEnumCount<Phase> = kNumPhases;
template <>
constexpr int kEnumCount<Operand> = kNumOperands;
template <>
constexpr int kEnumCount<Precision> = kNumPrecisions;
template <>
constexpr int kEnumCount<Framework> = 2;
template <>
constexpr int kEnumCount<CodecKind> = 3;
template <>
constexpr int kEnumCount<ModelKind> = kNumModelKinds;
template <>
constexpr int kEnumCount<MlpKind> = kNumMlpKinds;
template <>
constexpr int kEnumCount<NormKind> = kNumNormKinds;
template <>
constexpr int kEnumCount<PositionKind> = kNumPositionKinds;

template <typename T>
constexpr bool kIsVector = false;
template <typename T>
constexpr bool kIsVector<std::vector<T>> = true;

// Strong types (Bytes, Elements): their one field. (clang-format 14
// splits the requires-expression apart.)
// clang-format off
template <typename T>
concept Wrapped = requires(T t) { t.v; } && sizeof(T) == sizeof(T::v);
// clang-format on

class Writer {
 public:
  template <class... Ts>
  void operator()(const Ts&... v) {
    (Put(v), ...);
  }
  template <class T>
  void Put(const T& v) {
    if constexpr (std::is_arithmetic_v<T>) {
      out_.append(reinterpret_cast<const char*>(&v), sizeof v);
    } else if constexpr (std::is_enum_v<T>) {
      Put(static_cast<int32_t>(v));
    } else if constexpr (std::is_same_v<T, std::string>) {
      Put(static_cast<uint64_t>(v.size()));
      out_.append(v);
    } else if constexpr (kIsVector<T>) {
      Put(static_cast<uint64_t>(v.size()));
      using E = typename T::value_type;
      if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
        if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(E));
      } else {
        for (const E& e : v) Put(e);
      }
    } else if constexpr (std::is_array_v<T>) {
      for (const auto& e : v) Put(e);
    } else if constexpr (Wrapped<T>) {
      Put(v.v);
    } else {
      Fields(*this, v);
    }
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// The fewest bytes a T encodes to (its empty strings and lists): what
// bounds a count before the list is allocated.
template <class T>
size_t MinWireSize() {
  static const size_t n = [] {
    Writer w;
    w.Put(T{});
    return w.Take().size();
  }();
  return n;
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class... Ts>
  void operator()(Ts&... v) {
    (Get(v), ...);
  }
  template <class T>
  void Get(T& v) {
    if (!error_.empty()) return;
    if constexpr (std::is_same_v<T, bool>) {
      uint8_t b = 0;
      Raw(&b, 1);
      if (b > 1) Fail("a flag of " + std::to_string(b));
      v = b == 1;
    } else if constexpr (std::is_arithmetic_v<T>) {
      Raw(&v, sizeof v);
    } else if constexpr (std::is_enum_v<T>) {
      static_assert(kEnumCount<T> > 0, "give the enum its kEnumCount");
      int32_t i = 0;
      Raw(&i, sizeof i);
      if (i < 0 || i >= kEnumCount<T>) return Fail("an enum value of " + std::to_string(i));
      v = static_cast<T>(i);
    } else if constexpr (std::is_same_v<T, std::string>) {
      const size_t n = Count(1);
      v.assign(in_.data() + at_, n);
      at_ += n;
    } else if constexpr (kIsVector<T>) {
      using E = typename T::value_type;
      const size_t n = Count(MinWireSize<E>());
      v.resize(n);
      if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>)
        Raw(v.data(), n * sizeof(E));
      else
        for (E& e : v) Get(e);
    } else if constexpr (std::is_array_v<T>) {
      for (auto& e : v) Get(e);
    } else if constexpr (Wrapped<T>) {
      Get(v.v);
    } else {
      Fields(*this, v);
    }
  }
  void Raw(void* p, size_t n) {
    if (!error_.empty() || n == 0) return;  // (an empty list's data() may be null)
    if (n > in_.size() - at_) return Fail("cut short (" + std::to_string(n) + " bytes wanted)");
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
  }
  // A count of items each at least `each` bytes: no more than remain.
  size_t Count(size_t each) {
    uint64_t n = 0;
    Raw(&n, sizeof n);
    if (error_.empty() && n > (in_.size() - at_) / each) Fail("a count of " + std::to_string(n) + " past the end");
    return error_.empty() ? static_cast<size_t>(n) : 0;
  }
  void Fail(const std::string& what) {
    if (error_.empty()) error_ = "plan wire bytes: at byte " + std::to_string(at_) + ": " + what;
  }
  size_t at() const { return at_; }
  const std::string& error() const { return error_; }

 private:
  std::string_view in_;
  size_t at_ = 0;
  std::string error_;
};

}  // namespace

std::string EncodePlanWire(const Plan& plan) {
  Writer w;
  w.Put(kMagic);
  w.Put(plan);
  return w.Take();
}

Result<Plan> DecodePlanWire(std::string_view bytes) {
  Reader r(bytes);
  char magic[sizeof kMagic] = {};
  r.Raw(magic, sizeof magic);
  if (!r.error().empty() || std::memcmp(magic, kMagic, sizeof magic) != 0)
    return Status::InvalidArgument("plan wire bytes: no magic word (not a plan from this build)");
  Plan p;
  r.Get(p);
  if (r.error().empty() && r.at() != bytes.size()) r.Fail(std::to_string(bytes.size() - r.at()) + " bytes left over");
  if (!r.error().empty()) return Status::InvalidArgument(r.error());
  return p;
}

}  // namespace strata
