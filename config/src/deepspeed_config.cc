#include "deepspeed_config.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "sections.h"
#include "strata/core/release_profile.h"

namespace strata::config {
namespace {

bool IsAuto(const YAML::Node& n) { return n && n.IsScalar() && n.Scalar() == "auto"; }

// The Hugging Face Trainer's "auto" values (transformers
// integrations/deepspeed.py trainer_config_process, trainer_config_finalize),
// filled from the scenario where it holds them.
void FillAuto(YAML::Node root, const Scenario& s) {
  const TrainingSpec& t = s.training;
  auto fill = [](YAML::Node parent, const char* key, const std::string& value) {
    if (parent && parent.IsMap() && IsAuto(parent[key])) parent[key] = value;
  };
  const int world = s.hardware.world_size();
  fill(root, "train_micro_batch_size_per_gpu", std::to_string(t.micro_batch_size));
  fill(root, "gradient_accumulation_steps", std::to_string(t.gradient_accumulation_steps));
  fill(root, "train_batch_size",
       std::to_string(static_cast<int64_t>(t.micro_batch_size) * t.gradient_accumulation_steps * world));
  fill(root["fp16"], "enabled", t.precision == Precision::kFp16 ? "true" : "false");
  for (const char* bf : {"bf16", "bfloat16"})
    fill(root[bf], "enabled", t.precision == Precision::kBf16 ? "true" : "false");
  // The hidden-size keys: the model's hidden size (transformers only; an MLP
  // has none, and its "auto" stays an error, as with a model without one).
  YAML::Node z = root["zero_optimization"];
  if (s.model.kind != ModelKind::kTransformer || !z || !z.IsMap()) return;
  const int64_t h = s.model.hidden_size;
  int stage = s.zero.stage;
  if (z["stage"] && z["stage"].IsScalar()) {
    try {
      stage = z["stage"].as<int>();
    } catch (const YAML::Exception&) {  // reported by ReadZero
    }
  }
  fill(z, "reduce_bucket_size", std::to_string(h * h));
  if (stage == 3) {
    fill(z, "stage3_prefetch_bucket_size", std::to_string(static_cast<int64_t>(0.9 * static_cast<double>(h * h))));
    fill(z, "stage3_param_persistence_threshold", std::to_string(10 * h));
  }
}

// deepspeed/runtime/config.py _set_batch_related_parameters and
// _batch_assertion, with the data-parallel world of the scenario.
void ReadBatch(Section& top, const YAML::Node& root, const std::string& path, Scenario* s, ErrorSink& sink) {
  std::optional<int64_t> train, micro, acc;
  int64_t v = 0;
  if (top.Int64("train_batch_size", &v)) train = v;
  if (top.Int64("train_micro_batch_size_per_gpu", &v)) micro = v;
  if (top.Int64("gradient_accumulation_steps", &v)) acc = v;
  if (!train && !micro && !acc) return;  // the scenario's batch stands
  const int64_t world = s->hardware.world_size();
  const YAML::Mark at = (train   ? root["train_batch_size"]
                         : micro ? root["train_micro_batch_size_per_gpu"]
                                 : root["gradient_accumulation_steps"])
                            .Mark();
  auto fail = [&](const std::string& msg) {
    sink.Error(path, at, msg + " (DeepSpeed's assertion in runtime/config.py)");
  };
  if (!train && !micro) return fail("Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
  if (train && micro && !acc) {
    acc = *micro > 0 && world > 0 ? *train / *micro / world : 0;
  } else if (train && acc && !micro) {
    micro = world > 0 && *acc > 0 ? *train / world / *acc : 0;
  } else if (micro && acc && !train) {
    train = *micro * *acc * world;
  } else if (train && !micro && !acc) {
    acc = 1;
    micro = world > 0 ? *train / world : 0;
  } else if (micro && !train && !acc) {
    acc = 1;
    train = *micro * world;
  }
  if (*train <= 0) return fail("Train batch size: " + std::to_string(*train) + " has to be greater than 0");
  if (*micro <= 0) return fail("Micro batch size per gpu: " + std::to_string(*micro) + " has to be greater than 0");
  if (*acc <= 0) return fail("Gradient accumulation steps: " + std::to_string(*acc) + " has to be greater than 0");
  if (*train != *micro * *acc * world)
    return fail(
        "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size " +
        std::to_string(*train) + " != " + std::to_string(*micro) + " * " + std::to_string(*acc) + " * " +
        std::to_string(world));
  if (*micro > 2147483647 || *acc > 2147483647) return fail("batch sizes out of range");
  s->training.micro_batch_size = static_cast<int>(*micro);
  s->training.gradient_accumulation_steps = static_cast<int>(*acc);
}

// fp16 / bf16 (bfloat16 is DeepSpeed's older name): the model precision.
void ReadPrecision(Section& top, const YAML::Node& root, const std::string& path, const ReleaseProfile& release,
                   Scenario* s, ErrorSink& sink) {
  bool fp16 = false, bf16 = false, any = false;
  if (auto f = top.Sub("fp16")) {
    any = true;
    f->Bool("enabled", &fp16);
    f->Ignore({"loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis", "consecutive_hysteresis",
               "min_loss_scale", "auto_cast"},
              "loss scaling changes values, not the schedule");
    f->Ignore({"fp16_master_weights_and_grads"}, "Strata keeps fp32 master weights and gradients");
    FinishDeepSpeedSection(*f, release);
  }
  for (const char* name : {"bf16", "bfloat16"}) {
    if (auto b = top.Sub(name)) {
      any = true;
      bool on = false;
      b->Bool("enabled", &on);
      bf16 = bf16 || on;
      b->Ignore({"immediate_grad_update", "check_grad_overflow"}, "changes values, not the schedule");
      b->Ignore({"bf16_master_weights_and_grads", "bf16_optimizer_states"},
                "Strata keeps fp32 master weights, gradients and optimizer states");
      FinishDeepSpeedSection(*b, release);
    }
  }
  if (!any) return;  // the scenario's precision stands (DeepSpeed alone would train in fp32)
  if (fp16 && bf16) {
    sink.Error(path, root["fp16"].Mark(),
               "bfloat16 and fp16 modes cannot be simultaneously enabled (DeepSpeed's error)");
    return;
  }
  s->training.precision = fp16 ? Precision::kFp16 : bf16 ? Precision::kBf16 : Precision::kFp32;
}

std::string Lower(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return v;
}

// communication_data_type (runtime/config.py get_communication_data_type):
// fp32, fp16 or bf16 (v0.5.x spelled it bfp16); anything else is DeepSpeed's
// ValueError. A release that does not read the key ignores it.
void ReadCommunicationType(Section& top, const ReleaseProfile& release, const Scenario& s, ErrorSink& sink) {
  if (!top.present("communication_data_type")) return;
  std::string t;
  if (!top.String("communication_data_type", &t)) return;
  if (release.bf16_communication_name == nullptr) {
    sink.NotModelled("communication_data_type", std::string("DeepSpeed ") + release.name + " does not read it");
    return;
  }
  const std::string bf16 = release.bf16_communication_name;
  const std::string v = Lower(t);
  if (v != "fp32" && v != "fp16" && v != bf16) {
    top.Error("communication_data_type",
              "DeepSpeed refuses this config: \"Invalid communication_data_type. Supported data types: ['fp16', '" +
                  bf16 + "', 'fp32']. Got: " + v + "\" (ValueError in runtime/config.py get_communication_data_type)");
    return;
  }
  const std::string as_precision = v == bf16 ? "bf16" : v;
  if (as_precision != PrecisionName(s.training.precision))
    sink.NotModelled("communication_data_type", "Strata reduces gradients in the model precision");
}

// zero_optimization: a mapping (DeepSpeedZeroConfig), or the legacy boolean
// (runtime/zero/config.py read_zero_config_deprecated: true is stage 1 with
// allgather_bucket_size from the top-level allgather_size, false stage 0).
void ReadZeroSection(Section& top, const YAML::Node& root, const std::string& path, const ReleaseProfile& release,
                     Scenario* s, bool* overlap_comm_set, ErrorSink& sink) {
  if (!top.present("zero_optimization")) return;
  const YAML::Node z = root["zero_optimization"];
  if (z.IsNull()) {
    // runtime/zero/config.py get_zero_config: DeepSpeedZeroConfig(**None).
    sink.Error(path, z.Mark(),
               "zero_optimization: null is refused by DeepSpeed (get_zero_config in runtime/zero/config.py unpacks it "
               "as keyword arguments: TypeError); give a mapping, e.g. {\"stage\": 0}, or leave the key out");
    return;
  }
  sink.Forget("zero_optimization");
  s->zero = ZeroConfig{};
  *overlap_comm_set = false;
  bool on = false;
  if (z.IsScalar() && (z.Scalar() == "true" || z.Scalar() == "false") && top.Bool("zero_optimization", &on)) {
    s->zero.stage = on ? 1 : 0;
    if (on) top.Count("allgather_size", &s->zero.allgather_bucket_size);
    sink.Warn(path + ": \"zero_optimization\": " + z.Scalar() +
              " is DeepSpeed's deprecated form (read_zero_config_deprecated in runtime/zero/config.py): stage " +
              std::to_string(s->zero.stage) + "; write {\"stage\": " + std::to_string(s->zero.stage) + "} instead");
    return;
  }
  if (auto zs = top.Sub("zero_optimization")) ReadZero(*zs, &s->zero, overlap_comm_set, release);
}

}  // namespace

void ApplyDeepSpeed(const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides,
                    Scenario* s, bool* overlap_comm_set, ErrorSink& sink,
                    const std::vector<std::pair<std::string, std::string>>& scenario_sections) {
  auto root = LoadFileNode(path, sink, /*strict_json=*/true);
  if (root && root->IsMap()) {
    const YAML::Node& file = *root;  // const: looking a key up adds none
    for (const auto& [key, where] : scenario_sections)
      if (file[key])
        sink.Warn(where + ": " + key + " is replaced by the DeepSpeed config's (" + path +
                  "): change it there, or with --set, which applies to both");
  }
  if (!root) return;
  // --set under a section this file replaces goes into the file's section.
  for (const auto& [key, value] : overrides) {
    const std::string top_key = key.substr(0, key.find('.'));
    if ((top_key == "zero_optimization" || top_key == "aio") && key.size() > top_key.size() && (*root)[top_key])
      ApplyOverride(*root, key, value);
  }
  FillAuto(*root, *s);
  Section top(sink, path, *root, "", root->Mark());
  // The DeepSpeed release planned (policy.deepspeed_stage3, read before
  // this file): how it reads the config's keys.
  const ReleaseProfile release = ReleaseProfileOf(s->policy);
  ReadBatch(top, *root, path, s, sink);
  ReadPrecision(top, *root, path, release, s, sink);
  if (auto c = top.Sub("activation_checkpointing")) {
    // The section configures deepspeed.checkpointing, which a model calls
    // per layer: its presence is taken as "the layers are checkpointed".
    s->training.activation_checkpointing = true;
    c->Bool("cpu_checkpointing", &s->training.cpu_checkpointing);
    c->Bool("partition_activations", &s->training.partition_activations);
    c->Bool("synchronize_checkpoint_boundary", &s->training.synchronize_checkpoint_boundary);
    c->Ignore({"contiguous_memory_optimization", "number_checkpoints", "profile"},
              "Strata checkpoints each layer's input");
    c->Finish();
  }
  if (auto o = top.Sub("optimizer")) {
    std::string type;
    if (o->String("type", &type)) {
      const std::string t = Lower(type);
      if (t != "adam" && t != "adamw")
        sink.Error(path, (*root)["optimizer"]["type"].Mark(),
                   "optimizer.type '" + type +
                       "' is not modelled: Strata models Adam and AdamW (an fp32 master and two "
                       "fp32 moments per parameter), and another optimizer's states differ");
    }
    // engine.py _configure_basic_optimizer (every release).
    const YAML::Node& r = *root;
    const YAML::Node params = r["optimizer"]["params"];
    if (params && params.IsMap() && params["max_grad_norm"])
      sink.Error(path, params["max_grad_norm"].Mark(),
                 "optimizer.params.max_grad_norm: DeepSpeed refuses this config: \"'max_grad_norm' is not supported as "
                 "an optimizer parameter, please switch to using the deepspeed parameter 'gradient_clipping'\" "
                 "(ValueError in engine.py _configure_basic_optimizer). Move it to the top-level key "
                 "gradient_clipping");
    o->Ignore({"params"}, "learning rate and betas change values, not the schedule");
    o->Finish();
  }
  ReadCommunicationType(top, release, *s, sink);
  ReadZeroSection(top, *root, path, release, s, overlap_comm_set, sink);
  if (top.present("aio")) {
    sink.Forget("aio");
    s->aio = AioConfig{};
    if (auto a = top.Sub("aio")) ReadAio(*a, &s->aio);
  }
  top.Ignore({"scheduler"}, "the learning-rate schedule changes values, not the schedule");
  top.Ignore({"gradient_clipping"}, "the gradient norm is not charged");
  top.Ignore({"data_types"}, "Strata accumulates gradients in the model precision");
  top.Ignore({"amp"}, "apex AMP is not modelled (use fp16 or bf16)");
  top.Ignore({"prescale_gradients", "gradient_predivide_factor", "sparse_gradients"}, "changes values, not traffic");
  top.Ignore({"steps_per_print", "wall_clock_breakdown", "dump_state", "memory_breakdown", "tensorboard", "wandb",
              "csv_monitor", "comet", "flops_profiler", "comms_logger", "monitor_config", "timers"},
             "logging and profiling");
  top.Ignore({"zero_allow_untested_optimizer",
              "zero_force_ds_cpu_optimizer",
              "checkpoint",
              "load_universal_checkpoint",
              "elasticity",
              "autotuning",
              "compression_training",
              "seed",
              "curriculum_learning",
              "data_efficiency",
              "disable_allgather",
              "eigenvalue",
              "progressive_layer_drop",
              "quantize_training",
              "pipeline",
              "sequence_parallel_size",
              "graph_harvesting",
              "compile",
              "weight_quantization",
              "hybrid_engine"},
             "not part of the offload schedule Strata plans");
  // Any other key is listed too (DeepSpeed's config has more than Strata can
  // know of), so a misspelt key shows up in the warning rather than silently.
  top.Finish("not a key Strata knows (check its spelling)");
  // --set training.* wins over the batch, precision and checkpointing keys.
  YAML::Node again(YAML::NodeType::Map);
  bool any = false;
  for (const auto& [key, value] : overrides)
    if (key.rfind("training.", 0) == 0) ApplyOverride(again, key, value), any = true;
  if (any) {
    Section set(sink, "--set", again, "", again.Mark());
    if (auto t = set.Sub("training")) ReadTraining(*t, &s->training);
  }
}

}  // namespace strata::config
