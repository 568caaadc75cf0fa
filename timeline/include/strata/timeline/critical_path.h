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

#include "strata/plan/plan.h"
#include "strata/timeline/timeline.h"

namespace strata {

struct CriticalPath {
  // Seconds on the path per class; kIdle holds the waits: where an op on
  // the path started after all of its predecessors had ended (host
  // overheads, memory, a collective's peers on other ranks), before the
  // first op and after the last. The classes sum to the iteration.
  double seconds[kNumTimeClasses] = {};
  // Of those waits, the ones before an op on the path, by the op's class:
  // the op was ready and its stream did not start it (on the host backend,
  // its worker thread waiting for a core), part of that class's response
  // time.
  double waited[kNumTimeClasses] = {};
  std::vector<OpId> ops;   // first to last
  std::vector<int> ranks;  // the rank of each of ops' spans (parallel to ops)
  // The class with the most time on the path, its ops' waits included.
  TimeClass bottleneck = TimeClass::kCompute;
  // seconds + waited of class c (not kIdle).
  double Charged(int c) const { return seconds[c] + waited[c]; }
};

// From the op of `rank` that ends last, back through whichever of its
// predecessors ended last: its plan dependencies and the previous op of its
// stream (a stream runs its ops one at a time, in plan order). Ops of other
// ranks are followed in two places: at a pipeline receive, the path goes on
// at the sending stage's rank of the same position (op ids name their
// stage); at a collective, at the rank of its stage (of those in the
// timeline, while ranks x plan ops is at most 2^24: every --all-nodes replay
// of 512 GPUs) whose predecessor ended last: a
// collective starts when every simulated rank of its stage is ready for it.
// `ranks` says on which rank each op of `ops` ran.
// REQUIRES: t is a timeline of `plan` (its ops sorted by rank).
CriticalPath AnalyzeCriticalPath(const Plan& plan, const Timeline& t, int rank = 0);

}  // namespace strata
