#include "strata/core/codec_profile.h"

#include <string>

namespace strata {

namespace {

// bench/codec_bench's medians on fp32 state (weights, Adam's moments),
// byte-shuffled, 1 MiB frames, one thread of a 2.1 GHz AMD EPYC (Zen 5,
// docs/endurance.md "Compression"); the 16-bit ratio is fp16 weights'
// (bf16's, 0.69 with zstd, is better: set policy.compression_ratio). Real
// swap files of the seed's run gave the same ratios within 0.02.
constexpr CodecProfile kProfiles[] = {
    {CodecKind::kNone, "none", 0, 0, 0, 0, 0, 1, 1},
    {CodecKind::kLz4, "lz4", 1, 1, 12, 1.15e9, 4.7e9, 0.925, 1.0},
    {CodecKind::kZstd, "zstd", 1, 1, 19, 0.97e9, 3.2e9, 0.844, 0.844},
};

}  // namespace

const CodecProfile& ProfileOf(CodecKind kind) { return kProfiles[static_cast<int>(kind)]; }

Result<CodecKind> ParseCodec(std::string_view name) {
  for (const CodecProfile& p : kProfiles)
    if (p.name == name) return p.kind;
  return Status::InvalidArgument("unknown codec '" + std::string(name) + "' (none, lz4 or zstd)");
}

double PlannedRatio(const CompressionConfig& c, int element) {
  if (c.codec == CodecKind::kNone) return 1;
  if (c.ratio > 0) return c.ratio;
  const CodecProfile& p = ProfileOf(c.codec);
  return element >= 4 ? p.ratio_fp32 : p.ratio_16;
}

}  // namespace strata
