// A compact binary encoding of the plan, for handing a plan to another
// process of the same build (the simulator's strata-sim-worker helper).
// It is not a file format: no versioning beyond a magic word, native byte
// order, and no promise between builds; plans on disk are JSON
// (plan_json.h). Encoding and decoding walk one field list per struct
// (src/plan_wire.cc), so the two cannot disagree on the layout.
//
// DecodePlanWire trusts nothing: every count and length is bounded by the
// bytes that remain before it is allocated, every enum by its range, and
// trailing bytes are an error; a plan that decodes is not yet valid
// (ValidatePlan checks references, lifetimes and capacity).
#pragma once

#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/plan/plan.h"

namespace strata {

std::string EncodePlanWire(const Plan& plan);
// Fails with InvalidArgument saying where the bytes stopped making sense.
Result<Plan> DecodePlanWire(std::string_view bytes);

}  // namespace strata
