// The model graph's private builders, shared by model.cc (the MLP, the
// entry points) and transformer.cc: parameter groups and modules with
// checked sizes, and one module's kernels.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "strata/core/model.h"

namespace strata::model_detail {

class GraphBuilder {
 public:
  GraphBuilder(ModelGraph& g, SizeMath& math) : g_(g), m_(math) {}
  // Checked products and counts, named for the error (units.h).
  int64_t Mul(int64_t a, int64_t b, const std::string& what) { return m_.Mul(a, b, what); }
  int64_t Count(double x, const std::string& what) { return m_.Count(x, what); }

  // A tensor of `rows` rows (its first dimension, ParamGroupSpec::rows).
  int Group(std::string name, int64_t elements, int64_t rows, bool vector = false) {
    g_.param_groups.push_back({std::move(name), Elements(elements), vector, rows});
    return static_cast<int>(g_.param_groups.size()) - 1;
  }
  // A module with a weight of weight_rows rows (a matrix, or with
  // weight_vector a vector: a norm's) and, unless bias_elements is 0, a
  // second tensor (a bias, a vector; bias_vector false: a matrix of
  // bias_rows rows, as GPT-2's position table).
  std::vector<int> WeightBias(const std::string& module, int64_t weight_elements, int64_t weight_rows,
                              int64_t bias_elements, const char* weight = "weight", const char* bias = "bias",
                              bool weight_vector = false, bool bias_vector = true, int64_t bias_rows = 0) {
    std::vector<int> g = {Group(module + "." + weight, weight_elements, weight_rows, weight_vector)};
    if (bias_elements > 0)
      g.push_back(Group(module + "." + bias, bias_elements, bias_vector ? bias_elements : bias_rows, bias_vector));
    return g;
  }
  // act_bytes in double, counted with a check (it scales with s^2 and V).
  void Module(std::string name, int layer, std::vector<int> groups, double flops, double act_bytes, KernelWork fwd = {},
              KernelWork bwd = {}) {
    const int64_t act = Count(act_bytes, name + " activation bytes");
    g_.modules.push_back(
        {std::move(name), layer, std::move(groups), flops, Bytes(act), std::move(fwd), std::move(bwd)});
  }

 private:
  ModelGraph& g_;
  SizeMath& m_;
};

// Kernel builders for one module's passes (model.h: Megatron-LM's kernels).
class Kernels {
 public:
  explicit Kernels(int elem_bytes) { fwd.elem_bytes = bwd.elem_bytes = elem_bytes; }
  // A Linear on T rows, in -> out: forward y = x W (bias in the GEMM's
  // epilogue); backward dx = dy W^T, dW = x^T dy, and the bias gradient as
  // a reduction over dy.
  Kernels& Linear(int64_t T, int64_t in, int64_t out, bool bias, int64_t batch = 1) {
    fwd.gemms.push_back({T, out, in, batch});
    bwd.gemms.push_back({T, in, out, batch});
    bwd.gemms.push_back({in, out, T, batch});
    fwd.launches += 1;
    bwd.launches += 2;
    if (bias)
      Bwd(static_cast<double>(fwd.elem_bytes) * static_cast<double>(T) * static_cast<double>(out) *
          static_cast<double>(batch));
    return *this;
  }
  // One memory-bound kernel of each pass, by the bytes it reads and writes.
  Kernels& Fwd(double bytes) {
    fwd.mem_bytes += bytes;
    fwd.launches += 1;
    return *this;
  }
  Kernels& Bwd(double bytes) {
    bwd.mem_bytes += bytes;
    bwd.launches += 1;
    return *this;
  }
  KernelWork fwd, bwd;
};

// One rank's shard of a transformer into `g` (transformer.cc).
void BuildTransformer(const ModelSpec& m, const TrainingSpec& t, const ParallelismSpec& par, ModelGraph& g,
                      SizeMath& math);

}  // namespace strata::model_detail
