// Pageable CPU memory as PyTorch's CPU allocator gives it (c10 alloc_cpu):
// no cache, posix_memalign and free, so a block of kFreshMappingBytes or
// more is a new mapping each time and its pages fault in on first touch, as
// the simulator charges them (scheduler FreshPageBytes). Shared by the host
// and CUDA backends' AllocatePageable.
#pragma once

#include <cstddef>

#include "strata/core/status.h"
#include "strata/executor/backend.h"

namespace strata::exec {

// `bytes` of page-aligned pageable memory (rounded up to whole pages for
// O_DIRECT I/O), zeroed when `zeroed`; freed with free() when the Memory
// goes. On ENOMEM, calls `on_enomem(ctx)` (when given: a backend gives its
// cached blocks back) and tries once more. An empty Memory for 0 bytes. A
// failure is Internal, its message "WHO: posix_memalign of N bytes of
// pageable memory: " and errno's text (`who`: the backend, "host backend").
Result<Memory> AllocatePageableMemory(size_t bytes, bool zeroed, const char* who, void (*on_enomem)(void*) = nullptr,
                                      void* ctx = nullptr);

}  // namespace strata::exec
