// Transparent huge pages for large arrays that are filled once (the
// simulator's op spans and timeline ops: tens to thousands of MB).
#pragma once

#include <cstddef>

namespace strata {

// Advises the kernel to back the 2 MiB-aligned interior of [p, p + bytes)
// with transparent huge pages, where it allows them only on request
// (/sys/kernel/mm/transparent_hugepage/enabled: madvise, as here): one page
// fault per 2 MiB instead of one per 4 KiB as the array is first written.
// Advice only: no effect elsewhere, on a small range, or if refused.
void AdviseHugePages(const void* p, size_t bytes);

}  // namespace strata
