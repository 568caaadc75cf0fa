#include "host/host_adam.h"

#include <cstdint>
#include <cstring>

#include "host/convert.h"
#include "strata/executor/cpu_adam.h"

namespace strata::exec {

void HostAdamStep(const AdamArgs& a, const AdamStepConsts& c, int threads, std::vector<float>& widened) {
  const float* grads = static_cast<const float*>(a.grad);
  if (!a.grad_fp32) {
    widened.resize(a.n);
    LowToFloat(a.grad, widened.data(), a.n, a.precision);
    grads = widened.data();
  }
  const bool low = a.precision != Precision::kFp32;
  CpuAdamStep(
      {a.master, grads, a.exp_avg, a.exp_avg_sq, low ? static_cast<uint16_t*>(a.out) : nullptr, a.precision, a.n}, c,
      threads);
  if (!low) std::memcpy(a.out, a.master, a.n * 4);
}

}  // namespace strata::exec
