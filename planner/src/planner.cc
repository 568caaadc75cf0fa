// Planner: the driver (PlanBuilder::Build runs the passes, plan_builder.h)
// and the micro step's bookkeeping. See planner.h for the model and
// plan.h for the contract.
#include "strata/planner/planner.h"

#include <algorithm>

#include "fsdp_builder.h"
#include "plan_builder.h"
#include "step.h"
#include "strata/core/huge_pages.h"
#include "strata/core/parallel.h"
#include "strata/plan/fresh_bytes.h"
#include "strata/plan/write_requests.h"
#include "stripes.h"
#include "write_buffer.h"

namespace strata {
namespace detail {

namespace {

BufferRules RulesOf(const Scenario& s, bool blocking_checkpoints) {
  const SwapDirs dirs = SwapDirsOf(s.zero);
  return {s.zero.offload_param.pin_memory, s.zero.offload_optimizer.pin_memory, !blocking_checkpoints, dirs.param,
          dirs.optim};
}

}  // namespace

PlanBuilder::PlanBuilder(const Scenario& s, const ModelGraph& g, const PlannerOptions& o, PipelineStage pp)
    : scenario_(s),
      release_(ReleaseProfileOf(s.policy)),
      graph_(g),
      opt_(o),
      pp_(pp),
      em_(g, RulesOf(s, CheckpointCopy() == CkptCopy::kBlocking)),
      plan_(em_.plan()) {}

Result<Plan> PlanBuilder::Build() {
  STRATA_ASSIGN_OR_RETURN(lay_, LayOut(scenario_, release_, graph_, opt_, em_));
  param_slot_user_.assign(lay_.param_slots.size(), -1);
  secondary_.assign(lay_.groups.size(), -1);
  optim_slot_user_.assign(lay_.optim_slots.size(), -1);
  grads_.emplace(scenario_, release_, graph_, lay_, em_, last_compute_, optim_slot_user_);
  SetUpCaches();
  policy_ = MakeFetchPolicy();
  // Room for the ops and buffers up front (measured: 16 ops and 10 buffers
  // per module and micro step on the 1T GPT): a vector of 400-byte ops
  // past glibc's mmap threshold (32 MiB) gets fresh pages at each doubling,
  // and that made planning 9x slower from 512 to 1024 layers (issue #20).
  // Reserving touches no pages; an underestimate only grows as before.
  // The ops' pages are huge pages where the kernel allows them on request:
  // every op writes fresh memory, and a 4 KiB page fault per ten ops was
  // most of planning's time on a VM (13 us a fault): 4096 layers of the 1T
  // GPT planned in 1.96 s, 1.10-1.28 s with them (plan_bench).
  const size_t per = static_cast<size_t>(lay_.num_modules) * static_cast<size_t>(std::max(1, plan_.micro_steps));
  plan_.ops.reserve(plan_.ops.size() + 20 * per);
  plan_.buffers.reserve(plan_.buffers.size() + 12 * per);
  AdviseHugePages(plan_.ops.data(), plan_.ops.capacity() * sizeof(Op));
  StepPass step(scenario_, release_, lay_, em_, optim_slot_user_);
  // policy.delayed_update (CheckScenario: stages 1-2, optimizer on the
  // CPU, one pipeline stage): the step first, on last iteration's
  // gradients.
  const bool delayed = scenario_.policy.delayed_update_warmup >= 0;
  // A caller of the API that skipped CheckScenario gets its answer.
  if (delayed && (!lay_.FlatPath() || lay_.optim_tier != Tier::kCpu || pp_.stages > 1 ||
                  lay_.grad32[static_cast<int>(Tier::kCpu)] < 0))
    return Status::InvalidArgument(
        "policy.delayed_update: planned for ZeRO stages 1-2 with offload_optimizer cpu and one pipeline stage");
  const OpId delayed_step = delayed ? step.DelayedStep() : -1;
  if (pp_.stages > 1) {
    STRATA_RETURN_IF_ERROR(PipelineSteps());
  } else {
    for (int m = 0; m < plan_.micro_steps; ++m) {
      em_.SetMicro(m);
      STRATA_RETURN_IF_ERROR(MicroStep());
    }
  }
  em_.SetMicro(plan_.micro_steps - 1);
  plan_.cache.window_nvme_reads = policy_->WindowNvmeReads();
  FreeCaches();
  ExchangeTiedGradients();
  grads_->ReduceReplica();
  if (delayed)
    step.DelayedParamsOut(delayed_step);
  else
    step.Run();
  // hpZ: the step invalidates every secondary partition (stage3.py
  // _post_step, invalidate_secondary_tensor).
  for (BufferId& b : secondary_)
    if (b >= 0) plan_.ops.back().frees.push_back(b), b = -1;
  ScopeGradientPartition(lay_, plan_);
  return em_.Take();
}

// Resets the per-micro-step state (MicroState) for the emitter's micro step.
void PlanBuilder::BeginMicro() {
  const int P = Positions();
  fetch_ops_.assign(P, {});
  compute_op_.assign(P, -1);
  held_.assign(lay_.groups.size(), -1);
  act_.assign(lay_.num_modules, -1);
  ckpt_gpu_.assign(graph_.num_layers, -1);
  ckpt_cpu_.assign(graph_.num_layers, -1);
  ckpt_h2d_.assign(graph_.num_layers, -1);
  ckpt_d2h_.assign(graph_.num_layers, -1);
  grads_->BeginMicro();
}

Status PlanBuilder::MicroStep() {
  BeginMicro();
  const Status status = policy_->Emit(*this, 0, Positions());
  grads_->FlushBucket();
  return status;
}

void PlanBuilder::SwapMicroState(MicroState& st) {
  std::swap(st.fetch_ops, fetch_ops_);
  std::swap(st.compute_op, compute_op_);
  std::swap(st.held, held_);
  std::swap(st.act, act_);
  std::swap(st.ckpt_gpu, ckpt_gpu_);
  std::swap(st.ckpt_cpu, ckpt_cpu_);
  std::swap(st.ckpt_h2d, ckpt_h2d_);
  std::swap(st.ckpt_d2h, ckpt_d2h_);
  grads_->SwapMicroState(st.grads);
}

// DeepSpeed's coordinator where it applies (stage 3, policy.prefetch
// deepspeed, no parameter caches: the caches replace its release rule),
// the release's own; Strata's window otherwise.
std::unique_ptr<FetchPolicy> PlanBuilder::MakeFetchPolicy() const {
  const bool coordinated =
      lay_.stage == 3 && scenario_.policy.prefetch == PrefetchKind::kDeepSpeed && !gpu_cache_ && !cpu_cache_;
  if (!coordinated) return NewWindowFetch(scenario_.zero);
  const int swap = static_cast<int>(lay_.param_slots.size()), groups = static_cast<int>(lay_.groups.size());
  if (release_.module_trace_coordinator) return NewModuleTraceCoordinator(scenario_.zero, release_, swap, groups);
  return NewCoordinator(scenario_.zero, swap, groups);
}

std::vector<int64_t> PlanBuilder::PositionElements() const {
  const int P = Positions();
  std::vector<int64_t> prefix(P + 1, 0);
  for (int p = 0; p < P; ++p) {
    prefix[p + 1] = prefix[p];
    for (int gi : GroupsAt(p)) prefix[p + 1] += FullElements(gi);
  }
  return prefix;
}

}  // namespace detail

namespace {

Result<Plan> BuildGraphPlan(const Scenario& scenario, const ModelGraph& graph, const PlannerOptions& options,
                            detail::PipelineStage pp) {
  if (scenario.policy.cpu_cache.v <= 0) return detail::PlanBuilder(scenario, graph, options, pp).Build();
  // Two passes: the first records when each group reaches the CPU tier, so
  // the second's look-ahead policies know the CPU tier's future exactly.
  PlannerOptions quiet = options;  // the second pass records the checks
  quiet.checks = nullptr;
  detail::PlanBuilder first_builder(scenario, graph, quiet, pp);
  STRATA_ASSIGN_OR_RETURN(auto first, first_builder.Build());
  detail::PlanBuilder second(scenario, graph, options, pp);
  second.SetCpuFuture(first_builder.cpu_accesses());
  return second.Build();
}

}  // namespace

namespace {

Result<Plan> BuildPlanOnce(const Scenario& scenario, const PlannerOptions& options) {
  STRATA_ASSIGN_OR_RETURN(auto built, BuildModelGraph(scenario.model, scenario.training, scenario.parallelism));
  const ModelGraph& graph = built;
  const int stages = std::max(1, scenario.parallelism.pipeline);
  const int64_t model_parallel = static_cast<int64_t>(std::max(1, scenario.parallelism.tensor)) * stages;
  if (scenario.hardware.world_size() % model_parallel != 0)
    return Status::InvalidArgument("parallelism: tensor x pipeline = " + std::to_string(model_parallel) +
                                   " does not divide the world size " + std::to_string(scenario.hardware.world_size()));
  if (stages == 1) return BuildGraphPlan(scenario, graph, options, {});
  // CheckScenario rejects these; a caller of the API that skipped it gets
  // the same answer.
  if (stages > graph.num_layers)
    return Status::InvalidArgument("parallelism.pipeline: " + std::to_string(stages) + " stages for " +
                                   std::to_string(graph.num_layers) + " layers");
  if (scenario.zero.stage >= 2)
    return Status::InvalidArgument(
        "zero_optimization.stage: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism");
  const std::vector<int> parts = PipelineParts(graph.num_layers, stages);
  std::vector<Plan> plans;
  for (int s = 0; s < stages; ++s) {
    const ModelGraph stage = PipelineStageGraph(graph, s, stages);
    STRATA_ASSIGN_OR_RETURN(auto plan,
                            BuildGraphPlan(scenario, stage, options, {s, stages, parts[static_cast<size_t>(s)]}));
    plans.push_back(std::move(plan));
  }
  return detail::MergeStages(std::move(plans), parts);
}

constexpr const char* kExhausted = "param_swap_buffers_exhausted";

// Whether planning with `count` parameter swap buffers runs out of them
// (nullopt: it fails otherwise).
std::optional<bool> RunsOutWith(const Scenario& scenario, int count) {
  Scenario s = scenario;
  s.zero.offload_param.buffer_count = count;
  std::vector<PlannerCheck> fired;
  PlannerOptions lenient;
  lenient.strict = false;
  lenient.checks = &fired;
  if (!BuildPlanOnce(s, lenient).ok()) return std::nullopt;
  return std::any_of(fired.begin(), fired.end(), [](const PlannerCheck& c) { return c.id == kExhausted; });
}

std::string NeededText(int count) {
  return "; it runs with buffer_count >= " + std::to_string(count) +
         " (the smallest count this schedule never runs out of, found by planning)";
}

}  // namespace

std::optional<int> NeededParamSwapBuffers(const Scenario& scenario) {
  // Doubling from the scenario's count, then bisection between the last
  // count that ran out and the first that did not.
  int lo = std::max(1, scenario.zero.offload_param.buffer_count), hi = lo;
  for (;;) {
    const auto out = RunsOutWith(scenario, hi);
    if (!out) return std::nullopt;
    if (!*out) break;
    if (hi >= limits::kBufferCount) return std::nullopt;
    lo = hi;
    hi = std::min<int>(2 * hi, limits::kBufferCount);
  }
  if (hi == std::max(1, scenario.zero.offload_param.buffer_count)) return std::nullopt;  // never ran out
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    const auto out = RunsOutWith(scenario, mid);
    if (!out) return std::nullopt;
    (*out ? lo : hi) = mid;
  }
  return hi;
}

Result<Plan> BuildPlan(const Scenario& scenario, const PlannerOptions& options) {
  if (scenario.framework == Framework::kFsdp) {
    if (scenario.policy.delayed_update_warmup >= 0)
      return Status::InvalidArgument("policy.delayed_update: ZeRO-Offload's, not planned under framework: fsdp");
    STRATA_ASSIGN_OR_RETURN(auto graph, BuildModelGraph(scenario.model, scenario.training, scenario.parallelism));
    STRATA_ASSIGN_OR_RETURN(auto plan, detail::BuildFsdpPlan(scenario, graph));
    MarkFreshBytes(plan);
    return plan;
  }
  const size_t earlier = options.checks != nullptr ? options.checks->size() : 0;  // a caller's, not this plan's
  auto plan = BuildPlanOnce(scenario, options);
  if (plan.ok() && scenario.policy.write_buffer.v > 0) detail::BufferNvmeWrites(*plan, scenario.policy.write_buffer.v);
  // Compression (policy.compression): each NVMe op's planned stored ratio.
  if (plan.ok() && plan->run.compression.codec != CodecKind::kNone)
    for (Op& op : plan->ops) op.stored = PlannedStored(*plan, op);
  // Striping (policy.stripe_paths): each swap file's first drive.
  if (plan.ok()) detail::BalanceStripes(*plan);
  // Which gradients a backward stores and which buffers start zero: from
  // the finished plan, pipeline stages merged (fresh_bytes.h).
  if (plan.ok()) MarkFreshBytes(*plan);
  // Running out of parameter swap buffers: say how many the schedule needs.
  const std::string tag = "[" + std::string(kExhausted) + "]";
  if (!plan.ok() && plan.status().message().find(tag) != std::string::npos) {
    if (auto n = NeededParamSwapBuffers(scenario))
      return Status::InvalidArgument(plan.status().message() + NeededText(*n));
  } else if (plan.ok() && options.checks != nullptr) {
    for (size_t i = earlier; i < options.checks->size(); ++i)
      if (PlannerCheck& c = (*options.checks)[i]; c.id == kExhausted)
        if (auto n = NeededParamSwapBuffers(scenario)) c.message += NeededText(*n);
  }
  return plan;
}

}  // namespace strata
