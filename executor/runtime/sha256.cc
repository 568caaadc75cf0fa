#include "strata/executor/sha256.h"

#include <openssl/evp.h>

#include <new>

namespace strata::exec {

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

namespace {

// EVP fails only when it cannot allocate (or has no SHA-256 at all).
void Check(int ok) {
  if (ok != 1) throw std::bad_alloc();
}

}  // namespace

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  if (ctx_->md == nullptr) throw std::bad_alloc();
  Check(EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr));
}

Sha256::~Sha256() = default;

void Sha256::Update(const void* data, size_t bytes) { Check(EVP_DigestUpdate(ctx_->md, data, bytes)); }

std::array<uint8_t, 32> Sha256::Finish() {
  std::array<uint8_t, 32> out{};
  unsigned int n = 0;
  Check(EVP_DigestFinal_ex(ctx_->md, out.data(), &n));
  Check(n == out.size() ? 1 : 0);
  Check(EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr));
  return out;
}

std::string Sha256::Hex(const std::array<uint8_t, 32>& d) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace strata::exec
