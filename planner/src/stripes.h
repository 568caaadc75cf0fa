// Striping (policy.stripe_paths, Strata's; docs/endurance.md "Striping").
#pragma once

#include "strata/plan/plan.h"

namespace strata::detail {

// Under RunSpec::striped: places each NVMe buffer's first unit
// (Buffer::nvme_dir) on the drive that keeps the busiest drive's bytes
// written an iteration lowest, the buffers with the most bytes written
// first (write_requests.h DirWrites counts them the same way).
void BalanceStripes(Plan& plan);

}  // namespace strata::detail
