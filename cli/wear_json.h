// The NVMe wear report (cost/endurance.h WearFields) as JSON, for the
// commands that print it (private to the CLI): null without NVMe writes; a
// field without a figure (no rate, no rating) null.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>

#include "strata/cost/endurance.h"

namespace strata::cli {

inline nlohmann::ordered_json WearJson(const DriveWear& w) {
  nlohmann::ordered_json j;
  if (w.drives > 0)
    for (const auto& [name, v] : WearFields(w))
      j[name] = std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
  return j;
}

}  // namespace strata::cli
