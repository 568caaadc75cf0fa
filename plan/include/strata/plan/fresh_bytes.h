// Which bytes of a transient buffer an op can read before any op wrote
// them since its allocation (plan.h, Buffer::cleared and Op::grads_store):
// the one analysis behind both the planner's marks and the validator's
// check. Region accesses only (op_regions.h): a buffer an op merely lists
// (an activation the workload keeps itself) is memory, never read.
#pragma once

#include <vector>

#include "strata/plan/plan.h"

namespace strata {

struct UnwrittenRead {
  OpId op = -1;
  BufferId buffer = -1;
  Bytes offset, bytes;    // the read's region (some of its bytes unwritten)
  const char* what = "";  // the region's role (op_regions.h ForEachRegion)
};

// The first read of unwritten bytes in each transient buffer, by buffer,
// whether the buffer is cleared or not. Reads are move sources (and an
// accumulating move's destination), compute parameters, gradients a
// backward adds to (not stored), the optimizer's gradient and its in-place
// states. Writes count where they happen: a move naming a rank writes that
// rank's memory only (an allgather's destination every rank's), and a read
// on every rank needs the bytes written on every rank. REQUIRES: the plan's
// list order is a valid order (the validator's "order").
std::vector<UnwrittenRead> FindUnwrittenReads(const Plan& plan);

// The planner's marks: stores each backward's gradient region whose bytes no
// op wrote since its transient buffer's allocation (Op::grads_store), then
// clears exactly the transient buffers FindUnwrittenReads still names.
void MarkFreshBytes(Plan& plan);

}  // namespace strata
