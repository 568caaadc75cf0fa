// libFuzzer target: plan JSON (what `strata plan -o` writes and every
// consumer reads). What decodes is validated and must encode and decode to
// the same plan, in JSON and in the wire codec (plan_wire.h); the input's
// bytes are also decoded as wire bytes, which must refuse or re-encode to
// themselves (the wire encoding is canonical).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/plan/plan_json.h"
#include "strata/plan/plan_wire.h"
#include "strata/plan/validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto w = strata::DecodePlanWire(bytes); w.ok() && strata::EncodePlanWire(*w) != bytes) std::abort();
  auto p = strata::DecodePlan(bytes);
  if (!p.ok()) return 0;
  (void)strata::ValidatePlan(*p);
  auto again = strata::DecodePlan(strata::EncodePlan(*p));
  if (!again.ok() || !(*again == *p)) std::abort();  // the round trip is the contract
  auto wire = strata::DecodePlanWire(strata::EncodePlanWire(*p));
  if (!wire.ok() || !(*wire == *p)) std::abort();
  return 0;
}
