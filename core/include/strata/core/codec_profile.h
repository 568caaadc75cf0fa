// What the planner and the simulator know of each NVMe swap codec
// (policy.compression; docs/endurance.md "Compression"): its levels, one
// thread's compress and decompress rates, and the stored / raw bytes it
// reaches on the data Strata swaps. Measured by bench/codec_bench (1 MiB
// frames, byte shuffle, 4 KiB padding) on the CPU docs/endurance.md names;
// a scenario overrides the ratio with policy.compression_ratio.
#pragma once

#include <string_view>

#include "strata/core/scenario.h"
#include "strata/core/status.h"

namespace strata {

struct CodecProfile {
  CodecKind kind = CodecKind::kNone;
  std::string_view name;  // as policy.compression spells it
  int default_level = 0, min_level = 0, max_level = 0;
  // Bytes of raw data a second, one thread, at the default level.
  double compress_bytes_per_s = 0, decompress_bytes_per_s = 0;
  // Stored over raw bytes: fp32 optimizer state (master weights, Adam's
  // moments, fp32 gradients) and 16-bit parameters and gradients.
  double ratio_fp32 = 1, ratio_16 = 1;
};

const CodecProfile& ProfileOf(CodecKind kind);
// The inverse of CodecProfile::name; an unknown name is InvalidArgument.
Result<CodecKind> ParseCodec(std::string_view name);

// The planned stored / raw bytes of `element`-byte data under `c`: the
// scenario's ratio, else the profile's; 1 without a codec.
double PlannedRatio(const CompressionConfig& c, int element);

}  // namespace strata
