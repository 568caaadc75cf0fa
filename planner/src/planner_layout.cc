// Planner: the layout pass (layout.h, layout_pass.h): the plan's header and
// run record, each group's partition, the resident parameters and
// gradients, the model's description and the positions the passes walk.
// The states DeepSpeed swaps are laid out in planner_layout_states.cc.
#include <algorithm>
#include <string>

#include "layout_pass.h"

namespace strata::detail {

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

Result<Layout> LayOut(const Scenario& s, const ReleaseProfile& release, const ModelGraph& graph,
                      const PlannerOptions& o, Emitter& em) {
  return LayoutPass(s, release, graph, o, em).Run();
}

Status Fire(const PlannerOptions& o, const char* id, std::string message) {
  if (o.strict)
    return Status::InvalidArgument("DeepSpeed would refuse this config [" + std::string(id) + "]: " + message);
  if (o.checks != nullptr) o.checks->push_back({id, std::move(message)});
  return Status::Ok();
}

Region Layout::HomeRegion(int gi) const {
  const GroupLayout& gl = groups[gi];
  const Elements n = stage < 3 || gl.persistent ? gl.elements : gl.part;
  return R(gl.home_buffer, gl.home_offset, n.bytes(lp_bytes));
}
Region Layout::MasterRegion(int sg) const {
  const SubGroup& g = sub_groups[sg];
  const int t = static_cast<int>(g.tier);
  return R(master[t], g.state_offset * 4, g.n.v * 4);
}
Region Layout::ExpAvgRegion(int sg) const {
  const SubGroup& g = sub_groups[sg];
  const int t = static_cast<int>(g.tier);
  return R(moments[t], g.state_offset * 4, g.n.v * 4);
}
Region Layout::ExpAvgSqRegion(int sg) const {
  const SubGroup& g = sub_groups[sg];
  const int t = static_cast<int>(g.tier);
  return R(moments[t], (state_total[t] + g.state_offset) * 4, g.n.v * 4);
}
Region Layout::Grad32Region(int sg, int64_t from, int64_t n) const {
  const SubGroup& g = sub_groups[sg];
  const int t = static_cast<int>(g.tier);
  return R(grad32[t], (g.state_offset + from - g.begin.v) * 4, n * 4);
}

// The plan's layout: the run's shape, each group's partition, the resident
// parameters, gradients, optimizer states and swap buffers, the model's
// description and the positions the passes walk.
Status LayoutPass::Build() {
  const HardwareSpec& hw = scenario_.hardware;
  const ZeroConfig& z = scenario_.zero;
  // ZeRO partitions over the data-parallel group (core/parallel.h):
  // world / (tensor x pipeline) ranks; every other count below is of it.
  const ParallelLayout layout{hw.world_size(), std::max(1, scenario_.parallelism.tensor),
                              std::max(1, scenario_.parallelism.pipeline)};
  lay_.dp_size = layout.data();
  lay_.stage = z.stage;
  lay_.lp_bytes = BytesPerElement(scenario_.training.precision);
  lay_.num_modules = static_cast<int>(graph_.modules.size());
  lay_.optim_tier = z.offload_optimizer.device == OffloadDevice::kCpu    ? Tier::kCpu
                    : z.offload_optimizer.device == OffloadDevice::kNvme ? Tier::kNvme
                                                                         : Tier::kGpu;
  // CheckScenario rejects these; a caller of the API that skipped it gets
  // the same answer rather than a plan DeepSpeed cannot run.
  if (lay_.stage == 0 && lay_.optim_tier != Tier::kGpu)
    return Status::InvalidArgument(
        "zero_optimization.offload_optimizer: offload_optimizer requires zero_optimization.stage >= 1");
  // CheckScenario refuses these too (hpZ's secondary partition is planned
  // on the GPU, from a gathered copy that is released).
  if (lay_.stage == 3 && z.zero_hpz_partition_size > 1 &&
      (z.offload_param.device != OffloadDevice::kNone || scenario_.policy.gpu_cache.v > 0))
    return Status::InvalidArgument(
        "zero_optimization.zero_hpz_partition_size: hpZ with offload_param or policy.gpu_cache is not modelled");
  lay_.direct_gradients =
      lay_.OffloadedGradPath() && release_.direct_fp32_gradients && scenario_.training.gradient_accumulation_steps == 1;
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
void LayoutPass::DescribeRun(const ParallelLayout& layout) {
  DescribePlanHeader(scenario_, graph_, lay_.dp_size, plan_);
  plan_.zero_stage = lay_.stage;
  plan_.groups.push_back({"dp", layout.DataGroup(0)});
  if (layout.tensor > 1) {
    lay_.tp_group = static_cast<int>(plan_.groups.size());
    plan_.groups.push_back({"tp", layout.TensorGroup(0)});
  }
  if (lay_.stage == 3 && lay_.dp_size > 1) DescribeZeroPlusPlus();
}

void DescribePlanHeader(const Scenario& s, const ModelGraph& graph, int dp_size, Plan& plan) {
  const HardwareSpec& hw = s.hardware;
  plan.scenario = s.name;
  plan.world_size = hw.world_size();
  plan.nodes = hw.nodes;
  plan.gpus_per_node = hw.gpus_per_node;
  plan.micro_steps = s.training.gradient_accumulation_steps;
  plan.capacity[static_cast<int>(Tier::kGpu)] = hw.gpu.memory - hw.gpu.reserved_memory;
  plan.gpu_reserved = hw.gpu.reserved_memory;
  plan.capacity[static_cast<int>(Tier::kCpu)] = hw.cpu.memory;
  plan.capacity[static_cast<int>(Tier::kNvme)] = hw.nvme.capacity;
  plan.total_params = graph.model_params;
  plan.model_flops = 3.0 * graph.fwd_flops * plan.micro_steps;
  plan.samples_per_iteration = static_cast<int64_t>(s.training.micro_batch_size) * plan.micro_steps * dp_size;
  plan.tokens_per_sample = s.model.kind == ModelKind::kTransformer ? s.model.seq_length : 1;
  // The run record (run_spec.h): what an executor needs from the scenario.
  RunSpec& r = plan.run;
  r.model = s.model;
  r.precision = s.training.precision;
  r.micro_batch_size = s.training.micro_batch_size;
  r.activation_checkpointing = s.training.activation_checkpointing;
  r.split_transformers = s.training.split_transformers;
  r.partition_activations = s.training.partition_activations;
  r.sequence_parallel = s.parallelism.sequence_parallel;
  r.aio = s.aio;
  r.nvme_shared = s.hardware.nvme.readwrite_bandwidth.bytes_per_s > 0;
  r.nvme_dirs = SwapDirsOf(s.zero).dirs;
  r.compression = s.policy.compression;
  // Striping: the stripe directories instead (stripes.h places each file).
  if (!s.policy.stripe_paths.empty()) r.nvme_dirs = s.policy.stripe_paths, r.striped = true;
  r.delayed_warmup = s.policy.delayed_update_warmup;
}

// ZeRO++'s groups (data parallelism alone: CheckScenario). hpZ: runs of
// zero_hpz_partition_size consecutive ranks, at most the world
// (utils/groups.py _create_zero_param_parallel_group); qgZ across nodes
// only (stage3.py __avg_scatter_grads: num_nodes > 1), over a node's ranks
// and then the same local rank of each node (_get_local_all_to_all_group).
void LayoutPass::DescribeZeroPlusPlus() {
  const ZeroConfig& z = scenario_.zero;
  const HardwareSpec& hw = scenario_.hardware;
  lay_.hpz_size = std::min(z.zero_hpz_partition_size, lay_.dp_size);
  if (lay_.hpz_size > 1) {
    lay_.hpz_group = static_cast<int>(plan_.groups.size());
    plan_.groups.push_back({"hpz", ParallelLayout::Group(0, lay_.hpz_size, 1)});
  } else {
    lay_.hpz_size = 1;
  }
  lay_.qwz = z.zero_quantized_weights;
  if (z.zero_quantized_gradients && hw.nodes > 1) {
    lay_.qg_local = static_cast<int>(plan_.groups.size());
    plan_.groups.push_back({"zpp_local", ParallelLayout::Group(0, hw.gpus_per_node, 1)});
    lay_.qg_global = static_cast<int>(plan_.groups.size());
    plan_.groups.push_back({"zpp_global", ParallelLayout::Group(0, hw.nodes, hw.gpus_per_node)});
  }
}

// Each group's partition and flat offset; returns the persistent groups'
// padded total (stage 3).
Elements LayoutPass::LayoutPartitions(Tier param_home) {
  const ZeroConfig& z = scenario_.zero;
  // Partitions: every group is partitioned for the optimizer from stage 1 on;
  // in stage 3 its low-precision copy is partitioned too unless persistent
  // (DeepSpeed: full numel <= stage3_param_persistence_threshold, per tensor).
  const bool nvme = lay_.stage == 3 && (param_home == Tier::kNvme || lay_.optim_tier == Tier::kNvme);
  align_ = nvme ? kNvmeAlign / lay_.lp_bytes : 1;  // fp32 states of align_ elements are whole blocks too
  min_aio_bytes_ = std::max<int64_t>(int64_t{1} << 20, scenario_.aio.block_size.v);
  Elements persistent_total;
  for (const auto& pg : graph_.param_groups) {
    GroupLayout gl;
    gl.elements = pg.elements;
    // Stages 1-2 cut the flat buffer, not each group (planner_flat.cc): a
    // group's flat offset is then in the whole flat buffer.
    gl.part = lay_.stage == 3 ? Elements(CeilDiv(CeilDiv(pg.elements.v, lay_.dp_size), align_) * align_) : pg.elements;
    gl.flat_offset = lay_.flat_total;
    lay_.flat_total += gl.part;
    if (lay_.stage == 3) {
      gl.persistent = pg.elements <= z.stage3_param_persistence_threshold;
      if (gl.persistent) persistent_total += lay_.Padded(gl);
    }
    lay_.groups.push_back(gl);
  }
  if (lay_.FlatPath()) {
    // stage_1_and_2.py __init__: the flat buffer is padded to a multiple of
    // nccl_start_alignment_factor (2) x world size, then cut into equal
    // partitions (get_data_parallel_partitions).
    lay_.flat_padded = CeilDiv(lay_.flat_total.v, 2 * lay_.dp_size) * 2 * lay_.dp_size;
    lay_.flat_total = Elements(lay_.flat_padded / lay_.dp_size);
    plan_.flat_partition = lay_.flat_total;
  }
  return persistent_total;
}

void LayoutPass::LayoutResidentParams(Tier param_home, Elements persistent_total) {
  // Resident low-precision parameters.
  if (lay_.stage < 3) {
    Elements replica(lay_.flat_padded);
    if (lay_.stage == 0)
      for (const auto& gl : lay_.groups) replica += gl.elements;
    lay_.param_replica =
        em_.NewBuffer("param16.replica", Tier::kGpu, StateKind::kParam16, replica.bytes(lay_.lp_bytes), true);
  } else {
    if (persistent_total.v > 0)
      lay_.param_persistent = em_.NewBuffer("param16.persistent", Tier::kGpu, StateKind::kParam16,
                                            persistent_total.bytes(lay_.lp_bytes), true);
    LayoutParamHomes(param_home);
  }
  // Offsets in the replicated homes: groups in order, whole.
  {
    int64_t next_persistent = 0, next_replica = 0;
    for (auto& gl : lay_.groups) {
      if (lay_.stage < 3) {
        gl.home_buffer = lay_.param_replica;
        gl.home_offset = Bytes(next_replica);
        next_replica += lay_.Padded(gl).bytes(lay_.lp_bytes).v;
      } else if (gl.persistent) {
        gl.home_buffer = lay_.param_persistent;
        gl.home_offset = Bytes(next_persistent);
        next_persistent += lay_.Padded(gl).bytes(lay_.lp_bytes).v;
      }
    }
  }
}

void LayoutPass::LayoutGradients() {
  // Gradients: stages 1-2 as stage_1_and_2.py (planner_flat.cc); a replica
  // in stage 0; the partition on the optimizer's tier in stage 3. Stage 3
  // with offload_optimizer accumulates the low-precision partition in CPU
  // memory (DeepSpeed's grad_partitions_flat_buffer, pinned as pin_memory
  // says); the optimizer reads fp32 gradients (grad32, per sub-group tier).
  if (lay_.FlatPath()) {
    LayoutFlatGradients();
  } else if (lay_.stage == 0) {
    lay_.grad =
        em_.NewBuffer("grad.replica", Tier::kGpu, StateKind::kGrad, plan_.buffers[lay_.param_replica].bytes, true);
  } else if (lay_.direct_gradients) {
    lay_.grad = -1;  // shards go straight from the GPU to the optimizer (planner_grads.cc)
  } else if (lay_.OffloadedGradPath()) {
    lay_.grad =
        em_.NewBuffer("grad.partition.cpu", Tier::kCpu, StateKind::kGrad, lay_.flat_total.bytes(lay_.lp_bytes), true);
  } else {
    // Stage 3 on the GPU. DeepSpeed allocates this partition once
    // (grad_partitions_flat_buffer, __init__); before v0.6.0
    // (partition_previous_reduced_grads) at the first reduced gradient of
    // the backward, dropped again by the step (ScopeGradientPartition).
    lay_.grad = em_.NewBuffer("grad.partition", lay_.optim_tier, StateKind::kGrad, lay_.flat_total.bytes(lay_.lp_bytes),
                              !release_.scoped_gpu_gradient_partition);
  }
  lay_.step_grads = lay_.grad_part >= 0 ? lay_.grad_part : lay_.grad;
}

void LayoutPass::LayoutParamOut() {
  // Shards of replicated homes (stages 1-2; persistent groups in stage 3)
  // are updated in a flat output buffer and gathered home.
  if (lay_.dp_size > 1) {
    int64_t out = 0;
    for (auto& gl : lay_.groups) {
      if (!(lay_.stage == 3 && gl.persistent)) continue;
      gl.out_offset = Bytes(out);
      out += gl.part.bytes(lay_.lp_bytes).v;
    }
    if (out > 0) lay_.param_out = em_.NewBuffer("param16.out", Tier::kGpu, StateKind::kGatherBuffer, Bytes(out), true);
  }
}

// The plan-level model description for consumers.
void LayoutPass::DescribeModel() {
  for (size_t i = 0; i < lay_.groups.size(); ++i) {
    const auto& gl = lay_.groups[i];
    const int sg = lay_.sub_group_of[i];
    const Region master = lay_.MasterRegion(sg), m1 = lay_.ExpAvgRegion(sg), m2 = lay_.ExpAvgSqRegion(sg);
    // Stages 1-2: the rank's master partition (Plan::flat_partition).
    const int64_t in = lay_.FlatPath() ? 0 : (gl.flat_offset - lay_.sub_groups[sg].begin).v * 4;
    plan_.param_groups.push_back({graph_.param_groups[i].name, gl.elements, gl.part, gl.flat_offset, gl.persistent,
                                  lay_.stage == 3 ? gl.home : Tier::kGpu, gl.home_offset, gl.home_buffer, master.buffer,
                                  master.offset + Bytes(in), m1.buffer, m1.offset + Bytes(in), m2.buffer,
                                  m2.offset + Bytes(in)});
  }
  for (const auto& m : graph_.modules)
    plan_.modules.push_back({m.name, m.layer, m.param_groups, m.fwd_flops, m.fwd, m.bwd});
}

// Each layer's first and last module, and the positions the passes walk:
// forward, then backward with each checkpointed layer's recomputation
// before its last module.
void LayoutPass::LayoutPositions() {
  Positions p = PositionsOf(graph_, scenario_.training.activation_checkpointing);
  lay_.layer_first = std::move(p.layer_first);
  lay_.layer_last = std::move(p.layer_last);
  lay_.seq = std::move(p.seq);
}

Positions PositionsOf(const ModelGraph& graph, bool activation_checkpointing) {
  Positions p;
  const int n = static_cast<int>(graph.modules.size());
  p.layer_first.assign(graph.num_layers, -1);
  p.layer_last.assign(graph.num_layers, -1);
  for (int i = 0; i < n; ++i) {
    const int l = graph.modules[i].layer;
    if (l < 0) continue;
    if (p.layer_first[l] < 0) p.layer_first[l] = i;
    p.layer_last[l] = i;
  }
  for (int i = 0; i < n; ++i) p.seq.push_back({i, Position::Kind::kForward});
  for (int i = n - 1; i >= 0; --i) {
    const int l = graph.modules[i].layer;
    if (activation_checkpointing && l >= 0 && i == p.layer_last[l])
      for (int k = p.layer_first[l]; k <= p.layer_last[l]; ++k) p.seq.push_back({k, Position::Kind::kRecompute});
    p.seq.push_back({i, Position::Kind::kBackward});
  }
  return p;
}

void LayoutPass::LayoutFlatGradients() {
  const ZeroConfig& z = scenario_.zero;
  const int64_t S = lay_.flat_total.v;
  std::vector<int64_t> overlap(lay_.dp_size, 0);
  for (const GroupLayout& gl : lay_.groups)
    lay_.ForOwners(gl.flat_offset.v, (gl.flat_offset + gl.elements).v,
                   [&](int q, int64_t, int64_t) { overlap[q] += gl.elements.v; });
  const int64_t largest = graph_.largest_tensor.v;  // DeepSpeed's largest parameter
  lay_.overlap_max = *std::max_element(overlap.begin(), overlap.end());
  const bool offload = lay_.optim_tier != Tier::kGpu;
  // Stage 1 accumulates full gradients (param.grad) across micro steps.
  if (lay_.stage == 1)
    lay_.grad =
        em_.NewBuffer("grad.replica", Tier::kGpu, StateKind::kGrad, plan_.buffers[lay_.param_replica].bytes, true);
  if (!offload) {
    if (lay_.dp_size > 1) {
      lay_.grad_part = em_.NewBuffer("grad.partition", Tier::kGpu, StateKind::kGrad,
                                     Elements(lay_.overlap_max).bytes(lay_.lp_bytes), true);
    } else if (lay_.stage == 2) {
      lay_.grad = em_.NewBuffer("grad.partition", Tier::kGpu, StateKind::kGrad, Elements(S).bytes(lay_.lp_bytes), true);
    }
    if (lay_.dp_size == 1) {
      // One rank: the gradients are not reduced, but DeepSpeed still
      // allocates its IPG bucket(s) (setup_buckets).
      for (int i = 0; i < (z.overlap_comm ? 2 : 1); ++i)
        em_.NewBuffer("grad.ipg_bucket." + std::to_string(i), Tier::kGpu, StateKind::kCommBuffer,
                      z.reduce_bucket_size.bytes(lay_.lp_bytes), true);
    }
    return;
  }
  // offload_optimizer cpu: the pinned low-precision copy of the partition
  // the CPU step writes (param_buffer_of_bit16_for_cpu_offload_groups), the
  // largest-parameter temporaries (temp_grad_buffer_for_{cpu,gpu}_offload),
  // and with several micro steps the accumulator (accumulated_grads_in_cpu:
  // the full numel of each parameter in the partition).
  lay_.param_lp_cpu =
      em_.NewBuffer("param16.partition.cpu", Tier::kCpu, StateKind::kParam16, Elements(S).bytes(lay_.lp_bytes), true);
  plan_.buffers[lay_.param_lp_cpu].pinned = z.offload_optimizer.pin_memory;
  em_.NewBuffer("grad.offload.gpu_temp", Tier::kGpu, StateKind::kCommBuffer, Elements(largest).bytes(lay_.lp_bytes),
                true);
  em_.NewBuffer("grad.offload.cpu_temp", Tier::kCpu, StateKind::kGrad, Elements(largest).bytes(lay_.lp_bytes), true);
  if (plan_.micro_steps > 1)
    lay_.grad_accum = em_.NewBuffer("grad.accum.cpu", Tier::kCpu, StateKind::kGrad,
                                    Elements(lay_.overlap_max).bytes(lay_.lp_bytes), true);
}

}  // namespace strata::detail
