// Page-aligned heap memory (move-only RAII), for O_DIRECT buffers.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace strata::exec {

inline constexpr size_t kDirectAlign = 4096;

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    const size_t rounded = (bytes + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    data_ = static_cast<std::byte*>(std::aligned_alloc(kDirectAlign, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(data_); }

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strata::exec
