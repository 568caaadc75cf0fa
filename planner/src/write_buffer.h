// Write buffering (policy.write_buffer, Strata's; docs/endurance.md).
#pragma once

#include <cstdint>

#include "strata/plan/plan.h"

namespace strata::detail {

// Marks every NVMe write coalesced (Op::coalesce), and merges each one
// whose every move is smaller than `below` into the next NVMe write of its
// stream when a move of that one meets one of its own in the same buffer,
// and no op listed between them depends on it: the small write waits for
// its neighbour, and the two go out as one run (write_requests.h). A merged
// write may merge again into the next. Ops are renumbered; returns how
// many were merged away.
int BufferNvmeWrites(Plan& plan, int64_t below);

}  // namespace strata::detail
