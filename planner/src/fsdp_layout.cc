// FSDP2 front end: the driver and the layout (fsdp_builder.h). Units as
// fully_shard wraps them, each parameter's dim-0 shard padded to
// ceil(rows / W) rows (FSDPParam._init_sharded_param), and the resident
// fp32 shards and Adam moments on the GPU or, under CPUOffloadPolicy, in
// CPU memory.
#include <algorithm>

#include "fsdp_builder.h"
#include "strata/core/parallel.h"

namespace strata::detail {

namespace {

BufferRules FsdpRules(const FsdpSpec& f) {
  BufferRules r;
  r.pin_optimizer = f.pin_memory;  // CPUOffloadPolicy(pin_memory): the CPU shards and gradients
  return r;
}

int BytesOf(const std::optional<Precision>& p, Precision fallback) { return BytesPerElement(p.value_or(fallback)); }

}  // namespace

FsdpBuilder::FsdpBuilder(const Scenario& s, const ModelGraph& g)
    : s_(s), spec_(s.fsdp), graph_(g), em_(g, FsdpRules(s.fsdp)), plan_(em_.plan()) {}

Result<Plan> FsdpBuilder::Build() {
  STRATA_RETURN_IF_ERROR(LayOut());
  grad_.assign(units_.size(), -1);
  grad_ops_.assign(units_.size(), -1);
  for (int m = 0; m < plan_.micro_steps; ++m) {
    em_.SetMicro(m);
    MicroStep();
  }
  Step();
  return em_.Take();
}

Status FsdpBuilder::LayOut() {
  const int world = s_.hardware.world_size();
  if (s_.parallelism.tensor > 1 || s_.parallelism.pipeline > 1)
    return Status::InvalidArgument("framework: fsdp with tensor or pipeline parallelism is not modelled");
  replicate_ = spec_.replicate > 0 ? spec_.replicate : spec_.shard > 0 ? world / spec_.shard : 1;
  shard_ = spec_.shard > 0 ? spec_.shard : world / replicate_;
  if (shard_ * replicate_ != world)
    return Status::InvalidArgument("fsdp.mesh: replicate x shard must be the ranks (" + std::to_string(world) + ")");
  const int k = spec_.reshard_after_forward;
  post_k_ = k > 1 && k < shard_ ? k : 0;  // k = W is true, 1 is false (_get_post_forward_mesh_info)
  if (post_k_ > 0 && shard_ % post_k_ != 0)
    return Status::InvalidArgument("fsdp.reshard_after_forward: " + std::to_string(k) +
                                   " does not divide the shard group of " + std::to_string(shard_));
  lp_ = BytesOf(spec_.param_dtype, s_.training.precision);
  reduce_ = spec_.reduce_dtype ? BytesPerElement(*spec_.reduce_dtype) : lp_;
  tier_ = spec_.offload_cpu ? Tier::kCpu : Tier::kGpu;

  DescribePlanHeader(s_, graph_, world, plan_);
  plan_.framework = Framework::kFsdp;
  // The model computes in param_dtype (the unsharded parameters' dtype).
  plan_.run.precision = spec_.param_dtype.value_or(s_.training.precision);
  plan_.zero_stage = 3;
  plan_.groups.push_back({"dp", ParallelLayout::Group(0, world, 1)});
  if (replicate_ > 1) {
    shard_group_ = static_cast<int>(plan_.groups.size());
    plan_.groups.push_back({"fsdp_shard", ParallelLayout::Group(0, shard_, 1)});
    replicate_group_ = static_cast<int>(plan_.groups.size());
    plan_.groups.push_back({"fsdp_replicate", ParallelLayout::Group(0, replicate_, shard_)});
  }
  if (post_k_ > 0) {
    post_group_ = static_cast<int>(plan_.groups.size());
    plan_.groups.push_back({"fsdp_post_forward", ParallelLayout::Group(0, post_k_, 1)});
  }
  pos_ = PositionsOf(graph_, s_.training.activation_checkpointing);
  LayOutUnits();
  LayOutBuffers();
  DescribeGroups();
  return Status::Ok();
}

// Units: fully_shard on each block (or list of blocks) then on the model,
// whose own group takes every parameter no block holds (the embedding,
// the final norm, the head); `units: root` is fully_shard(model) alone.
void FsdpBuilder::LayOutUnits() {
  const int layers = graph_.num_layers;
  std::vector<int> unit_of_layer(static_cast<size_t>(std::max(0, layers)), 0);
  units_.push_back({"root", true});
  if (!spec_.root_only) {
    std::vector<int> sizes = spec_.units;
    if (sizes.empty()) sizes.assign(static_cast<size_t>(layers), 1);
    int l = 0;
    for (int n : sizes) {
      const std::string name = "layer" + std::to_string(l) + (n > 1 ? "-" + std::to_string(l + n - 1) : "");
      units_.push_back({name, false});
      for (int i = 0; i < n && l < layers; ++i) unit_of_layer[static_cast<size_t>(l++)] = units_.size() - 1;
    }
  }
  unit_of_module_.assign(graph_.modules.size(), 0);
  for (size_t m = 0; m < graph_.modules.size(); ++m) {
    const int l = graph_.modules[m].layer;
    unit_of_module_[m] = l >= 0 ? unit_of_layer[static_cast<size_t>(l)] : 0;
  }
  // Each group once, in the order the forward first uses it.
  part_.assign(graph_.param_groups.size(), 0);
  flat_.assign(graph_.param_groups.size(), -1);
  for (size_t m = 0; m < graph_.modules.size(); ++m)
    for (int gi : graph_.modules[m].param_groups) {
      FsdpUnit& u = units_[static_cast<size_t>(unit_of_module_[m])];
      if (std::find(u.groups.begin(), u.groups.end(), gi) != u.groups.end()) continue;
      const ParamGroupSpec& pg = graph_.param_groups[static_cast<size_t>(gi)];
      const int64_t rows = std::max<int64_t>(1, pg.rows), cols = pg.elements.v / rows;
      part_[static_cast<size_t>(gi)] = CeilDiv(rows, shard_) * cols;
      u.off.push_back(u.shard * shard_);
      u.groups.push_back(gi);
      u.shard += part_[static_cast<size_t>(gi)];
    }
  for (FsdpUnit& u : units_) {
    u.offset = total_;
    for (size_t k = 0; k < u.groups.size(); ++k) flat_[static_cast<size_t>(u.groups[k])] = total_ + u.off[k] / shard_;
    total_ += u.shard;
  }
  for (int p = 0; p < static_cast<int>(pos_.seq.size()); ++p) {
    FsdpUnit& u = units_[static_cast<size_t>(unit_of_module_[pos_.seq[p].module])];
    if (graph_.modules[pos_.seq[p].module].param_groups.empty()) continue;
    const bool bwd_phase = pos_.seq[p].kind != Position::Kind::kForward;
    int& first = bwd_phase ? u.first_bwd : u.first_fwd;
    if (first < 0) first = p;
    (bwd_phase ? u.last_bwd : u.last_fwd) = p;
  }
}

// The resident state of one rank: its fp32 shard (the parameters the
// optimizer steps; FSDP2 keeps no other master copy) and Adam's moments
// beside it, on the GPU or in CPU memory.
void FsdpBuilder::LayOutBuffers() {
  shard32_ = em_.NewBuffer("fsdp.param32.shard", tier_, StateKind::kMaster32, Bytes(total_ * 4), true);
  moments_ = em_.NewBuffer("fsdp.adam.moments", tier_, StateKind::kMoments, Bytes(2 * total_ * 4), true);
  // torch's optimizer makes its states with zeros_like, which does not
  // pin: pageable whatever CPUOffloadPolicy(pin_memory) says.
  plan_.buffers[static_cast<size_t>(moments_)].pinned = false;
  for (const ModuleSpec& m : graph_.modules)
    plan_.modules.push_back({m.name, m.layer, m.param_groups, m.fwd_flops, m.fwd, m.bwd});
}

// What the executor and the reports read of each group: its shard's size
// and place (partition_elements: its padded rows' elements) and its fp32
// state; it has no low-precision home (cast at each gather).
void FsdpBuilder::DescribeGroups() {
  for (size_t gi = 0; gi < graph_.param_groups.size(); ++gi) {
    const int64_t f = flat_[gi];
    PlanParamGroup g;
    g.name = graph_.param_groups[gi].name;
    g.elements = graph_.param_groups[gi].elements;
    g.partition_elements = Elements(part_[gi]);
    g.flat_offset = Elements(f);
    g.home = tier_;
    g.master_buffer = shard32_;
    g.master_offset = Bytes(f * 4);
    g.exp_avg_buffer = moments_;
    g.exp_avg_offset = Bytes(f * 4);
    g.exp_avg_sq_buffer = moments_;
    g.exp_avg_sq_offset = Bytes((total_ + f) * 4);
    plan_.param_groups.push_back(std::move(g));
  }
  Bytes gathered;
  for (const FsdpUnit& u : units_) gathered += Lp(u.shard * shard_);
  plan_.cache.compulsory_allgather = gathered;
}

Result<Plan> BuildFsdpPlan(const Scenario& s, const ModelGraph& g) { return FsdpBuilder(s, g).Build(); }

}  // namespace strata::detail
