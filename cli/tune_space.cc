// strata tune's default search space and the overrides that realise a point.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tune.h"

namespace strata::cli {
namespace {

std::string Num(int64_t v) { return std::to_string(v); }
std::string Bool(bool b) { return b ? "true" : "false"; }

// `values` with `own` added where missing, in numeric order when all are numbers.
std::vector<std::string> With(std::vector<std::string> values, const std::string& own) {
  if (std::find(values.begin(), values.end(), own) == values.end()) values.push_back(own);
  const bool numbers = std::all_of(values.begin(), values.end(), [](const std::string& v) {
    return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
  });
  if (numbers)
    std::sort(values.begin(), values.end(),
              [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
  return values;
}

bool Is(const Setting& p, const char* key, const char* value) {
  auto it = p.find(key);
  return it != p.end() && it->second == value;
}
bool Stage3(const Setting& p) { return Is(p, "zero_optimization.stage", "3"); }
bool ParamsOn(const Setting& p, const char* device) {
  return Stage3(p) && Is(p, "zero_optimization.offload_param.device", device);
}
bool OptimizerOn(const Setting& p, const char* device) {
  return !Is(p, "zero_optimization.stage", "0") && Is(p, "zero_optimization.offload_optimizer.device", device);
}
bool AnyNvme(const Setting& p) { return ParamsOn(p, "nvme") || OptimizerOn(p, "nvme"); }
bool Always(const Setting&) { return true; }

// A knob of `values` with the scenario's own value `own` among them, where
// the search starts.
void AddKnob(TuneSpace& t, std::string key, std::vector<std::string> values, const std::string& own,
             std::function<bool(const Setting&)> relevant, std::string neutral = {}) {
  t.start[key] = own;
  t.knobs.push_back({std::move(key), With(std::move(values), own), std::move(relevant), std::move(neutral)});
}

bool FsdpOffload(const Setting& p) { return Is(p, "fsdp.offload_policy", "cpu"); }

// Micro batches that divide the batch per data-parallel rank at the start.
std::vector<std::string> MicroBatches(const TuneSpace& t, int dp0) {
  std::vector<std::string> micro;
  for (int64_t m = 1; m <= t.global_batch / dp0 && micro.size() < 8; m *= 2)
    if ((t.global_batch / dp0) % m == 0) micro.push_back(Num(m));
  return micro;
}

}  // namespace

// framework: fsdp: FSDP2's own knobs (docs/fsdp.md), the batch split and
// checkpointing; the world stays one shard group (no tensor or pipeline
// parallelism under fsdp).
static TuneSpace FsdpSpace(const Scenario& s, TuneSpace t) {
  const FsdpSpec& f = s.fsdp;
  const int world = s.hardware.world_size();
  // reshard_after_forward: true, false, or a group size k dividing the
  // shard group, within a node.
  std::vector<std::string> reshard = {"true", "false"};
  const int shard = f.shard > 0 ? f.shard : world / std::max(1, f.replicate);
  for (int k = 2; k < shard && k <= s.hardware.gpus_per_node; k *= 2)
    if (shard % k == 0) reshard.push_back(Num(k));
  const int k = f.reshard_after_forward;
  AddKnob(t, "fsdp.reshard_after_forward", reshard, k < 0 ? "true" : k == 0 ? "false" : Num(k), Always);
  AddKnob(t, "fsdp.offload_policy", {"none", "cpu"}, f.offload_cpu ? "cpu" : "none", Always, "none");
  AddKnob(t, "fsdp.pin_memory", {"false", "true"}, Bool(f.pin_memory), FsdpOffload, "true");
  if (f.units.empty()) AddKnob(t, "fsdp.units", {"blocks", "root"}, f.root_only ? "root" : "blocks", Always);
  AddKnob(t, "fsdp.forward_prefetch", {"0", "1", "2"}, Num(f.forward_prefetch), Always);
  AddKnob(t, "fsdp.backward_prefetch", {"0", "1", "2"}, Num(f.backward_prefetch), Always);
  AddKnob(t, kMicroBatchKey, MicroBatches(t, world), Num(s.training.micro_batch_size), Always);
  AddKnob(t, "training.activation_checkpointing", {"false", "true"}, Bool(s.training.activation_checkpointing), Always);
  t.context = t.start;
  return t;
}

TuneSpace DefaultSpace(const Scenario& s) {
  TuneSpace t;
  const int world = s.hardware.world_size();
  t.nodes = s.hardware.nodes, t.gpus_per_node = s.hardware.gpus_per_node;
  const int dp0 = std::max(1, world / std::max(1, s.parallelism.tensor * s.parallelism.pipeline));
  t.global_batch = static_cast<int64_t>(s.training.micro_batch_size) * s.training.gradient_accumulation_steps * dp0;
  t.micro = s.training.micro_batch_size;
  t.tensor = s.parallelism.tensor;
  t.pipeline = s.parallelism.pipeline;
  if (s.framework == Framework::kFsdp) return FsdpSpace(s, std::move(t));
  const bool nvme = s.hardware.nvme.capacity.v > 0;
  const auto& z = s.zero;
  AddKnob(t, "zero_optimization.stage", {"0", "1", "2", "3"}, Num(z.stage), Always);
  std::vector<std::string> devices = {"none", "cpu"};
  if (nvme) devices.push_back("nvme");
  AddKnob(
      t, "zero_optimization.offload_optimizer.device", devices,
      std::string(OffloadDeviceName(z.offload_optimizer.device)),
      [](const Setting& p) { return !Is(p, "zero_optimization.stage", "0"); }, "none");
  AddKnob(t, "zero_optimization.offload_param.device", devices, std::string(OffloadDeviceName(z.offload_param.device)),
          Stage3, "none");
  AddKnob(t, "zero_optimization.offload_param.buffer_count", {"4", "5", "8", "16", "32"},
          Num(z.offload_param.buffer_count), [](const Setting& p) { return ParamsOn(p, "nvme"); });
  AddKnob(t, "zero_optimization.offload_param.buffer_size", {"50000000", "100000000", "200000000", "500000000"},
          Num(z.offload_param.buffer_size.v), [](const Setting& p) { return ParamsOn(p, "nvme"); });
  AddKnob(t, "zero_optimization.offload_param.pin_memory", {"false", "true"}, Bool(z.offload_param.pin_memory),
          [](const Setting& p) { return ParamsOn(p, "cpu") || ParamsOn(p, "nvme"); });
  AddKnob(t, "zero_optimization.offload_optimizer.pin_memory", {"false", "true"}, Bool(z.offload_optimizer.pin_memory),
          [](const Setting& p) { return OptimizerOn(p, "cpu") || OptimizerOn(p, "nvme"); });
  AddKnob(t, "zero_optimization.stage3_prefetch_bucket_size", {"10000000", "50000000", "200000000", "500000000"},
          Num(z.stage3_prefetch_bucket_size.v), Stage3);
  AddKnob(t, "zero_optimization.stage3_max_live_parameters", {"100000000", "1000000000", "3000000000"},
          Num(z.stage3_max_live_parameters.v), Stage3);
  AddKnob(t, "zero_optimization.stage3_max_reuse_distance", {"100000000", "1000000000", "3000000000"},
          Num(z.stage3_max_reuse_distance.v), Stage3);
  AddKnob(t, "zero_optimization.stage3_param_persistence_threshold", {"10000", "100000", "1000000"},
          Num(z.stage3_param_persistence_threshold.v), Stage3);
  AddKnob(t, "zero_optimization.sub_group_size", {"100000000", "1000000000", "2000000000"}, Num(z.sub_group_size.v),
          [](const Setting& p) { return Stage3(p) && !Is(p, "zero_optimization.offload_optimizer.device", "none"); });
  if (nvme) {
    AddKnob(t, "aio.block_size", {"262144", "1048576", "4194304"}, Num(s.aio.block_size.v), AnyNvme);
    AddKnob(t, "aio.queue_depth", {"4", "8", "16", "32"}, Num(s.aio.queue_depth), AnyNvme);
  }
  AddKnob(t, kMicroBatchKey, MicroBatches(t, dp0), Num(s.training.micro_batch_size), Always);
  AddKnob(t, "training.activation_checkpointing", {"false", "true"}, Bool(s.training.activation_checkpointing), Always);
  AddKnob(
      t, "training.cpu_checkpointing", {"false", "true"}, Bool(s.training.cpu_checkpointing),
      [](const Setting& p) { return Is(p, "training.activation_checkpointing", "true"); }, "false");
  if (world > 1) {
    std::vector<std::string> degrees;
    for (int d = 1; d <= std::min(8, s.hardware.gpus_per_node); d *= 2) degrees.push_back(Num(d));
    AddKnob(t, "parallelism.tensor", degrees, Num(s.parallelism.tensor), Always);
    if (s.model.layers > 1)
      AddKnob(
          t, "parallelism.pipeline", {"1", "2", "4"}, Num(s.parallelism.pipeline),
          [](const Setting& p) {
            return Is(p, "zero_optimization.stage", "0") || Is(p, "zero_optimization.stage", "1");
          },
          "1");
  }
  t.context = t.start;  // before --only and --fix take keys out of the search
  return t;
}

std::vector<std::string> ChangedKeys(const Setting& from, const Setting& to) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : to)
    if (from.at(k) != v) keys.push_back(k);
  return keys;
}

namespace {
// `p` over the space's context: every default key, p's values winning.
Setting Full(const TuneSpace& space, const Setting& p) {
  Setting full = space.context;
  for (const auto& [key, v] : p) full[key] = v;
  return full;
}
}  // namespace

bool Relevant(const TuneSpace& space, const Knob& k, const Setting& p) {
  return !k.relevant || k.relevant(Full(space, p));
}

Setting Normalize(const TuneSpace& space, Setting p) {
  Setting full = Full(space, p);
  // Relevance depends on other knobs (the stage, the devices): settle it twice.
  for (int pass = 0; pass < 2; ++pass)
    for (const Knob& k : space.knobs)
      if (k.relevant && !k.relevant(full))
        p[k.key] = full[k.key] = k.neutral.empty() ? space.start.at(k.key) : k.neutral;
  return p;
}

int64_t SpaceSize(const TuneSpace& space) {
  int64_t n = 1;
  for (const Knob& k : space.knobs) {
    const auto v = static_cast<int64_t>(std::max<size_t>(k.values.size(), 1));
    n = n > INT64_MAX / v ? INT64_MAX : n * v;
  }
  return n;
}

Result<std::vector<std::pair<std::string, std::string>>> PointOverrides(const TuneSpace& space, const Setting& p) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : p) out.emplace_back(k, v);
  // A count the point sets (a value that is not a positive whole number
  // reads as 0 and is refused below), or the scenario's.
  auto get = [&](const char* key, int64_t dflt) -> int64_t {
    auto it = p.find(key);
    if (it == p.end()) return dflt;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    return end != it->second.c_str() && *end == '\0' && v > 0 ? v : 0;
  };
  // The GPUs of this point: hardware.nodes or gpus_per_node may be searched.
  const int64_t world = get("hardware.nodes", space.nodes) * get("hardware.gpus_per_node", space.gpus_per_node);
  const int64_t model_parallel = get("parallelism.tensor", space.tensor) * get("parallelism.pipeline", space.pipeline);
  if (world <= 0 || model_parallel <= 0 || get(kMicroBatchKey, space.micro) <= 0)
    return Status::InvalidArgument("GPUs, degrees and micro batch must be positive whole numbers");
  if (world % model_parallel != 0)
    return Status::InvalidArgument("tensor x pipeline = " + Num(model_parallel) + " does not divide the " + Num(world) +
                                   " GPUs");
  const int64_t dp = world / model_parallel;
  const int64_t micro = get(kMicroBatchKey, space.micro);
  if (space.global_batch % (micro * dp) != 0)
    return Status::InvalidArgument("train_batch_size " + Num(space.global_batch) +
                                   " is not a multiple of micro batch " + Num(micro) + " x " + Num(dp) +
                                   " data-parallel ranks");
  out.emplace_back("training.gradient_accumulation_steps", Num(space.global_batch / (micro * dp)));
  return out;
}

}  // namespace strata::cli
