// Memory tiers, and where a kind of training state lives.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace strata {

// GPU memory is per rank (one rank per GPU); CPU memory and NVMe are per node.
enum class Tier { kGpu = 0, kCpu = 1, kNvme = 2 };
inline constexpr int kNumTiers = 3;
inline constexpr std::array<Tier, kNumTiers> kAllTiers = {Tier::kGpu, Tier::kCpu, Tier::kNvme};

constexpr std::string_view TierName(Tier t) {
  switch (t) {
    case Tier::kGpu:
      return "gpu";
    case Tier::kCpu:
      return "cpu";
    case Tier::kNvme:
      return "nvme";
  }
  return "?";
}
std::optional<Tier> ParseTier(std::string_view name);

// Precision of the compute copy of parameters and of gradients.
enum class Precision { kFp16, kBf16, kFp32 };
inline constexpr int kNumPrecisions = 3;
constexpr int BytesPerElement(Precision p) { return p == Precision::kFp32 ? 4 : 2; }
constexpr std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp32:
      return "fp32";
  }
  return "?";
}

}  // namespace strata
