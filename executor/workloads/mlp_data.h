// The MLP workload's shape, initial weights and synthetic samples (private):
// shared by the host workload (mlp_workload.cc) and the device model
// (devmodel/device_mlp.cc), so that both train the same model on the same
// data from the same seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "strata/plan/plan.h"

namespace strata::exec {

class MlpData {
 public:
  // `rank`: the data-parallel rank (its samples); `tensor_rank`: its index
  // in the tensor-parallel group (its shard of each split layer).
  MlpData(const Plan& p, uint64_t seed, int rank, int tensor_rank);

  // How tensor parallelism splits layer m (core/model.cc, BuildMlp, as
  // Megatron's MLP block): column-parallel (outputs split), row-parallel
  // (inputs split; the bias is added after the all-reduce), or whole.
  enum class Split { kWhole, kColumn, kRow };
  Split SplitOf(int m) const {
    if (tp_ == 1) return Split::kWhole;
    if (m % 2 == 1) return Split::kRow;
    return m + 1 < Layers() ? Split::kColumn : Split::kWhole;
  }
  size_t FullIn(int m) const { return static_cast<size_t>(sizes_[static_cast<size_t>(m)]); }
  size_t FullOut(int m) const { return static_cast<size_t>(sizes_[static_cast<size_t>(m) + 1]); }
  // This rank's widths of layer m.
  size_t In(int m) const { return FullIn(m) / (SplitOf(m) == Split::kRow ? tp_ : 1); }
  size_t Out(int m) const { return FullOut(m) / (SplitOf(m) == Split::kColumn ? tp_ : 1); }
  int Layers() const { return static_cast<int>(sizes_.size()) - 1; }
  size_t batch() const { return batch_; }
  int micro_steps() const { return micro_steps_; }

  // Groups 2m and 2m + 1 are layer m's weight (uniform in +-1/sqrt(in),
  // [out x in]) and bias (zero): this rank's shard of the whole layer's.
  std::vector<float> InitGroup(int g) const;
  // The samples of (step, micro step) for this data-parallel rank: inputs
  // [batch x in] from the seed; labels from a fixed random teacher, so the
  // task is learnable.
  void Draw(int step, int micro, std::vector<float>* x, std::vector<int32_t>* labels) const;

 private:
  std::vector<int64_t> sizes_;
  size_t batch_;
  int micro_steps_;
  uint64_t seed_;
  int rank_;
  size_t tp_, tp_rank_;
  std::vector<float> teacher_;  // [classes x inputs], fixed
};

}  // namespace strata::exec
