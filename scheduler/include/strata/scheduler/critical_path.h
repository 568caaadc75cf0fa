// The critical path of a timeline: the chain of ops that set the iteration's
// length. Both the simulator's timelines and the executor's are analyzed the
// same way, so `strata validate` compares like with like.
//
// Why a second analysis beside AnalyzeTimeline's exposed time: that one
// counts compute's whole busy time but a transfer's only while compute is
// idle, so a plan whose compute waits on fetch after fetch (each fetch
// shorter than, or overlapping, some compute) is named compute-bound even
// when the fetches are what make the iteration long. The critical path
// charges each op only where it holds the iteration up.
#pragma once

#include <vector>

#include "strata/scheduler/plan.h"
#include "strata/scheduler/timeline.h"

namespace strata {

struct CriticalPath {
  // Seconds on the path per class; kIdle holds the waits: where an op on
  // the path started after all of its predecessors had ended (host
  // overheads, memory, a collective's peers on other ranks), before the
  // first op and after the last. The classes sum to the iteration.
  double seconds[kNumTimeClasses] = {};
  std::vector<OpId> ops;  // first to last
  // The class with the most time on the path (waits excluded).
  TimeClass bottleneck = TimeClass::kCompute;
};

// From the op of `rank` that ends last, back through whichever of its
// predecessors ended last: its plan dependencies and the previous op of its
// stream (a stream runs its ops one at a time, in plan order). Ops of other
// ranks are not followed. REQUIRES: t is a timeline of `plan`.
CriticalPath AnalyzeCriticalPath(const Plan& plan, const Timeline& t, int rank = 0);

}  // namespace strata
