// Fused CPU Adam/AdamW over a tile of parameters: updates fp32 master
// weights and both moments, and writes the bf16/fp16 copy for the GPU in the
// same pass. Vectorized with Highway, dispatched at run time to the best of
// AVX-512, AVX2, SSE4 (or scalar), and split over threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/core/tier.h"
#include "strata/executor/adam_math.h"

namespace strata::exec {

struct AdamTile {
  float* params;                               // fp32 master weights (updated)
  const float* grads;                          // fp32 gradients (scaled by the loss scale)
  float* exp_avg;                              // first moment (updated)
  float* exp_avg_sq;                           // second moment (updated)
  uint16_t* out16 = nullptr;                   // optional low-precision copy of the new weights
  Precision out_precision = Precision::kFp16;  // kFp16 or kBf16 when out16 is set
  size_t n = 0;
};

// One step over the tile on `threads` threads (1 = the calling thread).
void CpuAdamStep(const AdamTile& tile, const AdamStepConsts& c, int threads = 1);

// The plain scalar reference the kernel is tested against.
void ReferenceAdamStep(const AdamTile& tile, const AdamStepConsts& c);

// The SIMD target Highway dispatches to on this machine ("AVX3", "AVX2", ...).
const char* CpuAdamTarget();

// Software prefetch 4 KiB ahead in the kernel's four input streams. It
// depends on the CPU: on one machine (CPU model not recorded) it lifted
// the kernel from 0.89-0.93 to 0.97-1.02 of the memory roofline; on an AMD
// EPYC (AVX2) the kernel with the fp16 copy-out moved 550M parameters/s
// with it and 660M without (1 thread; 930M against 1.13G with 2), and the
// roofline kernel too was faster without. kAuto (the default) tunes itself: the
// first six steps of at least 4M parameters alternate with and without,
// and every later step keeps the faster (smaller steps prefetch until
// then). The results are the same bits either way.
enum class AdamPrefetch { kAuto, kOn, kOff };
void SetCpuAdamPrefetch(AdamPrefetch p);
// Whether the next step prefetches (under kAuto, before it is tuned: yes).
bool CpuAdamPrefetching();

}  // namespace strata::exec
