// Adam/AdamW per element, and fp32 -> fp16/bf16 rounding, shared by the CPU
// kernels and (later) CUDA: C++17, no library calls beyond sqrtf, every
// function STRATA_HD. The vectorized kernels perform exactly these
// operations in this order (compiled with -ffp-contract=off), so they match
// this scalar code bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__
#else
#define STRATA_HD
#endif

namespace strata::exec {

struct AdamConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool adamw = true;  // decoupled weight decay (AdamW) rather than L2 in the gradient
};

// Constants of one step, computed once on the host.
struct AdamStepConsts {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float step_size;       // lr / (1 - beta1^t)
  float inv_bias2_sqrt;  // 1 / sqrt(1 - beta2^t)
  float decay;           // AdamW: lr * weight_decay, else 0
  float l2;              // Adam: weight_decay, else 0
  float grad_scale;      // 1 / loss scale
};

inline AdamStepConsts MakeAdamStep(const AdamConfig& c, int64_t step, float grad_scale = 1.0f) {
  const double t = static_cast<double>(step);
  AdamStepConsts k;
  k.beta1 = c.beta1;
  k.one_minus_beta1 = 1.0f - c.beta1;
  k.beta2 = c.beta2;
  k.one_minus_beta2 = 1.0f - c.beta2;
  k.eps = c.eps;
  k.step_size = static_cast<float>(c.lr / (1.0 - std::pow(static_cast<double>(c.beta1), t)));
  k.inv_bias2_sqrt = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(c.beta2), t)));
  k.decay = c.adamw ? c.lr * c.weight_decay : 0.0f;
  k.l2 = c.adamw ? 0.0f : c.weight_decay;
  k.grad_scale = grad_scale;
  return k;
}

STRATA_HD inline void AdamElement(float& p, float g, float& m, float& v, const AdamStepConsts& c) {
  g = g * c.grad_scale;
  g = g + c.l2 * p;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * (g * g);
  const float denom = sqrtf(v) * c.inv_bias2_sqrt + c.eps;
  p = p - c.decay * p;
  p = p - c.step_size * (m / denom);
}

STRATA_HD inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
STRATA_HD inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even; NaN stays a (quiet) NaN.
STRATA_HD inline uint16_t FloatToBf16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
STRATA_HD inline float Bf16ToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

// IEEE binary16, round to nearest even, with subnormals; overflow gives inf.
STRATA_HD inline uint16_t FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {               // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14 + (112 - exp) + 1 - 1
    const uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    uint32_t r = half_mant;
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  // Normal: rebias the exponent, round the mantissa's low 13 bits.
  uint32_t r = abs - 0x38000000u;
  r = r + 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

STRATA_HD inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return BitsFloat(sign);
    return BitsFloat(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace strata::exec
