// What one plan op costs on the hardware's compute units alone (no
// sharing): the single definition the simulator's replay and the resource
// bound both charge (core/gpu_cost.h has the models).
#pragma once

#include "strata/core/scenario.h"
#include "strata/plan/plan.h"

namespace strata {

// Seconds of a GPU op (forward, backward or recomputation, or an optimizer
// step on the compute stream): a compute op is its module's kernels
// (PlanModule::fwd for kind forward, bwd for backward) under the GPU's
// compute model, or its FLOPs at peak x efficiency (flat model, or an op of
// no module), plus its copy_bytes (OpCopySeconds); a GPU optimizer step
// its bytes at HBM bandwidth plus one launch. 0 for other kinds.
double OpGpuSeconds(const Plan& plan, const Op& op, const GpuSpec& gpu);

// Seconds of an op's side kernels (Op::copy_bytes at the GPU's HBM
// bandwidth, as the other memory-bound work; 0 without a bandwidth). They
// run on the op's own stream, before or after its main work (a
// collective's transfer, a compute op's kernels): the op lasts that much
// longer either way.
double OpCopySeconds(const Op& op, const GpuSpec& gpu);

// Seconds of a copy's side kernels on data-parallel rank `rank`
// (Plan::DataRank): like op.bytes, copy_bytes is the mean rank's when the
// moves name ranks, so each rank runs them in proportion to its own bytes
// (OpBytesOnRank); otherwise OpCopySeconds.
double CopyKernelSecondsOnRank(const Op& op, int rank, const GpuSpec& gpu);

// Seconds a collective spends after its transfer: a reduce-scatter's or
// all-reduce's reduction of its bytes at gpu.reduction_bandwidth (0 when
// unset: NCCL's fused reduction), and its copy kernels (OpCopySeconds).
double CollectiveTailSeconds(const Op& op, const GpuSpec& gpu);

// The link one ring of `group` is limited by, per rank: inside a node
// NVLink (PCIe through the host without it); across nodes the node's NICs,
// shared by the node's rings of this kind (one per member position in a
// node: the group's stride, up to a node's GPUs), with the network latency.
LinkSpec GroupLink(const CommGroup& group, const HardwareSpec& hw);

// The link a point-to-point transfer from rank `from` to rank `to` is
// limited by: NVLink (PCIe without it) inside a node; across nodes the
// node's NICs, shared by the node's GPUs (a pipeline stage's ranks all
// send at once), with the network latency.
LinkSpec PeerLink(int from, int to, const HardwareSpec& hw);

// A CPU optimizer step's work in bytes of the node's memory bandwidth
// (core/gpu_cost.h CpuAdamWorkBytes): its bytes, or more when the cores'
// vector math binds.
double OpCpuWorkBytes(const Op& op, const CpuSpec& cpu);

// Seconds the host spends faulting in the fresh pages a copy writes on
// data-parallel rank `rank` (FreshPageBytes, one cpu.page_fault_time per 4
// KiB page), on the copy's own path before its staging and DMA: DeepSpeed's
// blocking CPU checkpoint touches each page of its new buffer before the
// copy (checkpointing.py, "pre-populate these pages"), CUDA's staging
// memcpy would otherwise fault them in during the copy.
double FirstTouchSeconds(const Plan& plan, const Op& op, int rank, const CpuSpec& cpu);

// Seconds one thread spends compressing an NVMe write's bytes, or
// decompressing a read's, on data-parallel rank `rank` (policy.compression:
// codec_profile.h's measured rates over the raw bytes); 0 on other ops and
// without a codec. On the op's own stream, beside its latency.
double CodecSeconds(const Plan& plan, const Op& op, int rank);

// Bytes of CPU memory traffic per byte a pageable copy stages through
// CUDA's pinned buffer: its memcpy reads and writes each byte (as CPU Adam's
// bytes count reads and writes). The simulator's staging pass and the
// bound charge it at cpu.memory_bandwidth, one copy at most
// cpu.staging_bandwidth bytes copied per second.
inline constexpr double kStagingTrafficPerByte = 2;

}  // namespace strata
