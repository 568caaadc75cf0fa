// The model's math on a GPU-like device (issue #17): the plan's Model
// (backend.h) computed by ModelKernels, so that the CUDA backend and the
// host's emulation of it share one implementation of the model's logic
// (activations, the order of the kernels, pipeline boundaries, tensor
// parallelism). Numerics are a GPU's mixed precision, not the host
// workloads' (which keep activations in fp32): the same bits for the same
// plan on the same device whatever the placement of the states, not the
// host backend's bits (docs/executor.md, "The CUDA backend").
#pragma once

#include <memory>

#include "devmodel/model_kernels.h"
#include "strata/executor/backend.h"

namespace strata::exec {

// The plan's workload (RunSpec::model): the MLP (mlp_data.h, device_mlp.cc) or the GPT
// (gpt_data.h, device_gpt.cc).
Result<std::unique_ptr<Model>> NewDeviceModel(const Plan& p, const ModelOptions& o, std::unique_ptr<ModelKernels> k);
Result<std::unique_ptr<Model>> NewDeviceGpt(const Plan& p, const ModelOptions& o, std::unique_ptr<ModelKernels> k);

// For tests and `--backend emulated`: the host backend `base` with the
// device model on emulated kernels (NewEmulatedKernels) as its model.
std::unique_ptr<Backend> NewEmulatedDeviceBackend(Backend* base);

}  // namespace strata::exec
