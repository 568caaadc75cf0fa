// std::vector<float> whose storage starts on a 64-byte cache line. The host
// Linear forward splits its outputs among threads by panels only where
// every row of y meets the split on a line boundary (linear_low.cc): a
// workload whose Linear outputs live in LineFloats gets that split, one in
// plain vectors (16-byte aligned by malloc) the split by batch rows.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace strata::exec {

template <typename T>
struct LineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  LineAllocator() = default;
  template <typename U>
  LineAllocator(const LineAllocator<U>&) {}  // NOLINT: rebinding, as the standard allocators do
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const LineAllocator<U>&) const {
    return true;
  }
};

using LineFloats = std::vector<float, LineAllocator<float>>;

}  // namespace strata::exec
