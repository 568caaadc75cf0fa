// Compiled once per SIMD target by Highway (foreach_target re-includes this
// file); the inner loops are dispatched at run time. Every vector operation
// is a separate IEEE multiply and add, as in the scalar kernels (the build
// forbids FMA contraction), so each target gives the same bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "linear_low.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "convert.h"
#include "linear_low.h"
#include "worker_pool.h"
#include "strata/core/tier.h"

HWY_BEFORE_NAMESPACE();
namespace strata::exec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// part[k mod 16] += x[k] * t[k] for k in [0, n), n a multiple of 16 or the
// row's last chunk (its tail then starts again at lane 0, as in
// LinearForward, since every chunk before it is a multiple of 16 long).
void DotTileImpl(const float* HWY_RESTRICT x, const float* HWY_RESTRICT t, size_t n, float* HWY_RESTRICT part) {
  size_t k = 0;
#if !HWY_HAVE_SCALABLE
  const hn::CappedTag<float, 16> d;
  constexpr size_t N = hn::MaxLanes(d);
  if constexpr (N == 16) {
    auto a0 = hn::LoadU(d, part);
    for (; k + 16 <= n; k += 16) a0 = hn::Add(a0, hn::Mul(hn::LoadU(d, x + k), hn::LoadU(d, t + k)));
    hn::StoreU(a0, d, part);
  } else if constexpr (N == 8) {
    auto a0 = hn::LoadU(d, part), a1 = hn::LoadU(d, part + 8);
    for (; k + 16 <= n; k += 16) {
      a0 = hn::Add(a0, hn::Mul(hn::LoadU(d, x + k), hn::LoadU(d, t + k)));
      a1 = hn::Add(a1, hn::Mul(hn::LoadU(d, x + k + 8), hn::LoadU(d, t + k + 8)));
    }
    hn::StoreU(a0, d, part);
    hn::StoreU(a1, d, part + 8);
  } else if constexpr (N == 4) {
    auto a0 = hn::LoadU(d, part), a1 = hn::LoadU(d, part + 4), a2 = hn::LoadU(d, part + 8), a3 = hn::LoadU(d, part + 12);
    for (; k + 16 <= n; k += 16) {
      a0 = hn::Add(a0, hn::Mul(hn::LoadU(d, x + k), hn::LoadU(d, t + k)));
      a1 = hn::Add(a1, hn::Mul(hn::LoadU(d, x + k + 4), hn::LoadU(d, t + k + 4)));
      a2 = hn::Add(a2, hn::Mul(hn::LoadU(d, x + k + 8), hn::LoadU(d, t + k + 8)));
      a3 = hn::Add(a3, hn::Mul(hn::LoadU(d, x + k + 12), hn::LoadU(d, t + k + 12)));
    }
    hn::StoreU(a0, d, part);
    hn::StoreU(a1, d, part + 4);
    hn::StoreU(a2, d, part + 8);
    hn::StoreU(a3, d, part + 12);
  }
#endif
  for (; k + 16 <= n; k += 16)
    for (size_t j = 0; j < 16; ++j) part[j] += x[k + j] * t[k + j];
  for (size_t j = 0; k < n; ++k, ++j) part[j] += x[k] * t[k];
}

// y[k] += g * x[k].
void AxpyImpl(float g, const float* HWY_RESTRICT x, float* HWY_RESTRICT y, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vg = hn::Set(d, g);
  size_t k = 0;
  for (; k + N <= n; k += N) hn::StoreU(hn::Add(hn::LoadU(d, y + k), hn::Mul(vg, hn::LoadU(d, x + k))), d, y + k);
  for (; k < n; ++k) y[k] += g * x[k];
}

}  // namespace HWY_NAMESPACE
}  // namespace strata::exec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace strata::exec {
HWY_EXPORT(DotTileImpl);
HWY_EXPORT(AxpyImpl);

namespace {

constexpr size_t kLanes = 16;     // LinearForward's partial sums
constexpr size_t kTile = 2048;    // elements widened at a time: 8 KiB of fp32, a multiple of kLanes

const std::byte* At(const void* base, size_t i, size_t bytes_per) {
  return static_cast<const std::byte*>(base) + i * bytes_per;
}
std::byte* At(void* base, size_t i, size_t bytes_per) { return static_cast<std::byte*>(base) + i * bytes_per; }

}  // namespace

namespace {

// Parts for a kernel over `elements` weights: one per pool thread once each
// part has at least this many (a wake-up costs microseconds, a part of 256K
// weights about a hundred).
int Parts(const WorkerPool* pool, size_t elements, size_t units) {
  constexpr size_t kMinPerPart = size_t{1} << 18;
  constexpr size_t kMaxParts = 64;
  if (pool == nullptr) return 1;
  const size_t by_size = std::max<size_t>(1, elements / kMinPerPart);
  return static_cast<int>(std::min({static_cast<size_t>(pool->size()), by_size, std::max<size_t>(units, 1), kMaxParts}));
}

// Outputs [o0, o1) of the forward.
void ForwardRows(const float* x, const void* w, const float* bias, float* y, size_t batch, size_t in, size_t out,
                 size_t o0, size_t o1, Precision p) {
  const size_t eb = static_cast<size_t>(BytesPerElement(p));
  alignas(64) float tile[kTile];
  std::vector<float> part(batch * kLanes);
  for (size_t o = o0; o < o1; ++o) {
    std::fill(part.begin(), part.end(), 0.0f);
    for (size_t k0 = 0; k0 < in; k0 += kTile) {
      const size_t n = std::min(kTile, in - k0);
      LowToFloat(At(w, o * in + k0, eb), tile, n, p);
      for (size_t i = 0; i < batch; ++i) {
        const float* xr = x + i * in + k0;
        float* pr = part.data() + i * kLanes;
        HWY_DYNAMIC_DISPATCH(DotTileImpl)(xr, tile, n, pr);
      }
    }
    for (size_t i = 0; i < batch; ++i) {
      float* pr = part.data() + i * kLanes;
      for (size_t h = kLanes / 2; h > 0; h /= 2)
        for (size_t j = 0; j < h; ++j) pr[j] += pr[j + h];
      y[i * out + o] = bias[o] + pr[0];
    }
  }
}

// Input columns [k0, k1) of the backward: dW[:, k0:k1] and dx[:, k0:k1],
// every output row in order (so dx sums in the same order however the
// columns are split).
bool BackwardColumns(const float* x, const void* w, const float* dy, float* dx, void* grad_w, size_t batch, size_t in,
                     size_t out, size_t k0, size_t k1, Precision p, bool overwrite) {
  const size_t eb = static_cast<size_t>(BytesPerElement(p));
  alignas(64) float tile[kTile];
  alignas(64) float dw[kTile];
  bool overflow = false;
  if (dx != nullptr)
    for (size_t i = 0; i < batch; ++i) std::fill(dx + i * in + k0, dx + i * in + k1, 0.0f);
  for (size_t o = 0; o < out; ++o) {
    for (size_t c = k0; c < k1; c += kTile) {
      const size_t n = std::min(kTile, k1 - c);
      if (grad_w != nullptr) {
        // dW row chunk: over the batch in order, from zero.
        std::fill(dw, dw + n, 0.0f);
        for (size_t i = 0; i < batch; ++i) {
          const float g = dy[i * out + o];
          HWY_DYNAMIC_DISPATCH(AxpyImpl)(g, x + i * in + c, dw, n);
        }
        overflow |= AccumulateFloatsToLow(At(grad_w, o * in + c, eb), dw, n, p, overwrite);
      }
      if (dx != nullptr) {
        // dx over output rows in order: row o's share now.
        LowToFloat(At(w, o * in + c, eb), tile, n, p);
        for (size_t i = 0; i < batch; ++i) {
          const float g = dy[i * out + o];
          HWY_DYNAMIC_DISPATCH(AxpyImpl)(g, tile, dx + i * in + c, n);
        }
      }
    }
  }
  return overflow;
}

}  // namespace

void LinearForwardLow(const float* x, const void* w, const void* b, float* y, size_t batch, size_t in, size_t out,
                      Precision p, WorkerPool* pool) {
  std::vector<float> bias(out, 0.0f);
  if (b != nullptr) LowToFloat(b, bias.data(), out, p);
  const int parts = Parts(pool, in * out, out);
  auto rows = [&](int j) {
    ForwardRows(x, w, bias.data(), y, batch, in, out, out * j / parts, out * (j + 1) / parts, p);
  };
  if (parts == 1)
    rows(0);
  else
    pool->Run(parts, rows);
}

bool LinearBackwardLow(const float* x, const void* w, const float* dy, float* dx, void* grad_w, void* grad_b,
                       size_t batch, size_t in, size_t out, Precision p, bool overwrite, WorkerPool* pool) {
  // Column ranges start on multiples of 16 (any split gives the same bits;
  // this one keeps vector loops whole).
  const size_t blocks = (in + kLanes - 1) / kLanes;
  const int parts = Parts(pool, in * out, blocks);
  bool flags[64] = {};  // per part (Parts gives at most 64)
  auto columns = [&](int j) {
    const size_t k0 = std::min(in, blocks * j / parts * kLanes), k1 = std::min(in, blocks * (j + 1) / parts * kLanes);
    flags[j] = BackwardColumns(x, w, dy, dx, grad_w, batch, in, out, k0, k1, p, overwrite);
  };
  if (parts == 1)
    columns(0);
  else
    pool->Run(parts, columns);
  bool overflow = false;
  for (int j = 0; j < parts; ++j) overflow |= flags[j];
  if (grad_b != nullptr) {
    std::vector<float> db(out, 0.0f);
    for (size_t o = 0; o < out; ++o)
      for (size_t i = 0; i < batch; ++i) db[o] += dy[i * out + o];
    overflow |= AccumulateFloatsToLow(grad_b, db.data(), out, p, overwrite);
  }
  return overflow;
}

}  // namespace strata::exec
#endif  // HWY_ONCE
