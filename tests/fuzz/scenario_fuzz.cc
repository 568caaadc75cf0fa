// libFuzzer target: scenario YAML text through the loader and its checks;
// what loads is estimated (the memory report every command starts with).
// Contract under test: any input gives a scenario or an error status, never
// a crash, hang, sanitizer report or unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "strata/config/scenario_loader.h"
#include "strata/planner/estimator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto s = strata::config::ParseScenario(text, "fuzz.yaml");
  if (s.ok()) (void)strata::EstimateMemory(*s);
  return 0;
}
