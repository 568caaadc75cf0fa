// The compute model (issue #15): what one compute pass of a module does on
// a GPU, as kernels, and what those kernels cost on a GpuSpec; what CPU Adam
// costs on a CpuSpec. Plain data and pure functions, shared by the
// simulator's replay and the scheduler's resource bound, so the two charge
// the same seconds. See docs/simulator.md "Compute model".
#pragma once

#include <cstdint>
#include <vector>

#include "strata/core/scenario.h"

namespace strata {

// One matrix multiply C[m x n] = A[m x k] B[k x n], `batch` times (a
// batched GEMM: attention's per-head products). FLOPs 2 m n k per product.
struct Gemm {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
  }
  // Bytes it reads and writes at least once (A, B and C), elements of
  // `elem_bytes`.
  double bytes(int elem_bytes) const {
    return static_cast<double>(elem_bytes) * static_cast<double>(batch) *
           (static_cast<double>(m) * static_cast<double>(k) + static_cast<double>(k) * static_cast<double>(n) +
            static_cast<double>(m) * static_cast<double>(n));
  }
  bool operator==(const Gemm&) const = default;
};

// The kernels of one pass (a module's forward, or its backward): GEMMs by
// shape, and the memory-bound kernels (norms, activations, softmax,
// dropout, residual adds, the embedding, the loss) by the HBM bytes they
// read and write. `launches` counts every kernel (a fused attention kernel
// is one launch holding several GEMMs' work).
struct KernelWork {
  std::vector<Gemm> gemms;
  double mem_bytes = 0;
  int launches = 0;
  int elem_bytes = 2;  // GEMM operands' element size (training precision)
  double gemm_flops() const {
    double f = 0;
    for (const Gemm& g : gemms) f += g.flops();
    return f;
  }
  bool empty() const { return gemms.empty() && mem_bytes == 0 && launches == 0; }
  bool operator==(const KernelWork&) const = default;
};

// The fraction of the GPU's GEMM rate a shape keeps under tile and wave
// quantisation: its m x n x batch outputs over the tiles the SMs compute
// in whole waves, m n batch / (waves x sms x tile_m x tile_n), with
// tiles = ceil(m / tile_m) ceil(n / tile_n) batch and waves = ceil(tiles /
// sms). 1 when the GPU has no SM count (sms 0).
double GemmShapeEfficiency(const Gemm& g, const GpuSpec& gpu);
// Seconds of one GEMM: the larger of its FLOPs at peak x efficiency x shape
// efficiency and its bytes at HBM bandwidth (a roofline).
double GemmSeconds(const Gemm& g, int elem_bytes, const GpuSpec& gpu);
// Seconds of a pass under the roofline model: its GEMMs, its memory-bound
// bytes at HBM bandwidth, and launch_latency per kernel.
double KernelSeconds(const KernelWork& w, const GpuSpec& gpu);
// Seconds of a compute op of `flops` whose kernels are `w`: KernelSeconds
// under the roofline model, flops / (peak x efficiency) under the flat
// one (or when the op has no kernel description).
double ComputeSeconds(double flops, const KernelWork* w, const GpuSpec& gpu);

// DeepSpeed's CPU Adam on `elements` parameters touching `bytes` of memory,
// alone on the node: the larger of the vector math on every core
// (elements / (cores x adam_core_rate)) and the memory traffic (bytes /
// memory_bandwidth). The simulator shares the node's CPU between
// concurrent steps by expressing this as memory-bandwidth work
// (CpuAdamWorkBytes).
double CpuAdamSeconds(double elements, double bytes, const CpuSpec& cpu);
// The bytes of memory traffic that take as long as CpuAdamSeconds at
// memory_bandwidth: max(bytes, elements / (cores x rate) x bandwidth).
double CpuAdamWorkBytes(double elements, double bytes, const CpuSpec& cpu);

}  // namespace strata
