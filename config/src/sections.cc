#include "sections.h"

#include <utility>

#include "hf_config.h"
#include "strata/core/paths.h"
#include "strata/core/presets.h"
#include "strata/core/release_profile.h"

namespace strata::config {

static std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void ReadModel(Section& s, ModelSpec* m) {
  // A Hugging Face config is a transformer's: kind may then be left out.
  auto kind = s.Choice("kind", {"transformer", "mlp"}, /*required=*/!s.present("hf_config"));
  if (kind) m->kind = *kind == 0 ? ModelKind::kTransformer : ModelKind::kMlp;
  if (m->kind == ModelKind::kMlp) {
    s.Int64List("sizes", &m->sizes, /*required=*/true);
  } else {
    // hf_config: a Hugging Face config.json (relative to the scenario) gives
    // the architecture; keys written here override it.
    std::string hf;
    const bool from_hf = s.Path("hf_config", &hf);
    if (from_hf) ReadHfConfig(ResolveBeside(s.file(), hf), m, s.sink());
    s.Int("layers", &m->layers, !from_hf);
    s.Int64("hidden_size", &m->hidden_size, !from_hf);
    s.Int("num_heads", &m->num_heads, !from_hf);
    s.Int("num_kv_heads", &m->num_kv_heads);
    s.Int64("ffn_hidden_size", &m->ffn_hidden_size);
    s.Int64("vocab_size", &m->vocab_size);
    s.Int64("seq_length", &m->seq_length);
    s.Int64("max_position_embeddings", &m->max_position_embeddings);
    if (auto v = s.Choice("mlp", {"gelu", "swiglu"})) m->mlp = static_cast<MlpKind>(*v);
    if (auto v = s.Choice("norm", {"layernorm", "rmsnorm"})) m->norm = static_cast<NormKind>(*v);
    if (auto v = s.Choice("position", {"learned", "rotary"})) m->position = static_cast<PositionKind>(*v);
    s.Bool("bias", &m->bias);
    s.Bool("qkv_bias", &m->qkv_bias);
    s.Bool("tie_embeddings", &m->tie_embeddings);
    s.Int("num_experts", &m->num_experts);
    s.Int("experts_per_token", &m->experts_per_token);
    s.Bool("flash_attention", &m->flash_attention);
    s.Bool("masked_softmax_fusion", &m->masked_softmax_fusion);
    s.Bool("bias_gelu_fusion", &m->bias_gelu_fusion);
    s.Bool("bias_dropout_fusion", &m->bias_dropout_fusion);
    if (auto t = s.Sub("tiled_linear")) {
      t->Int("in_splits", &m->tiled_in_splits);
      t->Int("out_splits", &m->tiled_out_splits);
      t->Finish();
    }
  }
  s.Finish();
}

// hardware.nvme: a drive preset (model) first, then the keys written
// beside it; ratings must be positive, and a drive has one of DWPD and TBW
// (docs/endurance.md).
static void ReadNvme(Section& n, NvmeSpec* nv) {
  n.Int("drives", &nv->drives);
  std::string model;
  std::optional<Bytes> drive;
  if (n.String("model", &model)) {
    drive = NvmePreset(model, nv);
    if (!drive) n.Error("model", "unknown NVMe drive preset '" + model + "' (known: " + Join(NvmePresetNames()) + ")");
  }
  if (!n.Size("capacity", &nv->capacity) && drive) nv->capacity = Bytes(drive->v * std::max(1, nv->drives));
  n.Rate("read_bandwidth", &nv->read_bandwidth);
  n.Rate("write_bandwidth", &nv->write_bandwidth);
  n.Rate("readwrite_bandwidth", &nv->readwrite_bandwidth);
  n.Duration("latency", &nv->latency);
  const bool dwpd = n.Double("rated_dwpd", &nv->rated_dwpd);
  const bool tbw = n.Size("rated_tbw", &nv->rated_tbw);
  if (dwpd && !(nv->rated_dwpd > 0)) n.Error("rated_dwpd", "must be above 0 drive writes per day");
  if (tbw && nv->rated_tbw.v <= 0) n.Error("rated_tbw", "must be above 0 bytes");
  if (dwpd && tbw) n.Error("rated_tbw", "give one of rated_dwpd and rated_tbw (each gives the other)");
  if (dwpd) nv->rated_tbw = Bytes(0);  // over a preset's rating
  if (tbw) nv->rated_dwpd = 0;
  if (n.Double("warranty_years", &nv->warranty_years) && !(nv->warranty_years > 0))
    n.Error("warranty_years", "must be above 0 years");
  if (n.Double("write_amplification", &nv->write_amplification) && !(nv->write_amplification >= 1))
    n.Error("write_amplification", "must be at least 1 (NAND bytes written per host byte)");
  n.Finish();
}

void ReadHardware(Section& s, HardwareSpec* h) {
  // preset: a whole machine (presets.h); keys written beside it override it.
  std::string preset;
  bool from_preset = false;
  if (s.String("preset", &preset)) {
    from_preset = HardwarePreset(preset, h);
    if (!from_preset)
      s.Error("preset", "unknown hardware preset '" + preset + "' (known: " + Join(HardwarePresetNames()) + ")");
  }
  s.Int("nodes", &h->nodes);
  s.Int("gpus_per_node", &h->gpus_per_node);
  if (auto g = s.Sub("gpu", !from_preset)) {
    // model: a GPU preset; the fields below override it.
    std::string model;
    bool gpu_preset = from_preset;
    if (g->String("model", &model)) {
      gpu_preset = GpuPreset(model, &h->gpu);
      if (!gpu_preset) g->Error("model", "unknown GPU model '" + model + "' (known: " + Join(GpuPresetNames()) + ")");
    }
    g->Size("memory", &h->gpu.memory, !gpu_preset);
    g->Size("reserved_memory", &h->gpu.reserved_memory);
    g->Flops("peak_flops", &h->gpu.peak_flops, !gpu_preset);
    g->Rate("hbm_bandwidth", &h->gpu.hbm_bandwidth);
    const bool efficiency = g->Double("efficiency", &h->gpu.efficiency);
    if (auto m = g->Choice("compute_model", {"roofline", "flat"}))
      h->gpu.compute_model = *m == 0 ? ComputeModel::kRoofline : ComputeModel::kFlat;
    g->Int("sms", &h->gpu.sms);
    g->Int("tile_m", &h->gpu.tile_m);
    g->Int("tile_n", &h->gpu.tile_n);
    g->Duration("launch_latency", &h->gpu.launch_latency);
    g->Rate("reduction_bandwidth", &h->gpu.reduction_bandwidth);
    if (!gpu_preset && !efficiency)
      s.sink().Warn(g->path() +
                    ": no model preset and no efficiency: compute runs at 100% of peak_flops "
                    "(name one, e.g. model: v100-32gb, or give efficiency)");
    g->Finish();
  }
  if (auto c = s.Sub("cpu", !from_preset)) {
    c->Size("memory", &h->cpu.memory, !from_preset);
    c->Rate("memory_bandwidth", &h->cpu.memory_bandwidth);
    const bool cores = c->Int("cores", &h->cpu.cores);
    c->Double("adam_core_rate", &h->cpu.adam_core_rate);
    // cores only scales adam_core_rate (gpu_cost.h CpuAdamSeconds): given
    // without it, it would change nothing, silently.
    if (cores && h->cpu.adam_core_rate <= 0)
      c->sink().Warn(c->path() +
                     ".cores: used only with adam_core_rate (one core's CPU Adam rate, parameters/s; strata calibrate "
                     "measures it): without it CPU Adam runs at memory_bandwidth alone and cores changes nothing");
    c->Rate("staging_bandwidth", &h->cpu.staging_bandwidth);
    c->Duration("page_fault_time", &h->cpu.page_fault_time);
    c->Finish();
  }
  for (auto [key, link] : {std::pair{"pcie", static_cast<LinkSpec*>(&h->pcie)}, std::pair{"nvlink", &h->nvlink},
                           std::pair{"network", static_cast<LinkSpec*>(&h->network)}}) {
    if (auto l = s.Sub(key)) {
      l->Rate("bandwidth", &link->bandwidth);
      l->Duration("latency", &link->latency);
      if (link == &h->pcie) {
        l->Int("gpus_per_switch", &h->pcie.gpus_per_switch);
        l->Rate("switch_bandwidth", &h->pcie.switch_bandwidth);
        l->Rate("host_bandwidth", &h->pcie.host_bandwidth);
      }
      if (link == &h->network) l->Int("nics", &h->network.nics);
      l->Finish();
    }
  }
  if (auto n = s.Sub("nvme")) ReadNvme(*n, &h->nvme);
  s.Finish();
}

void ReadTraining(Section& s, TrainingSpec* t) {
  s.Int("micro_batch_size", &t->micro_batch_size);
  s.Int("gradient_accumulation_steps", &t->gradient_accumulation_steps);
  if (auto p = s.Choice("precision", {"fp16", "bf16", "fp32"}))
    t->precision = *p == 0 ? Precision::kFp16 : *p == 1 ? Precision::kBf16 : Precision::kFp32;
  s.Bool("activation_checkpointing", &t->activation_checkpointing);
  s.Bool("cpu_checkpointing", &t->cpu_checkpointing);
  s.Bool("partition_activations", &t->partition_activations);
  s.Bool("split_transformers", &t->split_transformers);
  s.Bool("synchronize_checkpoint_boundary", &t->synchronize_checkpoint_boundary);
  s.Finish();
}

static void ReadDevice(Section& s, OffloadDevice* out) {
  if (auto d = s.Choice("device", {"none", "cpu", "nvme"}))
    *out = *d == 0 ? OffloadDevice::kNone : *d == 1 ? OffloadDevice::kCpu : OffloadDevice::kNvme;
}

// A swap directory in a system tree is refused at its key (paths.h).
static void CheckNvmePath(Section& s, const std::string& path) {
  if (Status st = CheckUserDirectory("the swap directory", path); !st.ok()) s.Error("nvme_path", st.message());
}

void FinishDeepSpeedSection(Section& s, const ReleaseProfile& release) {
  if (release.dict_config) {
    const std::string why =
        std::string("DeepSpeed ") + release.name + " ignores keys it does not read (check the spelling)";
    s.Finish(why.c_str());
  } else {
    s.Finish(
        nullptr,
        "DeepSpeed refuses unknown keys here too (runtime/config_utils.py DeepSpeedConfigModel, extra=\"forbid\")");
  }
}

// The deprecated spellings of the offload sections.
// Current DeepSpeed (runtime/zero/config.py, deprecated fields processed by
// config_utils.py _process_deprecated_field): cpu_offload sets
// offload_optimizer and cpu_offload_param (singular) offload_param, to the
// CPU with their defaults when true and to none when false, and either one
// given with the section it replaces is an assertion; cpu_offload_use_pin_memory
// only warns. A dict-reading release (dict_config) instead reads
// cpu_offload and the plural cpu_offload_params, each replacing its section
// whenever present, and not the singular.
static void ReadDeprecatedOffloadKeys(Section& s, ZeroConfig* z, const ReleaseProfile& release) {
  auto replace = [&](const char* key, const char* section, auto* config) {
    bool on = false;
    if (!s.Bool(key, &on)) return;
    if (s.present(section) && !release.dict_config) {
      s.Error(key, std::string("DeepSpeed refuses this config: \"Cannot provide deprecated parameter '") + key +
                       "' and replacing parameter '" + section +
                       "' together\" (runtime/config_utils.py _process_deprecated_field). Keep only " + section);
      return;
    }
    if (s.present(section))
      s.sink().NotModelled(s.path() + "." + section, std::string("DeepSpeed ") + release.name + " reads " + key +
                                                         " instead and ignores this section");
    *config = {};
    if (on) config->device = OffloadDevice::kCpu;
  };
  replace("cpu_offload", "offload_optimizer", &z->offload_optimizer);
  const char* params_key = release.dict_config ? "cpu_offload_params" : "cpu_offload_param";
  replace(params_key, "offload_param", &z->offload_param);
  bool pin = false;
  if (s.Bool("cpu_offload_use_pin_memory", &pin)) {
    if (release.cpu_offload_use_pin_memory) {
      z->offload_param.pin_memory = pin;
      z->offload_optimizer.pin_memory = pin;
    } else {
      s.sink().NotModelled(s.path() + ".cpu_offload_use_pin_memory",
                           "deprecated: DeepSpeed only warns, and pins as offload_param and offload_optimizer say");
    }
  }
  if (release.dict_config)
    s.Ignore({"cpu_offload_param"}, "DeepSpeed before v0.7.0 reads the plural cpu_offload_params, not this key");
}

// ZeRO++ (DeepSpeed v0.9.5, PR #3784): read under the current release;
// earlier releases do not know the keys.
void ReadZeroPlusPlus(Section& s, ZeroConfig* z, const ReleaseProfile& release) {
  if (release.dict_config) {
    const std::string why = std::string("DeepSpeed ") + release.name + " has no ZeRO++ (v0.9.5)";
    s.Ignore({"zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_gradients"}, why.c_str());
    return;
  }
  s.Int("zero_hpz_partition_size", &z->zero_hpz_partition_size);
  s.Bool("zero_quantized_weights", &z->zero_quantized_weights);
  s.Bool("zero_quantized_gradients", &z->zero_quantized_gradients);
}

void ReadZero(Section& s, ZeroConfig* z, bool* overlap_comm_set, const ReleaseProfile& release) {
  s.Int("stage", &z->stage);
  if (auto p = s.Sub("offload_param")) {
    ReadDevice(*p, &z->offload_param.device);
    p->Path("nvme_path", &z->offload_param.nvme_path);
    CheckNvmePath(*p, z->offload_param.nvme_path);
    p->Int("buffer_count", &z->offload_param.buffer_count);
    p->Count("buffer_size", &z->offload_param.buffer_size);
    p->Count("max_in_cpu", &z->offload_param.max_in_cpu);
    p->Bool("pin_memory", &z->offload_param.pin_memory);
    FinishDeepSpeedSection(*p, release);
  }
  if (auto o = s.Sub("offload_optimizer")) {
    ReadDevice(*o, &z->offload_optimizer.device);
    o->Path("nvme_path", &z->offload_optimizer.nvme_path);
    CheckNvmePath(*o, z->offload_optimizer.nvme_path);
    o->Int("buffer_count", &z->offload_optimizer.buffer_count);
    o->Bool("pin_memory", &z->offload_optimizer.pin_memory);
    o->Bool("pipeline_read", &z->offload_optimizer.pipeline_read);
    o->Bool("pipeline_write", &z->offload_optimizer.pipeline_write);
    o->Bool("pipeline", &z->offload_optimizer.pipeline_read);  // DeepSpeed's older alias
    if (o->Double("ratio", &z->offload_optimizer.ratio) && release.dict_config) {
      s.sink().NotModelled(o->path() + ".ratio", std::string("DeepSpeed ") + release.name + " has no partial offload");
      z->offload_optimizer.ratio = 1;
    } else if (z->offload_optimizer.ratio < 1 && z->offload_optimizer.device == OffloadDevice::kNvme) {
      s.sink().NotModelled(o->path() + ".ratio",
                           "partial offload with the optimizer on NVMe is not planned (DeepSpeed swaps the GPU "
                           "sub-groups too): planned as ratio 1");
    }
    o->Ignore({"fast_init"});
    FinishDeepSpeedSection(*o, release);
  }
  s.Count("stage3_prefetch_bucket_size", &z->stage3_prefetch_bucket_size);
  s.Count("stage3_max_live_parameters", &z->stage3_max_live_parameters);
  s.Count("stage3_max_reuse_distance", &z->stage3_max_reuse_distance);
  s.Count("stage3_param_persistence_threshold", &z->stage3_param_persistence_threshold);
  // DeepSpeed's field names without the "stage3_" prefix are aliases.
  s.Count("prefetch_bucket_size", &z->stage3_prefetch_bucket_size);
  s.Count("max_live_parameters", &z->stage3_max_live_parameters);
  s.Count("max_reuse_distance", &z->stage3_max_reuse_distance);
  s.Count("param_persistence_threshold", &z->stage3_param_persistence_threshold);
  s.Count("sub_group_size", &z->sub_group_size);
  *overlap_comm_set = s.Bool("overlap_comm", &z->overlap_comm);
  s.Count("reduce_bucket_size", &z->reduce_bucket_size);
  s.Count("allgather_bucket_size", &z->allgather_bucket_size);
  ReadDeprecatedOffloadKeys(s, z, release);
  // DeepSpeed knobs Strata accepts without modelling them: reported in the
  // not-modelled warning with why.
  // At DeepSpeed's default these are what Strata plans: silent then.
  ReadZeroPlusPlus(s, z, release);
  const char* const kDefaultOnly =
      "only DeepSpeed's default is planned (MiCS and the other reductions are not modelled)";
  for (auto [key, def] :
       {std::pair{"contiguous_gradients", true}, std::pair{"reduce_scatter", true},
        std::pair{"round_robin_gradients", false}, std::pair{"use_multi_rank_bucket_allreduce", true}}) {
    bool v = def;
    if (s.Bool(key, &v) && v != def) s.sink().NotModelled(s.path() + "." + key, kDefaultOnly);
    // stage3.py __init__: "when enable all_to_all_reduce, reduce_scatter
    // should also be enabled for data type checks."
    if (std::string_view(key) == "reduce_scatter" && !v && z->zero_quantized_gradients && z->stage == 3)
      s.Error(key,
              "DeepSpeed refuses this config: zero_quantized_gradients needs reduce_scatter (stage3.py "
              "asserts \"when enable all_to_all_reduce, reduce_scatter should also be enabled\"): drop "
              "reduce_scatter: false");
  }
  s.Ignore({"zero_quantized_nontrainable_weights", "mics_shard_size", "mics_hierarchical_params_gather",
            "use_all_reduce_for_fetch_params", "model_persistence_threshold"},
           kDefaultOnly);
  s.Ignore({"allgather_partitions", "load_from_fp32_weights", "elastic_checkpoint", "ignore_unused_parameters",
            "legacy_stage1", "stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
            "gather_16bit_weights_on_model_save", "memory_efficient_linear", "pipeline_loading_checkpoint",
            "override_module_apply", "log_trace_cache_warnings", "stage3_module_granularity_threshold"},
           "checkpointing, logging and module hooks: no effect on the iteration's memory or traffic");
  FinishDeepSpeedSection(s, release);
}

void ReadAio(Section& s, AioConfig* a) {
  s.Size("block_size", &a->block_size);
  s.Int("queue_depth", &a->queue_depth);
  s.Int("intra_op_parallelism", &a->intra_op_parallelism);
  s.Int("thread_count", &a->intra_op_parallelism);  // DeepSpeed's older name
  s.Bool("single_submit", &a->single_submit);
  s.Bool("overlap_events", &a->overlap_events);
  s.Ignore({"use_gds"}, "GPUDirect Storage is not modelled");
  s.Finish();
}

void ReadParallelism(Section& s, ParallelismSpec* p) {
  s.Int("tensor", &p->tensor);
  s.Int("pipeline", &p->pipeline);
  s.Bool("sequence_parallel", &p->sequence_parallel);
  s.Finish();
}

void ReadPolicy(Section& s, PolicyConfig* p) {
  if (auto e = s.Choice("eviction", {"lru", "lfu", "fifo", "belady", "cost_aware"}))
    p->eviction = static_cast<EvictionKind>(*e);
  s.Size("gpu_cache", &p->gpu_cache);
  s.Size("cpu_cache", &p->cpu_cache);
  s.Bool("prefetch_optimizer_states", &p->prefetch_optimizer_states);
  s.Bool("prefetch_checkpoints", &p->prefetch_checkpoints);
  s.Bool("host_hooks", &p->host_hooks);
  s.Size("write_buffer", &p->write_buffer);
  if (auto e = s.Choice("compression", {"none", "lz4", "zstd"})) p->compression.codec = static_cast<CodecKind>(*e);
  s.Int("compression_level", &p->compression.level);
  s.Double("compression_ratio", &p->compression.ratio);
  s.Int("compression_threads", &p->compression.threads);
  if (s.PathList("stripe_paths", &p->stripe_paths))
    for (const std::string& path : p->stripe_paths)
      if (Status st = CheckUserDirectory("a stripe directory", path); !st.ok()) s.Error("stripe_paths", st.message());
  // Strata's delayed parameter update (docs/dpu.md): present, it is on.
  if (auto d = s.Sub("delayed_update")) {
    p->delayed_update_warmup = 0;
    if (d->Int("warmup_steps", &p->delayed_update_warmup, /*required=*/true) && p->delayed_update_warmup < 0)
      d->Error("warmup_steps", "must be at least 0 (got " + std::to_string(p->delayed_update_warmup) +
                                   "): the ordinary steps before the delay starts");
    d->Finish();
  }
  if (auto e = s.Choice("prefetch", {"deepspeed", "window"})) p->prefetch = static_cast<PrefetchKind>(*e);
  if (auto e = s.Choice("deepspeed_stage3", {"current", "v0.5", "v0.3", "v0.3.13"}))
    p->deepspeed_stage3 = static_cast<DeepSpeedStage3>(*e);
  // The release profile's aligned_trace (release_profile.h). It chooses
  // between two codes of one release family, so a value no release of the
  // chosen one had is refused, not ignored: current DeepSpeed's fetch queue
  // has no recorded trace (PR #1453), and v0.3.13 registers no reset hook
  // on the top module (before PR #867).
  const char* key = nullptr;
  if (s.Bool("v05_aligned_trace", &p->aligned_trace)) {
    key = "v05_aligned_trace";
    s.sink().Warn(s.path() + ".v05_aligned_trace is deprecated: use " + s.path() +
                  ".aligned_trace (the release profile's flag, docs/policies.md)");
  }
  if (s.Bool("aligned_trace", &p->aligned_trace)) key = "aligned_trace";
  if (key != nullptr) {
    const ReleaseProfile& release = ReleaseProfileFor(p->deepspeed_stage3);
    if (!release.module_trace_coordinator)
      s.Error(key, std::string(key) +
                       " applies to policy.deepspeed_stage3 v0.5 and v0.3 (the coordinator's recorded "
                       "trace); current DeepSpeed's fetch queue (PR #1453) has none: set deepspeed_stage3 or drop "
                       "the key");
    else if (release.aligned_trace && !p->aligned_trace)
      s.Error(key, std::string(key) +
                       " false under policy.deepspeed_stage3 v0.3.13: its trace is aligned (no reset hook "
                       "on the top module before DeepSpeed PR #867, v0.3.14); the trace off by one is v0.3 or v0.5");
  }
  s.Finish();
}

}  // namespace strata::config
