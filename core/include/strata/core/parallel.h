// Which ranks form which group under 3D parallelism, in Megatron-LM's rank
// order (megatron/core/parallel_state.py initialize_model_parallel, its
// default "tp-dp-pp"): tensor-parallel groups are the innermost, on
// consecutive ranks (one node's GPUs when tensor <= gpus_per_node); data
// parallel next, stride `tensor`; pipeline outermost, stride `tensor x
// data`. DeepSpeed's PipeModelDataParallelTopology names the same axes
// pipe, data and model.
#pragma once

#include <cstddef>
#include <vector>

namespace strata {

struct ParallelLayout {
  int world = 1;
  int tensor = 1;
  int pipeline = 1;

  // REQUIRES: tensor x pipeline divides world.
  int data() const { return world / (tensor * pipeline); }
  int TensorRank(int r) const { return r % tensor; }
  int DataRank(int r) const { return (r / tensor) % data(); }
  int PipelineRank(int r) const { return r / (tensor * data()); }
  // The ranks of r's group along each axis, ascending.
  std::vector<int> TensorGroup(int r) const { return Group(r, tensor, 1); }
  std::vector<int> DataGroup(int r) const { return Group(r, data(), tensor); }
  std::vector<int> PipelineGroup(int r) const { return Group(r, pipeline, tensor * data()); }

  // The group of `size` ranks `stride` apart that holds r.
  static std::vector<int> Group(int r, int size, int stride) {
    const int first = r - ((r / stride) % size) * stride;
    std::vector<int> g(static_cast<std::size_t>(size));
    for (int k = 0; k < size; ++k) g[static_cast<std::size_t>(k)] = first + k * stride;
    return g;
  }
};

}  // namespace strata
