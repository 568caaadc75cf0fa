// SHA-256 (FIPS 180-4), for weights digests: `strata run` reports the hash
// of the final fp32 master weights gathered in a fixed order. OpenSSL's
// libcrypto computes it (EVP, PRIVATE to the executor): the digest is the
// standard SHA-256 of the bytes given.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace strata::exec {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t bytes);
  // The digest of everything given; the hash then starts over.
  std::array<uint8_t, 32> Finish();
  static std::string Hex(const std::array<uint8_t, 32>& d);

 private:
  struct Ctx;  // OpenSSL's EVP_MD_CTX
  std::unique_ptr<Ctx> ctx_;
};

}  // namespace strata::exec
