#include "strata/executor/copy_engine.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace strata::exec {

void CopyBytes(void* dst, const void* src, size_t n, int threads) {
  constexpr size_t kMinChunk = size_t{4} << 20;
  const size_t parts = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), n / kMinChunk));
  if (n == 0) return;  // memcpy's pointers must be valid even for 0 bytes (UBSan: a null one was passed)
  if (parts == 1) {
    std::memcpy(dst, src, n);
    return;
  }
  const size_t chunk = (n / parts + 4095) / 4096 * 4096;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  std::vector<std::thread> pool;
  for (size_t k = 1; k < parts; ++k) {
    const size_t a = std::min(n, k * chunk), b = std::min(n, (k + 1) * chunk);
    if (a < b) pool.emplace_back([=] { std::memcpy(d + a, s + a, b - a); });
  }
  std::memcpy(d, s, std::min(n, chunk));
  for (auto& t : pool) t.join();
}

}  // namespace strata::exec
