// The layout pass (private to the planner): its steps, each adding its
// buffers to the plan through the emitter and its fields to the layout, in
// DeepSpeed's order. planner_layout.cc holds the run, partitions, resident
// parameters, gradients and positions; planner_layout_states.cc the
// sub-groups, parameter homes, optimizer states and swap pools.
#pragma once

#include <string>

#include "layout.h"
#include "strata/core/parallel.h"

namespace strata::detail {

class LayoutPass {
 public:
  LayoutPass(const Scenario& s, const ReleaseProfile& release, const ModelGraph& g, const PlannerOptions& o,
             Emitter& em)
      : scenario_(s), release_(release), graph_(g), opt_(o), em_(em), plan_(em.plan()) {}
  Result<Layout> Run() {
    STRATA_RETURN_IF_ERROR(Build());
    return std::move(lay_);
  }

 private:
  Status Build();
  void DescribeRun(const ParallelLayout& layout);
  void DescribeZeroPlusPlus();
  Elements LayoutPartitions(Tier param_home);
  void LayoutSubGroups();
  void LayoutResidentParams(Tier param_home, Elements persistent_total);
  void LayoutGradients();
  void LayoutFlatGradients();
  void LayoutParamOut();
  void DescribeModel();
  void LayoutPositions();
  void LayoutParamHomes(Tier param_home);
  void LayoutOptimizerStates();
  // How many sub-groups, from the first, step on the GPU under
  // offload_optimizer.ratio (0 without it).
  int PartialOffloadGpuSubGroups() const;
  Status LayoutSwapBuffers();
  std::string OptimizerBufferMessage(int needed) const;
  Status Fire(const char* id, std::string message) { return detail::Fire(opt_, id, std::move(message)); }
  // DeepSpeed's I/O alignment in elements of `bytes_per_element`
  // (AIO_ALIGNED_BYTES x intra_op_parallelism, _io_aligned_numel).
  int64_t IoAligned(int64_t elements, int bytes_per_element) const;
  // Whether zero.Init puts group gi's partition (unpadded, ceil(numel / N))
  // on NVMe with offload_param nvme: at least min_aio_bytes_.
  bool ZeroInitSwaps(int gi) const {
    return CeilDiv(lay_.groups[gi].elements.v, lay_.dp_size) * lay_.lp_bytes >= min_aio_bytes_;
  }

  const Scenario& scenario_;
  const ReleaseProfile& release_;
  const ModelGraph& graph_;
  const PlannerOptions& opt_;
  Emitter& em_;
  Plan& plan_;
  Layout lay_;
  // With anything on NVMe (stage 3), every partition is padded to a whole
  // number of kNvmeAlign-byte blocks, and sub-group tiles start on one, so
  // that each NVMe transfer is block-aligned at both ends and O_DIRECT needs
  // no bounce buffer or read-modify-write (DeepSpeed's swappers pad the same
  // way). 1 otherwise.
  static constexpr int64_t kNvmeAlign = 4096;
  int64_t align_ = 1;  // elements
  // DeepSpeed's swap threshold: tensors of fewer bytes stay in CPU memory
  // (swap_tensor/utils.py MIN_AIO_BYTES, at least aio.block_size).
  int64_t min_aio_bytes_ = 1 << 20;
};

}  // namespace strata::detail
