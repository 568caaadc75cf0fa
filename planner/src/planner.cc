// Planner: layout of the model states, then forward and backward of each
// micro step. See planner.h for the model and plan.h for the contract.
#include "strata/planner/planner.h"

#include <algorithm>

#include "plan_builder.h"
#include "strata/core/parallel.h"

namespace strata {
namespace detail {

namespace {

// Where NVMe-backed state goes: DeepSpeed swaps parameters under
// offload_param.nvme_path (AsyncPartitionedParameterSwapper) and optimizer
// states under offload_optimizer.nvme_path (OptimizerSwapper); one
// directory serves both when the paths are equal.
struct SwapDirs {
  std::vector<std::string> dirs;  // RunSpec::nvme_dirs
  int param = -1, optim = -1;     // indexes in dirs, -1: that state is not on NVMe
};

SwapDirs SwapDirsOf(const ZeroConfig& z) {
  SwapDirs d;
  auto dir_of = [&](const std::string& path) {
    auto it = std::find(d.dirs.begin(), d.dirs.end(), path);
    if (it != d.dirs.end()) return static_cast<int>(it - d.dirs.begin());
    d.dirs.push_back(path);
    return static_cast<int>(d.dirs.size()) - 1;
  };
  if (z.offload_param.device == OffloadDevice::kNvme) d.param = dir_of(z.offload_param.nvme_path);
  if (z.offload_optimizer.device == OffloadDevice::kNvme) d.optim = dir_of(z.offload_optimizer.nvme_path);
  return d;
}

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

// The plan's layout: the run's shape, each group's partition, the resident
// parameters, gradients, optimizer states and swap buffers, the model's
// description and the positions the passes walk.
Status PlanBuilder::Layout() {
  const HardwareSpec& hw = scenario_.hardware;
  const ZeroConfig& z = scenario_.zero;
  // ZeRO partitions over the data-parallel group (core/parallel.h):
  // world / (tensor x pipeline) ranks; every other count below is of it.
  const ParallelLayout layout{hw.world_size(), std::max(1, scenario_.parallelism.tensor),
                              std::max(1, scenario_.parallelism.pipeline)};
  dp_size_ = layout.data();
  stage_ = z.stage;
  lp_bytes_ = BytesPerElement(scenario_.training.precision);
  num_modules_ = static_cast<int>(graph_.modules.size());
  optim_tier_ = z.offload_optimizer.device == OffloadDevice::kCpu    ? Tier::kCpu
                : z.offload_optimizer.device == OffloadDevice::kNvme ? Tier::kNvme
                                                                     : Tier::kGpu;
  // CheckScenario rejects these; a caller of the API that skipped it gets
  // the same answer rather than a plan DeepSpeed cannot run.
  if (stage_ == 0 && optim_tier_ != Tier::kGpu)
    return Status::InvalidArgument(
        "zero_optimization.offload_optimizer: offload_optimizer requires zero_optimization.stage >= 1");
  DescribeRun(layout);
  const Tier param_home = z.offload_param.device == OffloadDevice::kCpu    ? Tier::kCpu
                          : z.offload_param.device == OffloadDevice::kNvme ? Tier::kNvme
                                                                           : Tier::kGpu;
  const Elements persistent_total = LayoutPartitions(param_home);
  LayoutSubGroups();
  LayoutResidentParams(param_home, persistent_total);
  LayoutGradients();
  LayoutParamOut();
  LayoutOptimizerStates();
  STRATA_RETURN_IF_ERROR(LayoutSwapBuffers());
  DescribeModel();
  LayoutPositions();
  return Status::Ok();
}

// The plan's header: the world, capacities, the model's totals, the groups.
void PlanBuilder::DescribeRun(const ParallelLayout& layout) {
  const HardwareSpec& hw = scenario_.hardware;
  plan_.scenario = scenario_.name;
  plan_.world_size = hw.world_size();
  plan_.nodes = hw.nodes;
  plan_.gpus_per_node = hw.gpus_per_node;
  plan_.zero_stage = stage_;
  plan_.micro_steps = scenario_.training.gradient_accumulation_steps;
  plan_.capacity[static_cast<int>(Tier::kGpu)] = hw.gpu.memory - hw.gpu.reserved_memory;
  plan_.gpu_reserved = hw.gpu.reserved_memory;
  plan_.capacity[static_cast<int>(Tier::kCpu)] = hw.cpu.memory;
  plan_.capacity[static_cast<int>(Tier::kNvme)] = hw.nvme.capacity;
  plan_.total_params = graph_.model_params;
  plan_.model_flops = 3.0 * graph_.fwd_flops * plan_.micro_steps;
  plan_.samples_per_iteration =
      static_cast<int64_t>(scenario_.training.micro_batch_size) * plan_.micro_steps * dp_size_;
  plan_.tokens_per_sample = scenario_.model.kind == ModelKind::kTransformer ? scenario_.model.seq_length : 1;
  DescribeExecution();
  plan_.groups.push_back({"dp", layout.DataGroup(0)});
  if (layout.tensor > 1) {
    tp_group_ = static_cast<int>(plan_.groups.size());
    plan_.groups.push_back({"tp", layout.TensorGroup(0)});
  }
}

// The run record (run_spec.h): what an executor needs from the scenario.
void PlanBuilder::DescribeExecution() {
  RunSpec& r = plan_.run;
  r.model = scenario_.model;
  r.precision = scenario_.training.precision;
  r.micro_batch_size = scenario_.training.micro_batch_size;
  r.activation_checkpointing = scenario_.training.activation_checkpointing;
  r.split_transformers = scenario_.training.split_transformers;
  r.partition_activations = scenario_.training.partition_activations;
  r.sequence_parallel = scenario_.parallelism.sequence_parallel;
  r.aio = scenario_.aio;
  r.nvme_shared = scenario_.hardware.nvme.readwrite_bandwidth.bytes_per_s > 0;
  r.nvme_dirs = SwapDirsOf(scenario_.zero).dirs;
}

// Each group's partition and flat offset; returns the persistent groups'
// padded total (stage 3).
Elements PlanBuilder::LayoutPartitions(Tier param_home) {
  const ZeroConfig& z = scenario_.zero;
  // Partitions: every group is partitioned for the optimizer from stage 1 on;
  // in stage 3 its low-precision copy is partitioned too unless persistent
  // (DeepSpeed: full numel <= stage3_param_persistence_threshold, per tensor).
  const bool nvme = stage_ == 3 && (param_home == Tier::kNvme || optim_tier_ == Tier::kNvme);
  align_ = nvme ? kNvmeAlign / lp_bytes_ : 1;  // fp32 states of align_ elements are whole blocks too
  min_aio_bytes_ = std::max<int64_t>(int64_t{1} << 20, scenario_.aio.block_size.v);
  Elements persistent_total;
  for (const auto& pg : graph_.param_groups) {
    GroupLayout gl;
    gl.elements = pg.elements;
    // Stages 1-2 cut the flat buffer, not each group (planner_flat.cc): a
    // group's flat offset is then in the whole flat buffer.
    gl.part = stage_ == 3 ? Elements(CeilDiv(CeilDiv(pg.elements.v, dp_size_), align_) * align_) : pg.elements;
    gl.flat_offset = flat_total_;
    flat_total_ += gl.part;
    if (stage_ == 3) {
      gl.persistent = pg.elements <= z.stage3_param_persistence_threshold;
      if (gl.persistent) persistent_total += Padded(gl);
    }
    groups_.push_back(gl);
  }
  if (FlatPath()) {
    // stage_1_and_2.py __init__: the flat buffer is padded to a multiple of
    // nccl_start_alignment_factor (2) x world size, then cut into equal
    // partitions (get_data_parallel_partitions).
    flat_padded_ = CeilDiv(flat_total_.v, 2 * dp_size_) * 2 * dp_size_;
    flat_total_ = Elements(flat_padded_ / dp_size_);
    plan_.flat_partition = flat_total_;
  }
  return persistent_total;
}

void PlanBuilder::LayoutResidentParams(Tier param_home, Elements persistent_total) {
  // Resident low-precision parameters.
  if (stage_ < 3) {
    Elements replica(flat_padded_);
    if (stage_ == 0)
      for (const auto& gl : groups_) replica += gl.elements;
    param_replica_ = em_.NewBuffer("param16.replica", Tier::kGpu, StateKind::kParam16, replica.bytes(lp_bytes_), true);
  } else {
    if (persistent_total.v > 0)
      param_persistent_ =
          em_.NewBuffer("param16.persistent", Tier::kGpu, StateKind::kParam16, persistent_total.bytes(lp_bytes_), true);
    LayoutParamHomes(param_home);
  }
  // Offsets in the replicated homes: groups in order, whole.
  {
    int64_t next_persistent = 0, next_replica = 0;
    for (auto& gl : groups_) {
      if (stage_ < 3) {
        gl.home_buffer = param_replica_;
        gl.home_offset = Bytes(next_replica);
        next_replica += Padded(gl).bytes(lp_bytes_).v;
      } else if (gl.persistent) {
        gl.home_buffer = param_persistent_;
        gl.home_offset = Bytes(next_persistent);
        next_persistent += Padded(gl).bytes(lp_bytes_).v;
      }
    }
  }
}

void PlanBuilder::LayoutGradients() {
  // Gradients: stages 1-2 as stage_1_and_2.py (planner_flat.cc); a replica
  // in stage 0; the partition on the optimizer's tier in stage 3. Stage 3
  // with offload_optimizer accumulates the low-precision partition in CPU
  // memory (DeepSpeed's grad_partitions_flat_buffer, pinned as pin_memory
  // says); the optimizer reads fp32 gradients (grad32, per sub-group tier).
  if (FlatPath()) {
    LayoutFlatGradients();
  } else if (stage_ == 0) {
    grad_ = em_.NewBuffer("grad.replica", Tier::kGpu, StateKind::kGrad, plan_.buffers[param_replica_].bytes, true);
  } else if (DirectGradients()) {
    grad_ = -1;  // shards go straight from the GPU to the optimizer (planner_grads.cc)
  } else if (OffloadedGradPath()) {
    grad_ = em_.NewBuffer("grad.partition.cpu", Tier::kCpu, StateKind::kGrad, flat_total_.bytes(lp_bytes_), true);
  } else {
    // Stage 3 on the GPU. DeepSpeed allocates this partition once
    // (grad_partitions_flat_buffer, __init__); before v0.6.0
    // (partition_previous_reduced_grads) at the first reduced gradient of
    // the backward, dropped again by the step (ScopeGradientPartition).
    grad_ = em_.NewBuffer("grad.partition", optim_tier_, StateKind::kGrad, flat_total_.bytes(lp_bytes_),
                      !release_.scoped_gpu_gradient_partition);
  }
  step_grads_ = grad_part_ >= 0 ? grad_part_ : grad_;
}

void PlanBuilder::LayoutParamOut() {
  // Shards of replicated homes (stages 1-2; persistent groups in stage 3)
  // are updated in a flat output buffer and gathered home.
  if (dp_size_ > 1) {
    int64_t out = 0;
    for (auto& gl : groups_) {
      if (!(stage_ == 3 && gl.persistent)) continue;
      gl.out_offset = Bytes(out);
      out += gl.part.bytes(lp_bytes_).v;
    }
    if (out > 0) param_out_ = em_.NewBuffer("param16.out", Tier::kGpu, StateKind::kGatherBuffer, Bytes(out), true);
  }
}

// The plan-level model description for consumers.
void PlanBuilder::DescribeModel() {
  for (size_t i = 0; i < groups_.size(); ++i) {
    const auto& gl = groups_[i];
    const int sg = sub_group_of_[i];
    const Region master = MasterRegion(sg), m1 = ExpAvgRegion(sg), m2 = ExpAvgSqRegion(sg);
    // Stages 1-2: the rank's master partition (Plan::flat_partition).
    const int64_t in = FlatPath() ? 0 : (gl.flat_offset - sub_groups_[sg].begin).v * 4;
    plan_.param_groups.push_back({graph_.param_groups[i].name, gl.elements, gl.part, gl.flat_offset, gl.persistent,
                                  stage_ == 3 ? gl.home : Tier::kGpu, gl.home_offset, gl.home_buffer, master.buffer,
                                  master.offset + Bytes(in), m1.buffer, m1.offset + Bytes(in), m2.buffer,
                                  m2.offset + Bytes(in)});
  }
  for (const auto& m : graph_.modules)
    plan_.modules.push_back({m.name, m.layer, m.param_groups, m.fwd_flops, m.fwd, m.bwd});
}

// Each layer's first and last module, and the positions the passes walk:
// forward, then backward with each checkpointed layer's recomputation
// before its last module.
void PlanBuilder::LayoutPositions() {
  layer_first_.assign(graph_.num_layers, -1);
  layer_last_.assign(graph_.num_layers, -1);
  for (int i = 0; i < num_modules_; ++i) {
    const int l = graph_.modules[i].layer;
    if (l < 0) continue;
    if (layer_first_[l] < 0) layer_first_[l] = i;
    layer_last_[l] = i;
  }
  seq_.clear();
  for (int i = 0; i < num_modules_; ++i) seq_.push_back({i, Position::Kind::kForward});
  for (int i = num_modules_ - 1; i >= 0; --i) {
    const int l = graph_.modules[i].layer;
    if (scenario_.training.activation_checkpointing && l >= 0 && i == layer_last_[l])
      for (int k = layer_first_[l]; k <= layer_last_[l]; ++k) seq_.push_back({k, Position::Kind::kRecompute});
    seq_.push_back({i, Position::Kind::kBackward});
  }
}

Region PlanBuilder::HomeRegion(int gi) const {
  const GroupLayout& gl = groups_[gi];
  const Elements n = stage_ < 3 || gl.persistent ? gl.elements : gl.part;
  return R(gl.home_buffer, gl.home_offset, n.bytes(lp_bytes_));
}

Result<Plan> PlanBuilder::Build() {
  STRATA_RETURN_IF_ERROR(Layout());
  acc_reader_.assign(groups_.size(), -1);
  acc_writer_.assign(groups_.size(), -1);
  SetUpCaches();
  policy_ = MakeFetchPolicy();
  // Room for the ops and buffers up front (measured: 16 ops and 10 buffers
  // per module and micro step on the 1T GPT): a vector of 400-byte ops
  // past glibc's mmap threshold (32 MiB) gets fresh pages at each doubling,
  // and that made planning 9x slower from 512 to 1024 layers (issue #20).
  // Reserving touches no pages; an underestimate only grows as before.
  const size_t per = static_cast<size_t>(num_modules_) * static_cast<size_t>(std::max(1, plan_.micro_steps));
  plan_.ops.reserve(plan_.ops.size() + 20 * per);
  plan_.buffers.reserve(plan_.buffers.size() + 12 * per);
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
  ReduceReplica();
  Step();
  ScopeGradientPartition();
  return em_.Take();
}

// A gradient partition that is not resident (stage 3 on the GPU under
// the release's scoped_gpu_gradient_partition) lives from the first op that writes it (the
// first reduce-scatter of the first micro step, or the first backward on one
// rank; DeepSpeed's partition_previous_reduced_grads allocates
// grads_in_partition one bucket later) to the last that touches it (the last
// sub-group's step). DeepSpeed drops each sub-group's part at that
// sub-group's step (_prepare_fp32_grad_for_sub_group): keeping the whole
// until the last one gives a step peak of at least DeepSpeed's, the same
// when the largest sub-group steps first.
void PlanBuilder::ScopeGradientPartition() {
  if (grad_ < 0 || plan_.buffers[grad_].resident) return;
  auto touches = [&](const std::vector<BufferId>& v) { return std::find(v.begin(), v.end(), grad_) != v.end(); };
  int first = -1, last = -1;
  for (const Op& op : plan_.ops) {
    const bool w = touches(op.writes);
    if (first < 0 && w) first = op.id;
    if (w || touches(op.reads)) last = op.id;
  }
  if (first < 0) return;
  plan_.ops[first].allocs.push_back(grad_);
  plan_.ops[last].frees.push_back(grad_);
}

// Resets the per-micro-step state (MicroState) for the emitter's micro step.
void PlanBuilder::BeginMicro() {
  const int P = Positions();
  fetch_ops_.assign(P, {});
  compute_op_.assign(P, -1);
  held_.assign(groups_.size(), -1);
  act_.assign(num_modules_, -1);
  ckpt_gpu_.assign(graph_.num_layers, -1);
  ckpt_cpu_.assign(graph_.num_layers, -1);
  ckpt_h2d_.assign(graph_.num_layers, -1);
  ckpt_d2h_.assign(graph_.num_layers, -1);
  grad_pending_.assign(groups_.size(), -1);
  last_bwd_use_.assign(groups_.size(), -1);
  for (int p = num_modules_; p < P; ++p)
    if (Backward(p))
      for (int gi : GroupsAt(p)) last_bwd_use_[gi] = p;
}

Status PlanBuilder::MicroStep() {
  BeginMicro();
  const Status status = policy_->Emit(*this, 0, Positions());
  FlushBucket();
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
  std::swap(st.grad_pending, grad_pending_);
  std::swap(st.last_bwd_use, last_bwd_use_);
}

// DeepSpeed's coordinator where it applies (stage 3, policy.prefetch
// deepspeed, no parameter caches: the caches replace its release rule),
// the release's own; Strata's window otherwise.
std::unique_ptr<FetchPolicy> PlanBuilder::MakeFetchPolicy() const {
  const bool coordinated =
      stage_ == 3 && scenario_.policy.prefetch == PrefetchKind::kDeepSpeed && !gpu_cache_ && !cpu_cache_;
  if (!coordinated) return NewWindowFetch(scenario_.zero);
  const int swap = static_cast<int>(param_slots_.size()), groups = static_cast<int>(groups_.size());
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

Result<Plan> BuildPlan(const Scenario& scenario, const PlannerOptions& options) {
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

}  // namespace strata
