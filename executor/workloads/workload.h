// The training workloads `strata run` computes (private): the model's math
// on fp32 copies of the parameters, module by module, as the plan's compute
// ops call for it. Activations live in the workload between forward and
// backward of a micro step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/status.h"
#include "strata/executor/backend.h"
#include "strata/plan/plan.h"

namespace strata::exec {

class Workload {
 public:
  virtual ~Workload() = default;
  // Initial fp32 values of parameter group (tensor) `g` (its elements, unpadded):
  // from the seed alone, the same whatever the placement.
  virtual std::vector<float> InitGroup(int g) const = 0;
  virtual void StartStep(int step) = 0;
  // w: the module's parameter groups in fp32, end to end (null if it has
  // none). With activation checkpointing the plan calls a layer's modules'
  // Forward again in the backward (its recompute ops), in forward order,
  // before their Backward: a workload may drop a layer's working
  // activations after its forward and rebuild them then, bit for bit.
  virtual void Forward(int micro, int module, const float* w) = 0;
  // dw: the groups' gradients, end to end (zeroed, accumulated into);
  // returns the micro batch's loss when the module computes it, else 0.
  // Gradients are scaled by `loss_scale`.
  virtual double Backward(int micro, int module, const float* w, float* dw, float loss_scale) = 0;

  // Pipeline stages (Plan::pipeline > 1): the tensor crossing the boundary
  // after layer `layer` in micro step `micro` (Op::layer of a send or
  // receive without moves): the layer's output (grad false) or the loss's
  // gradient with respect to it (grad true), fp32. TakeBoundary gives what
  // this stage computed (the send side; the gradient's send ends the micro
  // step here: its activations are dropped); PutBoundary stores what the
  // neighbouring stage sent, before the first module that reads it.
  virtual Result<std::vector<float>> TakeBoundary(int micro, int layer, bool grad) = 0;
  virtual Status PutBoundary(int micro, int layer, bool grad, std::vector<float> v) = 0;

  // Tensor parallelism: the plan's all-reduce of module `module`'s output
  // (Operand::kOutput, after its forward: a row-parallel layer's partial
  // sums, a vocabulary-parallel embedding's, the loss's statistics) or of
  // its input gradient (kInputGrad, after its backward: a column-parallel
  // layer's). The workload reduces its tensors with `reduce` (fp32, in
  // place), then finishes the module (a row-parallel layer's bias and what
  // follows it).
  virtual Status TensorAllReduce(int micro, int module, Operand what, const TensorReduce& reduce) = 0;

  // Optional, for precision p other than fp32: the same computations on the
  // module's low-precision weights (one pointer per group), with each
  // gradient added into the low-precision grad[k] (as AccumulateFloatsToLow
  // adds the fp32 one), bit for bit what Forward/Backward plus the
  // conversions give. Return false when not offered (the caller converts);
  // BackwardLow sets *overflow if a gradient element written is not finite.
  // With fresh[k] the gradient grad[k] is not read but written, all of it,
  // with what adding into zeros gives (ModuleArgs::grad_fresh).
  virtual bool ForwardLow(int /*micro*/, int /*module*/, const std::vector<const void*>& /*w*/, Precision /*p*/) {
    return false;
  }
  virtual bool BackwardLow(int /*micro*/, int /*module*/, const std::vector<const void*>& /*w*/,
                           const std::vector<void*>& /*grad*/, const std::vector<char>& /*fresh*/, Precision /*p*/,
                           float /*loss_scale*/, double* /*loss*/, bool* /*overflow*/) {
    return false;
  }
};

// Tensor-parallel shards of a row-major matrix drawn whole, `cols` columns
// a row: rows [first, first + count) (a column-parallel layer's outputs),
// or of every row the columns [first, first + count) (a row-parallel
// layer's inputs). Both workloads slice their tensors so.
inline std::vector<float> ShardRows(const std::vector<float>& w, size_t cols, size_t count, size_t first) {
  return std::vector<float>(w.begin() + static_cast<std::ptrdiff_t>(first * cols),
                            w.begin() + static_cast<std::ptrdiff_t>((first + count) * cols));
}
inline std::vector<float> ShardColumns(const std::vector<float>& w, size_t cols, size_t count, size_t first) {
  const size_t rows = w.size() / cols;
  std::vector<float> mine(rows * count);
  for (size_t r = 0; r < rows; ++r)
    std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(r * cols + first), count,
                mine.begin() + static_cast<std::ptrdiff_t>(r * count));
  return mine;
}

// `rank` is the data-parallel rank: it picks the samples, the same on
// every pipeline stage of one data-parallel rank.
// MLP of model.sizes on synthetic data (a seeded teacher gives the labels);
// its Linear layers on low-precision weights split among `threads` (the
// same bits for any count).
// With parallelism.tensor > 1, this rank's shard of each layer as the
// model graph splits it (core/model.cc, BuildMlp), `tensor_rank` its index
// in its tensor-parallel group.
std::unique_ptr<Workload> MakeMlpWorkload(const Plan& p, uint64_t seed, int rank, int threads = 1, int tensor_rank = 0);
// GPT decoder on byte-level tokens of a text file; its Linear layers on the
// MLP's kernels (fp32 weights), split among `threads` (the same bits).
Result<std::unique_ptr<Workload>> MakeGptWorkload(const Plan& p, uint64_t seed, int rank, const std::string& text_path,
                                                  int threads = 1, int tensor_rank = 0);

}  // namespace strata::exec
