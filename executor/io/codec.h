// Lossless codecs for NVMe swap data (policy.compression; docs/endurance.md
// "Compression"): zstd and lz4 from their Debian libraries, each after a
// byte shuffle (Blosc's): byte k of every element is grouped with byte k of
// the others, so the sign and exponent bytes of floats, alike from element
// to element, come together where the codec finds them. The mantissa bytes
// of trained weights and Adam moments are close to random and stay about
// their size: fp32 state and 16-bit parameters compress little (the
// profile's ratios, core/codec_profile.h, are measured by bench/codec_bench).
//
// A Codec keeps its library context and shuffle scratch: one per thread.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/core/status.h"

namespace strata::exec {

// Whether this build links the codec's library (kNone always is).
bool CodecBuiltIn(CodecKind kind);

class Codec {
 public:
  // `level`: the codec's (zstd 1..19, lz4 1 = fast, 2..12 = HC); 0 takes
  // the profile's. A codec this build lacks is InvalidArgument.
  static Result<std::unique_ptr<Codec>> New(CodecKind kind, int level);
  ~Codec();
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  // The most bytes Compress may write for `n` input bytes.
  size_t Bound(size_t n) const;
  // Compresses `src` (elements of `element` bytes; shuffled when
  // src.size() is a multiple of it) into `dst`, which holds at least
  // Bound(src.size()) bytes. Returns the compressed size.
  Result<size_t> Compress(std::span<const std::byte> src, size_t element, std::span<std::byte> dst);
  // Restores exactly out.size() bytes from a frame Compress wrote with the
  // same `element`; a corrupt or short frame is IOError.
  Status Decompress(std::span<const std::byte> in, size_t element, std::span<std::byte> out);
  CodecKind kind() const { return kind_; }

 private:
  struct Context;
  Codec(CodecKind kind, int level);
  CodecKind kind_;
  int level_;
  std::unique_ptr<Context> ctx_;
  std::vector<std::byte> scratch_;  // the shuffled bytes
};

// Byte shuffle and its inverse (exposed for tests): out[k * n/e + i] =
// in[i * e + k] for n bytes of e-byte elements.
void Shuffle(const std::byte* in, std::byte* out, size_t n, size_t element);
void Unshuffle(const std::byte* in, std::byte* out, size_t n, size_t element);

}  // namespace strata::exec
