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
//    double buffer, counted and never allocated.#include <algorithm>
#include <string>

#include "layout_pass.h"

namespace strata::detail {

int64_t LayoutPass::IoAligned(int64_t elements, int bytes_per_element) const {
  const int64_t align = std::max<int64_t>(1, 1024LL * scenario_.aio.intra_op_parallelism / bytes_per_element);
  return CeilDiv(elements, align) * align;
}

// stage3.py _create_fp16_sub_groups: parameters are appended whole and a
// sub-group closes once its partition elements reach sub_group_size (or at
// the last parameter); a parameter larger than that is never split. Stages
// 0-2 step the whole partition at once.
void LayoutPass::LayoutSubGroups() {
  lay_.sub_groups.clear();
  lay_.sub_group_of.assign(lay_.groups.size(), -1);
  const int G = static_cast<int>(lay_.groups.size());
  const int64_t S = scenario_.zero.sub_group_size.v;
  int first = 0;
  int64_t acc = 0;
  for (int g = 0; g < G; ++g) {
    acc += lay_.groups[g].part.v;
    const bool close = g + 1 == G || (lay_.stage == 3 && S < lay_.flat_total.v && acc >= S);
    if (close && lay_.stage < 3) acc = lay_.flat_total.v;  // stages 1-2: the rank's whole flat partition
    if (!close) continue;
    SubGroup sg;
    sg.first = first;
    sg.last = g + 1;
    sg.begin = lay_.groups[first].flat_offset;
    sg.n = Elements(acc);
    for (int k = first; k <= g; ++k) lay_.sub_group_of[k] = static_cast<int>(lay_.sub_groups.size());
    lay_.sub_groups.push_back(sg);
    first = g + 1;
    acc = 0;
  }
}

// Stage 3: where each non-persistent group's low-precision partition lives.
void LayoutPass::LayoutParamHomes(Tier param_home) {
  const OffloadParamConfig& op = scenario_.zero.offload_param;
  int64_t next_nvme = 0, next_small = 0, next_gpu = 0;
  std::vector<Tier> home(lay_.groups.size(), Tier::kGpu);
  std::vector<bool> in_flat(lay_.groups.size(), false);
  if (param_home == Tier::kCpu) {
    std::fill(in_flat.begin(), in_flat.end(), true);
  } else if (param_home == Tier::kNvme) {
    // The max_in_cpu prefix of whole sub-groups goes to the CPU flat buffer.
    const int64_t flat = std::min(lay_.flat_total.v, op.max_in_cpu.v);
    int64_t at = 0;
    for (const SubGroup& sg : lay_.sub_groups) {
      const bool fits = at + sg.n.v <= flat;
      at += sg.n.v;
      for (int g = sg.first; g < sg.last; ++g) in_flat[g] = fits;
    }
  }
  // The CPU flat buffer (offload_param cpu: all of it; nvme: min(total,
  // max_in_cpu), allocated even when no sub-group fits): always pinned.
  BufferId flat_buf = -1;
  if (param_home != Tier::kGpu) {
    const int64_t flat = param_home == Tier::kCpu ? lay_.flat_total.v : std::min(lay_.flat_total.v, op.max_in_cpu.v);
    if (flat > 0) {
      flat_buf =
          em_.NewBuffer("param16.flat.cpu", Tier::kCpu, StateKind::kParam16, Elements(flat).bytes(lay_.lp_bytes), true);
      plan_.buffers[flat_buf].pinned = true;
    }
  }
  Elements nvme_total, small_total, gpu_total;
  for (size_t i = 0; i < lay_.groups.size(); ++i) {
    GroupLayout& gl = lay_.groups[i];
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
                                       total.bytes(lay_.lp_bytes), true)
                       : -1;
  };
  const BufferId nvme_buf = partition_buffer(Tier::kNvme, nvme_total);
  const BufferId small_buf = partition_buffer(Tier::kCpu, small_total);
  const BufferId gpu_buf = partition_buffer(Tier::kGpu, gpu_total);
  for (size_t i = 0; i < lay_.groups.size(); ++i) {
    GroupLayout& gl = lay_.groups[i];
    if (gl.persistent) continue;
    gl.home = home[i];
    if (home[i] == Tier::kGpu) {
      gl.home_buffer = gpu_buf;
      gl.home_offset = Bytes(next_gpu);
      next_gpu += gl.part.bytes(lay_.lp_bytes).v;
    } else if (in_flat[i]) {
      gl.home_buffer = flat_buf;
      gl.home_offset = gl.flat_offset.bytes(lay_.lp_bytes);
    } else if (home[i] == Tier::kNvme) {
      gl.home_buffer = nvme_buf;
      gl.home_offset = Bytes(next_nvme);
      next_nvme += gl.part.bytes(lay_.lp_bytes).v;
    } else {
      gl.home_buffer = small_buf;
      gl.home_offset = Bytes(next_small);
      next_small += gl.part.bytes(lay_.lp_bytes).v;
    }
    gl.fetched = !(gl.home == Tier::kGpu && lay_.dp_size == 1);
  }
}

// fp32 master weights and moments (and with offload_optimizer the fp32
// gradient) per sub-group on its tier. stage3.py keeps the fp32 master and
// Adam states of CPU sub-groups in pageable memory and pins only the fp32
// gradient (and the accumulator) as offload_optimizer.pin_memory says.
void LayoutPass::LayoutOptimizerStates() {
  const int on_gpu = PartialOffloadGpuSubGroups();
  for (size_t i = 0; i < lay_.sub_groups.size(); ++i) {
    SubGroup& sg = lay_.sub_groups[i];
    sg.swappable = lay_.optim_tier == Tier::kNvme && sg.n.v * 4 >= min_aio_bytes_;
    sg.tier = lay_.optim_tier == Tier::kNvme ? (sg.swappable ? Tier::kNvme : Tier::kCpu) : lay_.optim_tier;
    if (static_cast<int>(i) < on_gpu) sg.tier = Tier::kGpu;
    const int t = static_cast<int>(sg.tier);
    sg.state_offset = lay_.state_total[t];
    lay_.state_total[t] += sg.n.v;
  }
  for (Tier t : kAllTiers) {
    const int ti = static_cast<int>(t);
    if (lay_.state_total[ti] == 0) continue;
    const std::string suffix = t == lay_.optim_tier ? "" : "." + std::string(TierName(t));
    const Elements n(lay_.state_total[ti]);
    lay_.master[ti] = em_.NewBuffer("master32" + suffix, t, StateKind::kMaster32, n.bytes(4), true);
    lay_.moments[ti] = em_.NewBuffer("adam.moments" + suffix, t, StateKind::kMoments, n.bytes(8), true);
    if (lay_.OffloadedGradPath() || (lay_.FlatPath() && t != Tier::kGpu))
      lay_.grad32[ti] = em_.NewBuffer("grad32" + suffix, t, StateKind::kGrad, n.bytes(4), true);
    // Stage 3 pins neither; stages 1-2 pin the master as pin_memory says
    // (stage_1_and_2.py __init__: weights_partition) but not the moments
    // (created by the optimizer with zeros_like).
    if (lay_.stage == 3 && t == Tier::kCpu) plan_.buffers[lay_.master[ti]].pinned = false;
    if (t == Tier::kCpu) plan_.buffers[lay_.moments[ti]].pinned = false;
  }
}

// offload_optimizer.ratio below 1 with the optimizer on the CPU (stage3.py
// _create_fp32_partitions: subgroup_to_device): sub-groups i < int((1 -
// ratio) x N) keep their fp32 states and gradient on the GPU and step there
// (_optimizer_step's backup torch AdamW); the rest on the CPU. With NVMe the
// release swaps GPU sub-groups as well, which is not planned: ratio is then
// read as 1 (the loader lists it as not modelled).
int LayoutPass::PartialOffloadGpuSubGroups() const {
  const double ratio = scenario_.zero.offload_optimizer.ratio;
  if (lay_.stage != 3 || lay_.optim_tier != Tier::kCpu || !(ratio < 1)) return 0;
  return static_cast<int>((1 - ratio) * static_cast<double>(lay_.sub_groups.size()));
}

Status LayoutPass::LayoutSwapBuffers() {
  const ZeroConfig& z = scenario_.zero;
  // offload_param nvme: the param swapper's pool (partitioned_param_swapper.py
  // _configure_aio), allocated whenever the remote device is NVMe. A slot
  // holds one partition: zero.Init asserts partition numel <= buffer_size
  // for every partition it swaps (get_buffer).
  if (lay_.stage == 3 && z.offload_param.device == OffloadDevice::kNvme) {
    Elements largest_unpadded, largest_padded;
    int largest = -1;
    for (size_t i = 0; i < lay_.groups.size(); ++i) {
      if (!ZeroInitSwaps(static_cast<int>(i))) continue;
      const Elements unpadded(CeilDiv(lay_.groups[i].elements.v, lay_.dp_size));
      if (unpadded > largest_unpadded) {
        largest_unpadded = unpadded;
        largest = static_cast<int>(i);
      }
      if (lay_.groups[i].home == Tier::kNvme) largest_padded = std::max(largest_padded, lay_.groups[i].part);
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
    const Elements size(std::max(IoAligned(z.offload_param.buffer_size.v, lay_.lp_bytes), largest_padded.v));
    lay_.param_slot_bytes = size.bytes(lay_.lp_bytes);
    const int count = std::max(z.offload_param.buffer_count, largest_padded.v > 0 ? 1 : 0);
    for (int i = 0; i < count; ++i)
      lay_.param_slots.push_back(em_.NewBuffer("swap.param." + std::to_string(i), Tier::kCpu, StateKind::kSwapBuffer,
                                               lay_.param_slot_bytes, true));
    // The write-back buffer (stage3.py, reserve_partitioned_swap_space):
    // sized from the full numel of each parameter of the sub-group with the
    // most partition elements, io-aligned (DeepSpeed's sizing; it holds
    // partitions), and at least what one sub-group writes back here. Before
    // v0.6.0 (writeback_sized_by_partitions) from its partitions' numel.
    if (largest_padded.v > 0) {
      const SubGroup* big = &lay_.sub_groups[0];
      for (const SubGroup& sg : lay_.sub_groups)
        if (sg.n > big->n) big = &sg;
      int64_t ds_size = 0, needed = 0;
      for (int g = big->first; g < big->last; ++g)
        ds_size += IoAligned(release_.writeback_sized_by_partitions ? lay_.groups[g].part.v : lay_.groups[g].elements.v,
                             lay_.lp_bytes);
      for (const SubGroup& sg : lay_.sub_groups) {
        int64_t here = 0;
        for (int g = sg.first; g < sg.last; ++g)
          if (!lay_.groups[g].persistent && lay_.groups[g].home == Tier::kNvme) here += lay_.groups[g].part.v;
        needed = std::max(needed, here);
      }
      lay_.writeback = em_.NewBuffer("swap.param.writeback", Tier::kCpu, StateKind::kSwapBuffer,
                                     Elements(std::max(ds_size, needed)).bytes(lay_.lp_bytes), true);
    }
  }
  // offload_optimizer nvme: SwapBufferManager(num_elems = io-aligned largest
  // sub-group, count = buffer_count, fp32), pinned whatever pin_memory says.
  if (lay_.optim_tier == Tier::kNvme) {
    int64_t largest = 0;
    int swappable = 0;
    for (const SubGroup& sg : lay_.sub_groups) {
      largest = std::max(largest, sg.n.v);
      swappable += sg.swappable ? 1 : 0;
    }
    const auto& oo = z.offload_optimizer;
    lay_.optim_sets = std::min(1 + (oo.pipeline_read ? 1 : 0) + (oo.pipeline_write ? 1 : 0), swappable);
    const int needed = 4 * lay_.optim_sets;
    if (oo.buffer_count < needed)
      STRATA_RETURN_IF_ERROR(Fire("optimizer_buffer_count_too_small", OptimizerBufferMessage(needed)));
    lay_.optim_slot_elems = IoAligned(largest, 4);
    const int count = std::max({oo.buffer_count, needed, 1});
    for (int i = 0; i < count; ++i)
      lay_.optim_slots.push_back(em_.NewBuffer("swap.optim." + std::to_string(i), Tier::kCpu, StateKind::kSwapBuffer,
                                               Elements(lay_.optim_slot_elems).bytes(4), true));
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
  if (lay_.optim_tier != Tier::kGpu && release_.cpu_adam_tile_elements > 0) {
    const int64_t tile = release_.cpu_adam_tile_elements;
    const BufferId b =
        em_.NewBuffer("cpu_adam.double_buffer", Tier::kCpu, StateKind::kSwapBuffer, Bytes(2 * tile * 4), true);
    plan_.buffers[b].backed = false;
  }
  return Status::Ok();
}

std::string LayoutPass::OptimizerBufferMessage(int needed) const {
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
