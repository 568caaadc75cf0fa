#include "host/pageable.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace strata::exec {

Result<Memory> AllocatePageableMemory(size_t bytes, bool zeroed, const char* who, void (*on_enomem)(void*), void* ctx) {
  if (bytes == 0) return Memory();
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* p = nullptr;
  int e = posix_memalign(&p, 4096, rounded);
  if (e == ENOMEM && on_enomem != nullptr) {
    on_enomem(ctx);
    e = posix_memalign(&p, 4096, rounded);
  }
  if (e != 0)
    return Status::Internal(std::string(who) + ": posix_memalign of " + std::to_string(bytes) +
                            " bytes of pageable memory: " + std::strerror(e));
  if (zeroed) std::memset(p, 0, bytes);
  return Memory(
      static_cast<std::byte*>(p), bytes, Tier::kCpu, [](void*, std::byte* q, size_t) { std::free(q); }, nullptr);
}

}  // namespace strata::exec
