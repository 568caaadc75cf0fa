// SHA-256 (FIPS 180-4), for weights digests: `strata run` reports the hash
// of the final fp32 master weights gathered in a fixed order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::exec {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t bytes);
  std::array<uint8_t, 32> Finish();
  static std::string Hex(const std::array<uint8_t, 32>& d);

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

}  // namespace strata::exec
