// The model as the planner sees it: parameter groups, one per parameter
// tensor (what ZeRO partitions and fetches: DeepSpeed works per tensor, so a
// Linear's weight and bias are two groups), and modules in forward order
// (what computes; a module uses its groups in order, as
// module.parameters(recurse=False) lists them). Shapes and FLOP
// counts are derived from the scenario's model spec here, once.
//
// FLOPs follow Narayanan et al. (SC'21): a Linear of m x n applied to T tokens
// costs 2*T*m*n forward and twice that backward; causal attention's scores and
// weighted sum cost 4*T*s*h forward. So one transformer layer forwards
// 24*B*s*h^2*(1 + s/(6h)) and the LM head 2*B*s*h*V; "model FLOPs" per
// iteration are 3x the forward (recomputation is not counted).
//
// Activation bytes follow Korthikanti et al. (2022): s*b*h*(34 + 5*a*s/h)
// bytes per layer in 16-bit precision, split among the layer's modules
// (without the 5*a*s/h scores term under flash_attention).
//
// Kernels (ModuleSpec::fwd/bwd) follow Megatron-LM's GPT layer: each Linear
// one GEMM forward (bias fused in its epilogue) and two backward (the input
// gradient dx = dy W^T and the weight gradient dW = x^T dy, plus a bias
// gradient reduction over dy); fused bias-GeLU, fused bias-dropout-add,
// fused scale-mask-softmax; unfused attention as two batched GEMMs per
// head; memory-bound kernels by the bytes each reads and writes once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/gpu_cost.h"
#include "strata/core/scenario.h"
#include "strata/core/status.h"
#include "strata/core/units.h"

namespace strata {

struct ParamGroupSpec {
  std::string name;     // "layer3.fc1.weight", "embed.wte"
  Elements elements;    // unpartitioned element count
  bool vector = false;  // a 1-D tensor (a bias, a norm's weight), not a matrix
  // Its first dimension as PyTorch lays the tensor out: a Linear's weight
  // is [out, in] (out rows), a table [rows, hidden], a vector its length.
  // What FSDP2 shards, padded to ceil(rows / ranks) rows a rank
  // (docs/fsdp2-source.md, section 2). elements is a multiple of it.
  int64_t rows = 0;
};

// A tensor-parallel collective of a module's pass (Megatron-LM's f and g
// operators, mappings.py), over the rank's tensor-parallel group: `bytes`
// is the whole tensor (the gathered size for an allgather, the input for a
// reduce-scatter, the buffer for an allreduce); `before`: it precedes the
// pass (an input gathered), else follows it (an output reduced).
enum class TpCommKind { kAllReduce, kAllGather, kReduceScatter };
struct TpComm {
  TpCommKind kind = TpCommKind::kAllReduce;
  Bytes bytes;
  bool before = false;
  bool operator==(const TpComm&) const = default;
};

struct ModuleSpec {
  std::string name;
  int layer = -1;                 // checkpoint segment (transformer block / MLP layer); -1: not checkpointed
  std::vector<int> param_groups;  // indices into ModelGraph::param_groups, in order; empty if parameter-free
  double fwd_flops = 0;           // forward FLOPs of one micro batch on one rank
  Bytes act_bytes;                // activations kept for backward when not checkpointing
  // Its kernels on a GPU (gpu_cost.h): the forward (also a recomputation)
  // and the backward. Their GEMM FLOPs add up to fwd_flops and 2x fwd_flops
  // (FlashAttention's backward: 2.5x its forward, the scores recomputed).
  KernelWork fwd, bwd;
  // Tensor parallelism (parallelism.tensor > 1): the collectives of its
  // forward (also a recomputation) and of its backward.
  std::vector<TpComm> tp_fwd, tp_bwd;
  // Before its recomputation only (partitioned activation checkpoints: the
  // layer's first module gathers the checkpoint).
  std::vector<TpComm> tp_recompute;
};

struct ModelGraph {
  std::vector<ParamGroupSpec> param_groups;
  std::vector<ModuleSpec> modules;      // forward order
  Elements total_params;                // sum of param_groups (shared ones once): this rank's shard
  Elements model_params;                // the whole model's (equal without tensor parallelism)
  Elements largest_layer;               // most elements of one module: DeepSpeed's "largest_layer_params"
  Elements largest_tensor;              // most elements of one group
  double fwd_flops = 0;                 // forward FLOPs of one micro batch on one rank
  int num_layers = 0;                   // checkpoint segments
  std::vector<Bytes> checkpoint_bytes;  // per layer: its input, kept when checkpointing
  // Per layer: its input hidden state for one micro batch on one rank, whole
  // (under sequence parallelism this rank's sequence shard): what a
  // pipeline stage boundary sends forward, and its gradient backward.
  std::vector<Bytes> layer_input_bytes;
  int64_t tokens_per_micro_batch = 0;  // per rank

  // A pipeline stage's graph (PipelineStageGraph); the whole model has
  // neither input nor output and no tied groups.
  Bytes stage_input_bytes;   // received from the previous stage per micro batch (0 on the first)
  Bytes stage_output_bytes;  // sent to the next stage per micro batch (0 on the last)
  // Groups another stage holds too (a tied token table: the embedding on
  // the first stage, the LM head on the last): the two stages sum their
  // gradients before the step (Megatron's embedding group, DeepSpeed's
  // TiedLayerSpec).
  std::vector<int> tied_groups;
};

// Every size and count is computed with overflow checks (units.h SizeMath):
// one that does not fit in 64 bits is InvalidArgument naming it, never a
// wrap. CheckScenario's bounds keep valid scenarios far from that; the
// check guards callers that skip it.
// With tensor parallelism the graph is one rank's shard, as Megatron-LM
// splits the layer (ColumnParallelLinear for QKV and fc1, RowParallelLinear
// for the projections, VocabParallelEmbedding and a vocabulary-split head,
// the vocabulary padded to a multiple of 128 x tensor, norms and the
// projections' biases replicated), with its collectives (ModuleSpec::tp_fwd,
// tp_bwd); sequence parallelism splits the replicated activations too and
// turns each allreduce into an allgather and a reduce-scatter (Korthikanti
// et al. 2022).
Result<ModelGraph> BuildModelGraph(const ModelSpec& model, const TrainingSpec& training,
                                   const ParallelismSpec& parallelism = {});

// DeepSpeed's partition_uniform (runtime/utils.py), the layer split of
// PipelineModule(partition_method="uniform") and of Megatron-LM's even
// split: stage s holds layers [parts[s], parts[s + 1]); with `layers` not a
// multiple of `stages`, the first layers % stages stages hold one more.
// REQUIRES: 1 <= stages <= layers.
std::vector<int> PipelineParts(int layers, int stages);

// Stage `stage` of `stages` of the whole graph `g`: its layers (numbered
// from 0 again; module names keep the whole model's), the modules before the
// first layer (the embedding) on the first stage and those after the last
// (final norm, LM head and loss) on the last, as Megatron-LM's
// pre_process/post_process and DeepSpeed's PipelineModule place them. A
// group used by modules of two stages (a tied token table) is in both,
// listed in tied_groups. model_params stays the whole model's.
// REQUIRES: g is a whole graph (BuildModelGraph), 0 <= stage < stages <= g.num_layers.
ModelGraph PipelineStageGraph(const ModelGraph& g, int stage, int stages);

// The model's parameter count (its graph's total_params).
Result<Elements> CountParameters(const ModelSpec& model);

}  // namespace strata
