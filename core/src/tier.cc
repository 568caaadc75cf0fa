#include "strata/core/tier.h"

namespace strata {

std::optional<Tier> ParseTier(std::string_view name) {
  for (Tier t : kAllTiers)
    if (TierName(t) == name) return t;
  return std::nullopt;
}

}  // namespace strata
