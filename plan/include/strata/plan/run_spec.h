// What executing a plan needs beyond its ops and buffers: the model the
// plan trains, its arithmetic, and where NVMe-backed buffers live. The
// planner copies it from the scenario (the model, training, parallelism,
// aio, policy.compression and hardware.nvme sections), so an executor runs
// a Plan alone; the simulator reads only aio.block_size (write buffering's
// staged requests, write_requests.h) and the codec (its CPU rates).
#pragma once

#include <string>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/core/tier.h"

namespace strata {

struct RunSpec {
  // The model section: the executor builds its workload from it (an MLP of
  // model.sizes, or GPT-2's architecture).
  ModelSpec model;
  Precision precision = Precision::kFp16;  // of parameters and gradients
  int micro_batch_size = 1;
  bool activation_checkpointing = false;
  bool split_transformers = false;     // training.split_transformers
  bool partition_activations = false;  // activation_checkpointing.partition_activations
  bool sequence_parallel = false;      // parallelism.sequence_parallel
  // How NVMe swaps submit I/O (DeepSpeed's aio section).
  AioConfig aio;
  // NVMe reads and writes in flight together share each drive
  // (hardware.nvme.readwrite_bandwidth > 0): a run's report counts the
  // device as one resource busy while either direction is.
  bool nvme_shared = false;
  // Swap directories: offload_param.nvme_path for the parameters' NVMe
  // buffers, offload_optimizer.nvme_path for the optimizer's (one entry
  // when they are the same). Buffer::nvme_dir indexes it; an entry may be
  // "" (the scenario gave none), and a run must then be given a directory.
  std::vector<std::string> nvme_dirs;
  // Compression of NVMe traffic (policy.compression; Op::stored gives each
  // op's planned ratio).
  CompressionConfig compression;
  // Striping (policy.stripe_paths): every NVMe buffer's swap file is split
  // over all of nvme_dirs (one per drive) in aio.block_size units, its
  // first unit in Buffer::nvme_dir (write_requests.h ForEachStripe).
  bool striped = false;
  // Delayed parameter update (policy.delayed_update; docs/dpu.md): -1 off.
  // Otherwise the plan is the steady-state delayed iteration: its
  // optimizer step (the ops of phase step) reads the previous iteration's
  // gradients from its grad_in buffer while this iteration's backward
  // writes buffer delayed_grads (the same size and tier), and an executor
  // swaps the two buffers' memory after each step's other ops. Steps below
  // delayed_warmup run as ordinary steps (the other ops, the swap, then
  // the step's ops), the step at it without the step's ops (gradients
  // only), later steps as planned.
  int delayed_warmup = -1;
  int delayed_grads = -1;  // a BufferId

  bool operator==(const RunSpec&) const = default;
};

}  // namespace strata
