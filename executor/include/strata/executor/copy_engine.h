// The host backend's copy engine: H2D and D2H copies between host buffers,
// split over `threads` threads for large copies (one thread saturates
// neither memory channels nor, on a real system, PCIe through pinned
// memory).
#pragma once

#include <cstddef>

namespace strata::exec {

// Copies n bytes; chunks of at least 4 MiB go to separate threads.
void CopyBytes(void* dst, const void* src, size_t n, int threads);

}  // namespace strata::exec
