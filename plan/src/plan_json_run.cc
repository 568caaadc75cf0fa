// The plan JSON's run record: the model section by its scenario names, the
// training settings an executor needs, aio and the swap directories.
#include "plan_json_fields.h"
#include "strata/core/codec_profile.h"

namespace strata::plan_json {
namespace {

constexpr const char* kModelKinds[] = {"transformer", "mlp"};
constexpr const char* kMlpKinds[] = {"gelu", "swiglu"};
constexpr const char* kNormKinds[] = {"layernorm", "rmsnorm"};
constexpr const char* kPositionKinds[] = {"learned", "rotary"};

Json EncodeModel(const ModelSpec& m) {
  return {{"kind", kModelKinds[static_cast<int>(m.kind)]},
          {"layers", m.layers},
          {"hidden_size", m.hidden_size},
          {"num_heads", m.num_heads},
          {"num_kv_heads", m.num_kv_heads},
          {"ffn_hidden_size", m.ffn_hidden_size},
          {"vocab_size", m.vocab_size},
          {"seq_length", m.seq_length},
          {"max_position_embeddings", m.max_position_embeddings},
          {"mlp", kMlpKinds[static_cast<int>(m.mlp)]},
          {"norm", kNormKinds[static_cast<int>(m.norm)]},
          {"position", kPositionKinds[static_cast<int>(m.position)]},
          {"bias", m.bias},
          {"qkv_bias", m.qkv_bias},
          {"tie_embeddings", m.tie_embeddings},
          {"num_experts", m.num_experts},
          {"experts_per_token", m.experts_per_token},
          {"flash_attention", m.flash_attention},
          {"masked_softmax_fusion", m.masked_softmax_fusion},
          {"bias_gelu_fusion", m.bias_gelu_fusion},
          {"bias_dropout_fusion", m.bias_dropout_fusion},
          {"tiled_in_splits", m.tiled_in_splits},
          {"tiled_out_splits", m.tiled_out_splits},
          {"sizes", m.sizes}};
}

}  // namespace

Json EncodeRun(const RunSpec& r) {
  return {{"model", EncodeModel(r.model)},
          {"precision", PrecisionName(r.precision)},
          {"micro_batch_size", r.micro_batch_size},
          {"activation_checkpointing", r.activation_checkpointing},
          {"split_transformers", r.split_transformers},
          {"partition_activations", r.partition_activations},
          {"sequence_parallel", r.sequence_parallel},
          {"aio",
           {{"block_size", r.aio.block_size.v},
            {"queue_depth", r.aio.queue_depth},
            {"intra_op_parallelism", r.aio.intra_op_parallelism},
            {"single_submit", r.aio.single_submit},
            {"overlap_events", r.aio.overlap_events}}},
          {"nvme_shared", r.nvme_shared},
          {"nvme_dirs", r.nvme_dirs},
          {"compression",
           {{"codec", ProfileOf(r.compression.codec).name},
            {"level", r.compression.level},
            {"ratio", r.compression.ratio},
            {"threads", r.compression.threads}}},
          {"striped", r.striped},
          {"delayed_warmup", r.delayed_warmup},
          {"delayed_grads", r.delayed_grads}};
}

namespace {

// One of `names` (an enum's values in order).
template <typename E, size_t N>
E Named(const Json& j, const char* key, const std::string& where, const char* const (&names)[N]) {
  const std::string v = Str(j, key, where);
  for (size_t i = 0; i < N; ++i)
    if (v == names[i]) return static_cast<E>(i);
  throw DecodeError{where + "." + key + ": unknown value '" + v + "'"};
}
ModelSpec DecodeModel(const Json& j, const std::string& w) {
  ModelSpec m;
  m.kind = Named<ModelKind>(j, "kind", w, kModelKinds);
  m.layers = AtLeast(j, "layers", w, 0);
  m.hidden_size = AtLeast64(j, "hidden_size", w, 0);
  m.num_heads = AtLeast(j, "num_heads", w, 0);
  m.num_kv_heads = AtLeast(j, "num_kv_heads", w, 0);
  m.ffn_hidden_size = AtLeast64(j, "ffn_hidden_size", w, 0);
  m.vocab_size = AtLeast64(j, "vocab_size", w, 0);
  m.seq_length = AtLeast64(j, "seq_length", w, 0);
  m.max_position_embeddings = AtLeast64(j, "max_position_embeddings", w, 0);
  m.mlp = Named<MlpKind>(j, "mlp", w, kMlpKinds);
  m.norm = Named<NormKind>(j, "norm", w, kNormKinds);
  m.position = Named<PositionKind>(j, "position", w, kPositionKinds);
  m.bias = Bool(j, "bias", w);
  m.qkv_bias = Bool(j, "qkv_bias", w);
  m.tie_embeddings = Bool(j, "tie_embeddings", w);
  m.num_experts = AtLeast(j, "num_experts", w, 0);
  m.experts_per_token = AtLeast(j, "experts_per_token", w, 0);
  m.flash_attention = Bool(j, "flash_attention", w);
  m.masked_softmax_fusion = Bool(j, "masked_softmax_fusion", w);
  m.bias_gelu_fusion = Bool(j, "bias_gelu_fusion", w);
  m.bias_dropout_fusion = Bool(j, "bias_dropout_fusion", w);
  m.tiled_in_splits = AtLeast(j, "tiled_in_splits", w, 1);
  m.tiled_out_splits = AtLeast(j, "tiled_out_splits", w, 1);
  const Json& sizes = Field(j, "sizes", w);
  if (!sizes.is_array()) throw DecodeError{w + ".sizes: expected a list"};
  for (const Json& v : sizes) {
    if (!v.is_number_integer() || v.get<int64_t>() < 1) throw DecodeError{w + ".sizes: expected positive integers"};
    m.sizes.push_back(v.get<int64_t>());
  }
  return m;
}

}  // namespace

void DecodeRun(const Json& j, Plan& p) {
  const std::string w = "plan.run";
  const Json& r = Field(j, "run", "plan");
  RunSpec& run = p.run;
  run.model = DecodeModel(Field(r, "model", w), w + ".model");
  const std::string prec = Str(r, "precision", w);
  bool known = false;
  for (Precision x : {Precision::kFp16, Precision::kBf16, Precision::kFp32})
    if (prec == PrecisionName(x)) run.precision = x, known = true;
  if (!known) throw DecodeError{w + ".precision: unknown value '" + prec + "' (fp16, bf16, fp32)"};
  run.micro_batch_size = AtLeast(r, "micro_batch_size", w, 1);
  run.activation_checkpointing = Bool(r, "activation_checkpointing", w);
  run.split_transformers = Bool(r, "split_transformers", w);
  run.partition_activations = Bool(r, "partition_activations", w);
  run.sequence_parallel = Bool(r, "sequence_parallel", w);
  const Json& aio = Field(r, "aio", w);
  run.aio.block_size = Bytes(AtLeast64(aio, "block_size", w + ".aio", 1));
  run.aio.queue_depth = AtLeast(aio, "queue_depth", w + ".aio", 1);
  run.aio.intra_op_parallelism = AtLeast(aio, "intra_op_parallelism", w + ".aio", 1);
  run.aio.single_submit = Bool(aio, "single_submit", w + ".aio");
  run.aio.overlap_events = Bool(aio, "overlap_events", w + ".aio");
  run.nvme_shared = Bool(r, "nvme_shared", w);
  const Json& dirs = Field(r, "nvme_dirs", w);
  if (!dirs.is_array()) throw DecodeError{w + ".nvme_dirs: expected a list"};
  for (const Json& d : dirs) {
    if (!d.is_string()) throw DecodeError{w + ".nvme_dirs: expected strings"};
    run.nvme_dirs.push_back(d.get<std::string>());
  }
  const Json& c = Field(r, "compression", w);
  auto codec = ParseCodec(Str(c, "codec", w + ".compression"));
  if (!codec.ok()) throw DecodeError{w + ".compression.codec: " + codec.status().message()};
  run.compression.codec = *codec;
  run.compression.level = AtLeast(c, "level", w + ".compression", 0);
  const Json& ratio = Field(c, "ratio", w + ".compression");
  if (!ratio.is_number() || !(ratio.get<double>() >= 0) || !(ratio.get<double>() <= 1))
    throw DecodeError{w + ".compression.ratio: 0 (the codec's) or a ratio in (0, 1]"};
  run.compression.ratio = ratio.get<double>();
  run.compression.threads = AtLeast(c, "threads", w + ".compression", 1);
  run.striped = Bool(r, "striped", w);
  run.delayed_warmup = AtLeast(r, "delayed_warmup", w, -1);
  if (run.delayed_warmup > limits::kWarmupSteps)
    throw DecodeError{w + ".delayed_warmup: at most " + std::to_string(limits::kWarmupSteps)};
  run.delayed_grads = AtLeast(r, "delayed_grads", w, -1);  // a buffer id: the validator checks it
  if (run.striped && run.aio.block_size.v % 4096 != 0)
    throw DecodeError{w + ".aio.block_size: a multiple of 4096 in a striped plan (its stripe unit)"};
  if (run.compression.threads > limits::kCompressionThreads)
    throw DecodeError{w + ".compression.threads: at most " + std::to_string(limits::kCompressionThreads)};
  const CodecProfile& profile = ProfileOf(run.compression.codec);
  if (run.compression.level != 0 &&
      (run.compression.level < profile.min_level || run.compression.level > profile.max_level))
    throw DecodeError{w + ".compression.level: " + std::string(profile.name) + "'s " +
                      std::to_string(profile.min_level) + ".." + std::to_string(profile.max_level) + ", or 0"};
}

}  // namespace strata::plan_json
