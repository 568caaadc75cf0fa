// libFuzzer target: plan JSON (what `strata plan -o` writes and every
// consumer reads). What decodes is validated and must encode and decode to
// the same plan.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/plan/plan_json.h"
#include "strata/plan/validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = strata::DecodePlan(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!p.ok()) return 0;
  (void)strata::ValidatePlan(*p);
  auto again = strata::DecodePlan(strata::EncodePlan(*p));
  if (!again.ok() || !(*again == *p)) std::abort();  // the round trip is the contract
  return 0;
}
