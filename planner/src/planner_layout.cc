// Planner: layout of the resident model states, buffer by buffer as DeepSpeed
// allocates them (deepspeed/runtime/zero/stage3.py, swap_tensor/*.py; the
// rows of docs/fidelity.md cite the functions):
//  - optimizer sub-groups of whole parameter groups (_create_fp16_sub_groups);
//  - stage 3 parameter homes: partitions of at least max(1 MiB,
//    aio.block_size) on NVMe (zero.Init), a max_in_cpu prefix of whole
//    sub-groups in one always-pinned CPU flat buffer
//    (_create_param_groups_fp16_flat_cpu_memory), the rest in CPU memory;
//  - fp32 master, moments and gradient per sub-group on its tier (swappable
//    sub-groups on NVMe, the others in CPU memory: _swappable_optimizer_subgroup);
//  - the low-precision gradient accumulator in CPU memory
//    (grad_partitions_flat_buffer) with offload_optimizer;
//  - swap pools: offload_param.buffer_count x buffer_size elements, the
//    write-back buffer of updated fp16 partitions, offload_optimizer.buffer_count
//    fp32 buffers of the largest sub-group; always pinned;
//  - before v0.15 (the release's cpu_adam_tile_elements), CPU Adam's pinned
//    double buffer, counted and never allocated.
#include <algorithm>

#include "plan_builder.h"

namespace strata::detail {

int64_t PlanBuilder::IoAligned(int64_t elements, int bytes_per_element) const {
  const int64_t align = std::max<int64_t>(1, 1024LL * scenario_.aio.intra_op_parallelism / bytes_per_element);
  return CeilDiv(elements, align) * align;
}

Region PlanBuilder::MasterRegion(int sg) const {
  const SubGroup& g = sub_groups_[sg];
  const int t = static_cast<int>(g.tier);
  return R(master_[t], g.state_offset * 4, g.n.v * 4);
}
Region PlanBuilder::ExpAvgRegion(int sg) const {
  const SubGroup& g = sub_groups_[sg];
  const int t = static_cast<int>(g.tier);
  return R(moments_[t], g.state_offset * 4, g.n.v * 4);
}
Region PlanBuilder::ExpAvgSqRegion(int sg) const {
  const SubGroup& g = sub_groups_[sg];
  const int t = static_cast<int>(g.tier);
  return R(moments_[t], (state_total_[t] + g.state_offset) * 4, g.n.v * 4);
}
Region PlanBuilder::Grad32Region(int sg, int64_t from, int64_t n) const {
  const SubGroup& g = sub_groups_[sg];
  const int t = static_cast<int>(g.tier);
  return R(grad32_[t], (g.state_offset + from - g.begin.v) * 4, n * 4);
}

// stage3.py _create_fp16_sub_groups: parameters are appended whole and a
// sub-group closes once its partition elements reach sub_group_size (or at
// the last parameter); a parameter larger than that is never split. Stages
// 0-2 step the whole partition at once.
void PlanBuilder::LayoutSubGroups() {
  sub_groups_.clear();
  sub_group_of_.assign(groups_.size(), -1);
  const int G = static_cast<int>(groups_.size());
  const int64_t S = scenario_.zero.sub_group_size.v;
  int first = 0;
  int64_t acc = 0;
  for (int g = 0; g < G; ++g) {
    acc += groups_[g].part.v;
    const bool close = g + 1 == G || (stage_ == 3 && S < flat_total_.v && acc >= S);
    if (close && stage_ < 3) acc = flat_total_.v;  // stages 1-2: the rank's whole flat partition
    if (!close) continue;
    SubGroup sg;
    sg.first = first;
    sg.last = g + 1;
    sg.begin = groups_[first].flat_offset;
    sg.n = Elements(acc);
    for (int k = first; k <= g; ++k) sub_group_of_[k] = static_cast<int>(sub_groups_.size());
    sub_groups_.push_back(sg);
    first = g + 1;
    acc = 0;
  }
}

// Stage 3: where each non-persistent group's low-precision partition lives.
void PlanBuilder::LayoutParamHomes(Tier param_home) {
  const OffloadParamConfig& op = scenario_.zero.offload_param;
  int64_t next_nvme = 0, next_small = 0, next_gpu = 0;
  std::vector<Tier> home(groups_.size(), Tier::kGpu);
  std::vector<bool> in_flat(groups_.size(), false);
  if (param_home == Tier::kCpu) {
    std::fill(in_flat.begin(), in_flat.end(), true);
  } else if (param_home == Tier::kNvme) {
    // The max_in_cpu prefix of whole sub-groups goes to the CPU flat buffer.
    const int64_t flat = std::min(flat_total_.v, op.max_in_cpu.v);
    int64_t at = 0;
    for (const SubGroup& sg : sub_groups_) {
      const bool fits = at + sg.n.v <= flat;
      at += sg.n.v;
      for (int g = sg.first; g < sg.last; ++g) in_flat[g] = fits;
    }
  }
  // The CPU flat buffer (offload_param cpu: all of it; nvme: min(total,
  // max_in_cpu), allocated even when no sub-group fits): always pinned.
  BufferId flat_buf = -1;
  if (param_home != Tier::kGpu) {
    const int64_t flat = param_home == Tier::kCpu ? flat_total_.v : std::min(flat_total_.v, op.max_in_cpu.v);
    if (flat > 0) {
      flat_buf = em_.NewBuffer("param16.flat.cpu", Tier::kCpu, StateKind::kParam16, Elements(flat).bytes(lp_bytes_), true);
      plan_.buffers[flat_buf].pinned = true;
    }
  }
  Elements nvme_total, small_total, gpu_total;
  for (size_t i = 0; i < groups_.size(); ++i) {
    GroupLayout& gl = groups_[i];
    if (gl.persistent) continue;
    if (param_home == Tier::kGpu) {
      home[i] = Tier::kGpu;
      gpu_total += gl.part;
    } else if (in_flat[i]) {
      home[i] = Tier::kCpu;
    } else {
      // zero.Init: a partition of at least min_aio bytes goes to NVMe, a
      // smaller one stays in CPU memory (pinned as pin_memory says).
      home[i] = ZeroInitSwaps(static_cast<int>(i)) ? Tier::kNvme : Tier::kCpu;
      (home[i] == Tier::kNvme ? nvme_total : small_total) += gl.part;
    }
  }
  auto partition_buffer = [&](Tier t, Elements total) {
    return total.v > 0 ? em_.NewBuffer("param16.partition." + std::string(TierName(t)), t, StateKind::kParam16,
                                   total.bytes(lp_bytes_), true)
                       : -1;
  };
  const BufferId nvme_buf = partition_buffer(Tier::kNvme, nvme_total);
  const BufferId small_buf = partition_buffer(Tier::kCpu, small_total);
  const BufferId gpu_buf = partition_buffer(Tier::kGpu, gpu_total);
  for (size_t i = 0; i < groups_.size(); ++i) {
    GroupLayout& gl = groups_[i];
    if (gl.persistent) continue;
    gl.home = home[i];
    if (home[i] == Tier::kGpu) {
      gl.home_buffer = gpu_buf;
      gl.home_offset = Bytes(next_gpu);
      next_gpu += gl.part.bytes(lp_bytes_).v;
    } else if (in_flat[i]) {
      gl.home_buffer = flat_buf;
      gl.home_offset = gl.flat_offset.bytes(lp_bytes_);
    } else if (home[i] == Tier::kNvme) {
      gl.home_buffer = nvme_buf;
      gl.home_offset = Bytes(next_nvme);
      next_nvme += gl.part.bytes(lp_bytes_).v;
    } else {
      gl.home_buffer = small_buf;
      gl.home_offset = Bytes(next_small);
      next_small += gl.part.bytes(lp_bytes_).v;
    }
    gl.fetched = !(gl.home == Tier::kGpu && dp_size_ == 1);
  }
}

// fp32 master weights and moments (and with offload_optimizer the fp32
// gradient) per sub-group on its tier. stage3.py keeps the fp32 master and
// Adam states of CPU sub-groups in pageable memory and pins only the fp32
// gradient (and the accumulator) as offload_optimizer.pin_memory says.
void PlanBuilder::LayoutOptimizerStates() {
  for (SubGroup& sg : sub_groups_) {
    sg.swappable = optim_tier_ == Tier::kNvme && sg.n.v * 4 >= min_aio_bytes_;
    sg.tier = optim_tier_ == Tier::kNvme ? (sg.swappable ? Tier::kNvme : Tier::kCpu) : optim_tier_;
    const int t = static_cast<int>(sg.tier);
    sg.state_offset = state_total_[t];
    state_total_[t] += sg.n.v;
  }
  for (Tier t : kAllTiers) {
    const int ti = static_cast<int>(t);
    if (state_total_[ti] == 0) continue;
    const std::string suffix = t == optim_tier_ ? "" : "." + std::string(TierName(t));
    const Elements n(state_total_[ti]);
    master_[ti] = em_.NewBuffer("master32" + suffix, t, StateKind::kMaster32, n.bytes(4), true);
    moments_[ti] = em_.NewBuffer("adam.moments" + suffix, t, StateKind::kMoments, n.bytes(8), true);
    if (OffloadedGradPath() || (FlatPath() && t != Tier::kGpu))
      grad32_[ti] = em_.NewBuffer("grad32" + suffix, t, StateKind::kGrad, n.bytes(4), true);
    // Stage 3 pins neither; stages 1-2 pin the master as pin_memory says
    // (stage_1_and_2.py __init__: weights_partition) but not the moments
    // (created by the optimizer with zeros_like).
    if (stage_ == 3 && t == Tier::kCpu) plan_.buffers[master_[ti]].pinned = false;
    if (t == Tier::kCpu) plan_.buffers[moments_[ti]].pinned = false;
  }
}

Status PlanBuilder::LayoutSwapBuffers() {
  const ZeroConfig& z = scenario_.zero;
  // offload_param nvme: the param swapper's pool (partitioned_param_swapper.py
  // _configure_aio), allocated whenever the remote device is NVMe. A slot
  // holds one partition: zero.Init asserts partition numel <= buffer_size
  // for every partition it swaps (get_buffer).
  if (stage_ == 3 && z.offload_param.device == OffloadDevice::kNvme) {
    Elements largest_unpadded, largest_padded;
    int largest = -1;
    for (size_t i = 0; i < groups_.size(); ++i) {
      if (!ZeroInitSwaps(static_cast<int>(i))) continue;
      const Elements unpadded(CeilDiv(groups_[i].elements.v, dp_size_));
      if (unpadded > largest_unpadded) {
        largest_unpadded = unpadded;
        largest = static_cast<int>(i);
      }
      if (groups_[i].home == Tier::kNvme) largest_padded = std::max(largest_padded, groups_[i].part);
    }
    if (largest >= 0 && z.offload_param.buffer_size < largest_unpadded)
      STRATA_RETURN_IF_ERROR(Fire("buffer_size_too_small",
                                  "zero_optimization.offload_param.buffer_size (" +
                                      std::to_string(z.offload_param.buffer_size.v) +
                                      " elements) is smaller than the partition of '" +
                                      graph_.param_groups[largest].name + "' (" + std::to_string(largest_unpadded.v) +
                                      " elements), which zero.Init swaps to NVMe; DeepSpeed fails with "
                                      "\"More elements " +
                                      std::to_string(largest_unpadded.v) + " than buffer size " +
                                      std::to_string(z.offload_param.buffer_size.v) +
                                      "\". Set buffer_size >= " + std::to_string(largest_unpadded.v)));
    if (largest_padded.v > 0 && z.offload_param.buffer_count < 1)
      STRATA_RETURN_IF_ERROR(Fire("param_buffer_count_zero",
                                  "zero_optimization.offload_param.buffer_count is 0 but parameters are swapped to "
                                  "NVMe; DeepSpeed fails with \"No swap buffers to allocate for fp16 param\". Set "
                                  "buffer_count >= 1"));
    const Elements size(std::max(IoAligned(z.offload_param.buffer_size.v, lp_bytes_), largest_padded.v));
    param_slot_bytes_ = size.bytes(lp_bytes_);
    const int count = std::max(z.offload_param.buffer_count, largest_padded.v > 0 ? 1 : 0);
    for (int i = 0; i < count; ++i)
      param_slots_.push_back(
          em_.NewBuffer("swap.param." + std::to_string(i), Tier::kCpu, StateKind::kSwapBuffer, param_slot_bytes_, true));
    param_slot_user_.assign(param_slots_.size(), -1);
    // The write-back buffer (stage3.py, reserve_partitioned_swap_space):
    // sized from the full numel of each parameter of the sub-group with the
    // most partition elements, io-aligned (DeepSpeed's sizing; it holds
    // partitions), and at least what one sub-group writes back here. Before
    // v0.6.0 (writeback_sized_by_partitions) from its partitions' numel.
    if (largest_padded.v > 0) {
      const SubGroup* big = &sub_groups_[0];
      for (const SubGroup& sg : sub_groups_)
        if (sg.n > big->n) big = &sg;
      int64_t ds_size = 0, needed = 0;
      for (int g = big->first; g < big->last; ++g)
        ds_size +=
            IoAligned(release_.writeback_sized_by_partitions ? groups_[g].part.v : groups_[g].elements.v, lp_bytes_);
      for (const SubGroup& sg : sub_groups_) {
        int64_t here = 0;
        for (int g = sg.first; g < sg.last; ++g)
          if (!groups_[g].persistent && groups_[g].home == Tier::kNvme) here += groups_[g].part.v;
        needed = std::max(needed, here);
      }
      writeback_ = em_.NewBuffer("swap.param.writeback", Tier::kCpu, StateKind::kSwapBuffer,
                             Elements(std::max(ds_size, needed)).bytes(lp_bytes_), true);
    }
  }
  // offload_optimizer nvme: SwapBufferManager(num_elems = io-aligned largest
  // sub-group, count = buffer_count, fp32), pinned whatever pin_memory says.
  if (optim_tier_ == Tier::kNvme) {
    int64_t largest = 0;
    int swappable = 0;
    for (const SubGroup& sg : sub_groups_) {
      largest = std::max(largest, sg.n.v);
      swappable += sg.swappable ? 1 : 0;
    }
    const auto& oo = z.offload_optimizer;
    optim_sets_ = std::min(1 + (oo.pipeline_read ? 1 : 0) + (oo.pipeline_write ? 1 : 0), swappable);
    const int needed = 4 * optim_sets_;
    if (oo.buffer_count < needed)
      STRATA_RETURN_IF_ERROR(Fire("optimizer_buffer_count_too_small", OptimizerBufferMessage(needed)));
    optim_slot_elems_ = IoAligned(largest, 4);
    const int count = std::max({oo.buffer_count, needed, 1});
    for (int i = 0; i < count; ++i)
      optim_slots_.push_back(em_.NewBuffer("swap.optim." + std::to_string(i), Tier::kCpu, StateKind::kSwapBuffer,
                                       Elements(optim_slot_elems_).bytes(4), true));
    optim_slot_user_.assign(optim_slots_.size(), -1);
  }
  // The optimizer on CPU or NVMe steps with DeepSpeedCPUAdam, whose
  // Adam_Optimizer constructor pins two buffers of TILE floats for copying
  // updated fp16 parameters to the GPU (csrc/includes/cpu_adam.h:
  // cudaMallocHost of _doubled_buffer[0] and [1]), whatever the model's
  // size, one optimizer per process: TILE 1024^3 up to v0.3.14 and in the
  // ZeRO-Infinity paper's a1e9753 (8 GiB: v0.3, v0.3.13), 128 x 1024^2 from v0.3.15
  // (ZeRO-Infinity's merge, PR #976) to v0.14 (1 GiB: v0.5), none since
  // v0.15 moved CPU Adam off CUDA (current). No op of the plan touches it:
  // counted, never allocated.
  if (optim_tier_ != Tier::kGpu && release_.cpu_adam_tile_elements > 0) {
    const int64_t tile = release_.cpu_adam_tile_elements;
    const BufferId b =
        em_.NewBuffer("cpu_adam.double_buffer", Tier::kCpu, StateKind::kSwapBuffer, Bytes(2 * tile * 4), true);
    plan_.buffers[b].backed = false;
  }
  return Status::Ok();
}

Status PlanBuilder::Fire(const char* id, std::string message) {
  if (opt_.strict) return Status::Infeasible("[" + std::string(id) + "] " + message);
  if (opt_.checks != nullptr) opt_.checks->push_back({id, std::move(message)});
  return Status::Ok();
}

std::string PlanBuilder::OptimizerBufferMessage(int needed) const {
  const auto& oo = scenario_.zero.offload_optimizer;
  const bool pipelined = oo.pipeline_read || oo.pipeline_write;
  return "zero_optimization.offload_optimizer.buffer_count is " + std::to_string(oo.buffer_count) + " but the step " +
         (pipelined ? "with pipeline_read/pipeline_write " : "") + "holds " + std::to_string(needed) +
         " swap buffers at once (four fp32 tensors per sub-group: parameters, gradient, exp_avg, exp_avg_sq); "
         "DeepSpeed fails with " +
         (pipelined ? "\"PipelinedOptimizerSwapper ran out of swap buffers, try increasing 'buffer_count'\""
                    : "an AssertionError in PartitionedOptimizerSwapper.swap_in_optimizer_state") +
         ". Set buffer_count >= " + std::to_string(needed);
}

}  // namespace strata::detail
