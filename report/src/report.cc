#include "strata/report/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "strata/core/codec_profile.h"
#include "strata/plan/write_requests.h"

namespace strata {
namespace {

using Json = nlohmann::ordered_json;
constexpr const char* kTierScope[] = {"per GPU", "per node", "per node"};

std::string Pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

Json ViolationJson(const Violation& v) {
  Json j = {{"kind", v.kind}, {"message", v.message}};
  if (v.kind == "capacity") {
    j["tier"] = TierName(v.tier);
    j["needed_bytes"] = v.needed.v;
    j["capacity_bytes"] = v.capacity.v;
    j["over_bytes"] = (v.needed - v.capacity).v;
    if (v.rank >= 0) j["rank"] = v.rank;
    if (v.node >= 0) j["node"] = v.node;
  }
  if (v.op >= 0) j["op"] = v.op;
  return j;
}

// "  nvme writes: N requests of X KiB on average" for rank 0 (its stage),
// and under write buffering what the same bytes would be unbuffered and
// what is gathered first; "" without NVMe writes.
std::string NvmeWriteLine(const Plan& plan) {
  const WriteCount now = PlanWrites(plan, 0), plain = PlanWrites(plan, 0, /*unbuffered=*/true);
  if (now.requests == 0) return "";
  auto mean = [](const WriteCount& c) { return FormatBytes(Bytes(c.bytes / c.requests)); };
  std::string line = "  nvme writes: " + std::to_string(now.requests) + " requests of " + mean(now) + " on average";
  if (now.requests != plain.requests || now.staged_bytes > 0)
    line += " (write buffering: " + std::to_string(plain.requests) + " of " + mean(plain) + " unbuffered; " +
            FormatBytes(Bytes(now.staged_bytes)) + " gathered in pinned memory first)";
  if (plan.run.compression.codec != CodecKind::kNone && now.bytes > 0) {
    char ratio[96];
    std::snprintf(ratio, sizeof ratio, " (compression: %s, %.4f of the bytes planned to reach the drive)",
                  std::string(ProfileOf(plan.run.compression.codec).name).c_str(), now.stored_bytes / now.bytes);
    line += ratio;
  }
  return line + "\n";
}

}  // namespace

PlanSummary SummarizePlan(const Plan& plan, const ValidationReport& report) {
  PlanSummary s;
  s.ops = static_cast<int64_t>(plan.ops.size());
  s.buffers = static_cast<int64_t>(plan.buffers.size());
  for (const Op& op : plan.ops) {
    ++s.ops_by_kind[static_cast<int>(op.kind)];
    s.bytes_by_link[static_cast<int>(LinkClassOf(op.kind))] += op.bytes;
    s.compute_flops += op.flops;
    s.host_seconds += op.host_seconds;
  }
  s.memory = report.memory;
  return s;
}

std::string EstimateText(const MemoryEstimate& e) {
  std::ostringstream o;
  o << "Scenario " << e.scenario << ": " << FormatCount(static_cast<double>(e.total_params.v)) << " parameters, "
    << e.world_size << " GPU" << (e.world_size > 1 ? "s" : "") << (e.world_size > 1 ? " (" + e.layout + ")" : "")
    << "\n\n";
  o << Pad("tier", 6) << Pad("scope", 10) << Pad("model states", 14) << Pad("activations", 14) << Pad("buffers", 14)
    << Pad("peak", 14) << Pad("capacity", 14) << "fits\n";
  for (Tier t : kAllTiers) {
    const TierEstimate& te = e.tiers[static_cast<int>(t)];
    o << Pad(std::string(TierName(t)), 6) << Pad(kTierScope[static_cast<int>(t)], 10)
      << Pad(FormatBytes(te.model_states), 14) << Pad(FormatBytes(te.activations), 14)
      << Pad(FormatBytes(te.buffers), 14) << Pad(FormatBytes(te.peak), 14) << Pad(FormatBytes(te.capacity), 14)
      << (te.fits() ? "yes" : "NO") << "\n";
  }
  if (e.gpu_reserved.v > 0)
    o << "(the GPU's capacity: hardware.gpu.memory "
      << FormatBytes(e.tiers[static_cast<int>(Tier::kGpu)].capacity + e.gpu_reserved) << " less "
      << FormatBytes(e.gpu_reserved) << " reserved_memory, the process's CUDA context)\n";
  if (e.framework == Framework::kFsdp) {
    // The same 16 bytes a parameter, held as FSDP2 holds them.
    o << "\nFSDP2, sharded states per GPU if all on GPU (4+4+8 bytes/param: fp32 shard, gradient, moments, over "
      << e.data_parallel << " rank" << (e.data_parallel > 1 ? "s" : "")
      << ", before padding): " << FormatBytes(e.zero_paper_gpu_model_states) << "\n";
  } else {
    o << "\nZeRO paper, model states per GPU if all on GPU (stage " << e.stage << " over " << e.data_parallel
      << " data-parallel GPU" << (e.data_parallel > 1 ? "s" : "");
    if (e.model_parallel > 1) o << ", 1/" << e.model_parallel << " of the model each (tensor x pipeline)";
    o << ", 2+2+12 bytes/param): " << FormatBytes(e.zero_paper_gpu_model_states) << "\n";
    if (e.deepspeed)
      o << "DeepSpeed " << e.deepspeed->function << "(" << e.deepspeed->options
        << "): " << FormatBytes(e.deepspeed->gpu_per_gpu) << " per GPU, " << FormatBytes(e.deepspeed->cpu_per_node)
        << " CPU per node\n";
    else
      o << "DeepSpeed has no model-state estimator for stages 0-1\n";
  }
  if (e.peak_stage >= 0)
    o << "\nAllocations (one rank's, of the stages at each tier's peak: the GPU's is pipeline stage " << e.peak_stage
      << "; x count per node):\n";
  else
    o << "\nAllocations (one rank's; x count per node):\n";
  for (Tier t : kAllTiers)
    for (const auto& a : e.allocations) {
      if (a.tier != t) continue;
      o << "  " << Pad(std::string(TierName(t)), 6) << Pad(a.name, 34) << Pad(FormatBytes(a.bytes), 14)
        << (a.count > 1 ? "x" + std::to_string(a.count) + " " : "") << (a.pinned ? "pinned" : "")
        << (a.resident ? "" : " (at peak)") << "\n";
    }
  o << "\n";
  for (const auto& c : e.checks)
    o << (c.severity == ConfigCheck::Severity::kError ? "error" : "warning") << " [" << c.id
      << "]: " << (c.deepspeed_refuses ? "DeepSpeed would refuse this config: " : "") << c.message << "\n";
  for (const auto& v : e.violations) o << "violation [" << v.kind << "]: " << v.message << "\n";
  for (const std::string& n : e.notes) o << n << "\n";
  o << "\n" << EstimateVerdict(e) << "\n";
  return o.str();
}

std::string EstimateVerdict(const MemoryEstimate& e) {
  if (!e.deepspeed_refuses()) return e.feasible() ? "FITS" : "DOES NOT FIT";
  // The memory is measured on a plan that works around the refusal.
  bool memory_fits = e.violations.empty();
  for (const auto& c : e.checks)
    memory_fits = memory_fits && (c.deepspeed_refuses || c.severity != ConfigCheck::Severity::kError);
  return std::string("DEEPSPEED WOULD REFUSE THIS CONFIG (see the errors above; memory ") +
         (memory_fits ? "would fit" : "would not fit either") + ")";
}

std::string EstimateJson(const MemoryEstimate& e) {
  Json j;
  j["scenario"] = e.scenario;
  j["feasible"] = e.feasible();
  j["deepspeed_refuses"] = e.deepspeed_refuses();
  j["total_params"] = e.total_params.v;
  j["largest_layer_params"] = e.largest_layer.v;
  j["world_size"] = e.world_size;
  j["framework"] = e.framework == Framework::kFsdp ? "fsdp" : "deepspeed";
  Json tiers;
  for (Tier t : kAllTiers) {
    const TierEstimate& te = e.tiers[static_cast<int>(t)];
    tiers[std::string(TierName(t))] = {{"scope", kTierScope[static_cast<int>(t)]},
                                       {"capacity_bytes", te.capacity.v},
                                       {"peak_bytes", te.peak.v},
                                       {"model_states_bytes", te.model_states.v},
                                       {"activation_bytes", te.activations.v},
                                       {"buffer_bytes", te.buffers.v},
                                       {"fits", te.fits()}};
    if (t == Tier::kGpu) tiers["gpu"]["reserved_bytes"] = e.gpu_reserved.v;
  }
  j["tiers"] = tiers;
  Json vs = Json::array();
  for (const auto& v : e.violations) vs.push_back(ViolationJson(v));
  // Configuration errors are violations too: scripts check one list.
  for (const auto& c : e.checks)
    if (c.severity == ConfigCheck::Severity::kError) {
      Json v = {{"kind", c.id}, {"message", c.message}, {"deepspeed_refuses", c.deepspeed_refuses}};
      if (c.id == "nvme_capacity_exceeded") {
        const auto& te = e.tiers[static_cast<int>(Tier::kNvme)];
        v["tier"] = "nvme";
        v["needed_bytes"] = te.peak.v;
        v["capacity_bytes"] = te.capacity.v;
        v["over_bytes"] = (te.peak - te.capacity).v;
      }
      vs.push_back(v);
    }
  j["violations"] = vs;
  Json cs = Json::array();
  for (const auto& c : e.checks)
    cs.push_back({{"id", c.id},
                  {"severity", c.severity == ConfigCheck::Severity::kError ? "error" : "warning"},
                  {"deepspeed_refuses", c.deepspeed_refuses},
                  {"message", c.message}});
  j["checks"] = cs;
  Json as = Json::array();
  for (const auto& a : e.allocations)
    as.push_back({{"name", a.name},
                  {"tier", TierName(a.tier)},
                  {"kind", StateKindName(a.kind)},
                  {"bytes", a.bytes.v},
                  {"pinned", a.pinned},
                  {"resident", a.resident},
                  {"count", a.count}});
  j["allocations"] = as;
  j["layout"] = e.layout;
  j["zero_paper"] = {{"stage", e.stage},
                     {"data_parallel", e.data_parallel},
                     {"model_parallel", e.model_parallel},
                     {"gpu_model_states_bytes", e.zero_paper_gpu_model_states.v}};
  if (e.peak_stage >= 0) j["peak_stage"] = e.peak_stage;
  if (e.deepspeed)
    j["deepspeed"] = {{"function", e.deepspeed->function},
                      {"options", e.deepspeed->options},
                      {"gpu_bytes_per_gpu", e.deepspeed->gpu_per_gpu.v},
                      {"cpu_bytes_per_node", e.deepspeed->cpu_per_node.v}};
  else
    j["deepspeed"] = nullptr;
  return j.dump(2) + "\n";
}

std::string SummaryText(const Plan& plan, const PlanSummary& s, const ValidationReport& report) {
  std::ostringstream o;
  // With pipeline stages the plan holds each stage's program: the counts
  // below are one rank of each stage, together.
  const bool stages = plan.pipeline > 1;
  const char* per_rank = stages ? "one rank of each stage, together" : "per rank";
  o << "Plan " << plan.scenario << ": "
    << (plan.framework == Framework::kFsdp ? std::string("FSDP2") : "ZeRO stage " + std::to_string(plan.zero_stage))
    << ", " << plan.world_size << " rank" << (plan.world_size > 1 ? "s" : "");
  if (plan.groups.size() > 1 && plan.framework == Framework::kDeepSpeed) {
    o << " (";
    for (size_t g = 0; g < plan.groups.size(); ++g)
      o << (g ? " x " : "")
        << (plan.groups[g].name == "dp"   ? "data "
            : plan.groups[g].name == "tp" ? "tensor "
                                          : "pipeline ")
        << plan.groups[g].size();
    o << ")";
  }
  o << ", " << plan.micro_steps << " micro step" << (plan.micro_steps > 1 ? "s" : "") << ", " << s.ops << " ops "
    << (stages ? "(every stage's)" : "per rank") << ", " << s.buffers << " buffers\n";
  if (stages) {
    o << "pipeline stages (layers):";
    for (int st = 0; st < plan.pipeline; ++st)
      o << " " << st << ": " << plan.stage_layers[static_cast<size_t>(st)] << "-"
        << plan.stage_layers[static_cast<size_t>(st) + 1] - 1;
    o << "\n";
  }
  o << "\nops by kind:\n";
  for (int k = 0; k < kNumOpKinds; ++k)
    if (s.ops_by_kind[k] > 0)
      o << "  " << Pad(std::string(OpKindName(static_cast<OpKind>(k))), 16) << s.ops_by_kind[k] << "\n";
  o << "\nbytes per link class (" << per_rank << "):\n";
  for (int c = 1; c < kNumLinkClasses; ++c)
    o << "  " << Pad(std::string(LinkClassName(static_cast<LinkClass>(c))), 16) << FormatBytes(s.bytes_by_link[c])
      << "\n";
  o << NvmeWriteLine(plan);
  if (plan.run.delayed_warmup >= 0)
    o << "\ndelayed parameter update (policy.delayed_update): the CPU step applies the previous step's gradients "
         "beside the forward and backward, after "
      << plan.run.delayed_warmup << " ordinary step" << (plan.run.delayed_warmup == 1 ? "" : "s")
      << " and one that only keeps its gradients (docs/dpu.md)\n";
  char flops[64];
  std::snprintf(flops, sizeof flops, "%.4g", s.compute_flops);
  o << "\ncompute " << (stages ? "(one rank of each stage, together)" : "per rank") << ": " << flops
    << " FLOP (model FLOPs " << FormatCount(plan.model_flops) << (stages ? " per rank, on average" : "") << ")\n";
  if (const int64_t hooks = s.ops_by_kind[static_cast<int>(OpKind::kHook)]; hooks > 0)
    o << "host time of ZeRO-3's hooks " << (stages ? "(one rank of each stage, together)" : "per rank") << ": "
      << FormatDuration(s.host_seconds) << " in " << hooks
      << " module uses (policy.host_hooks; overlapped with the GPU where the host runs ahead)\n";
  o << "\npeak memory:\n";
  for (Tier t : kAllTiers) {
    const int ti = static_cast<int>(t);
    o << "  " << Pad(std::string(TierName(t)), 6) << Pad(kTierScope[ti], 10) << Pad(FormatBytes(s.memory.peak[ti]), 14)
      << "of " << FormatBytes(plan.capacity[ti]) << "\n";
  }
  o << "\nvalidation: " << (report.ok() ? "ok" : std::to_string(report.violations.size()) + " violation(s)") << "\n";
  for (const auto& v : report.violations) o << "  [" << v.kind << "] " << v.message << "\n";
  return o.str();
}

std::string SummaryJson(const Plan& plan, const PlanSummary& s, const ValidationReport& report) {
  Json j;
  j["scenario"] = plan.scenario;
  j["framework"] = plan.framework == Framework::kFsdp ? "fsdp" : "deepspeed";
  j["zero_stage"] = plan.zero_stage;
  j["world_size"] = plan.world_size;
  j["micro_steps"] = plan.micro_steps;
  j["delayed_update_warmup"] = plan.run.delayed_warmup;  // -1: off
  j["ops"] = s.ops;
  j["buffers"] = s.buffers;
  Json kinds;
  for (int k = 0; k < kNumOpKinds; ++k) kinds[std::string(OpKindName(static_cast<OpKind>(k)))] = s.ops_by_kind[k];
  j["ops_by_kind"] = kinds;
  Json links;
  for (int c = 1; c < kNumLinkClasses; ++c)
    links[std::string(LinkClassName(static_cast<LinkClass>(c)))] = s.bytes_by_link[c].v;
  j["bytes_by_link"] = links;
  j["compute_flops"] = s.compute_flops;
  j["host_seconds"] = s.host_seconds;
  j["model_flops"] = plan.model_flops;
  Json peaks;
  for (Tier t : kAllTiers) peaks[std::string(TierName(t))] = s.memory.peak[static_cast<int>(t)].v;
  j["peak_bytes"] = peaks;
  j["valid"] = report.ok();
  Json vs = Json::array();
  for (const auto& v : report.violations) vs.push_back(ViolationJson(v));
  j["violations"] = vs;
  return j.dump(2) + "\n";
}

}  // namespace strata
