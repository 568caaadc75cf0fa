#include "strata/executor/copy_engine.h"

#include <algorithm>
#include <cstring>

#include "host/worker_pool.h"

namespace strata::exec {

void CopyBytes(void* dst, const void* src, size_t n, int threads) {
  constexpr size_t kMinChunk = size_t{4} << 20;
  threads = std::max(threads, 1);
  const size_t parts = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(threads), n / kMinChunk));
  if (n == 0) return;  // memcpy's pointers must be valid even for 0 bytes (UBSan: a null one was passed)
  if (parts == 1) {
    std::memcpy(dst, src, n);
    return;
  }
  const size_t chunk = (n / parts + 4095) / 4096 * 4096;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Parts past the first on workers the calling thread keeps (CallingThreadPool).
  CallingThreadPool(threads).Run(static_cast<int>(parts), [d, s, n, chunk](int k) {
    const size_t a = std::min(n, static_cast<size_t>(k) * chunk), b = std::min(n, (static_cast<size_t>(k) + 1) * chunk);
    if (a < b) std::memcpy(d + a, s + a, b - a);
  });
}

}  // namespace strata::exec
