// The plan validator: replays a plan in dependency order and checks the
// contract of plan.h. Also the memory replay every report is built on.
//
// Checks: ids equal indices and references are in range; the graph of deps
// plus stream order is acyclic (and list order respects it); every buffer is
// allocated before use, not allocated twice, not used after being freed, and
// transient buffers are freed by the end; no tier is over capacity at any
// point (GPU per rank; CPU and NVMe per node = gpus_per_node ranks); and
// every data region lies inside its buffer and the buffer is among the op's
// reads or writes ("layout"); and
// lifetimes hold under any concurrent execution: the allocating op happens
// before every use and every use happens before the freeing op ("race");
// and no op reads bytes of a transient buffer that no op wrote since its
// allocation unless the buffer is cleared ("unwritten_read", fresh_bytes.h).
#pragma once

#include <string>
#include <vector>

#include "strata/plan/plan.h"

namespace strata {

struct Violation {
  std::string kind;     // "reference", "cycle", "order", "use_before_alloc", "use_after_free",
                        // "double_alloc", "double_free", "never_freed", "capacity", "race",
                        // "layout", "hazard", "unbacked" (an op names a counted-only
                        // buffer, or one is not resident), "host" (a hook off the host
                        // stream, other work on it, or a bad host_seconds),
                        // "unwritten_read" (fresh_bytes.h), "delayed_update" (its two
                        // gradient buffers, RunSpec::delayed_grads)
  std::string message;  // complete sentence naming tier, rank/node, op and bytes
  OpId op = -1;
  BufferId buffer = -1;
  // Capacity violations only.
  Tier tier = Tier::kGpu;
  int rank = -1;  // gpu tier: the rank (all ranks are alike; 0 is reported)
  int node = -1;  // cpu/nvme tiers
  Bytes needed, capacity;
};

struct MemoryPeaks {
  Bytes peak[kNumTiers];                     // gpu per rank; cpu, nvme per node
  Bytes at_peak[kNumTiers][kNumStateKinds];  // split by state kind at that moment
  OpId peak_op[kNumTiers] = {-1, -1, -1};    // the op during which the peak occurs
  // Whose buffers make the peak: per pipeline stage, how many ranks' worth
  // (gpu: 1 for the stage at the peak; cpu, nvme: the peak node's ranks of
  // each stage). Without pipeline stages {1} and {gpus_per_node}.
  std::vector<int> ranks_at_peak[kNumTiers];
};

struct ValidationReport {
  std::vector<Violation> violations;
  MemoryPeaks memory;
  bool ok() const { return violations.empty(); }
};

// At most `max_per_kind` violations of each kind are reported (a broken plan
// can violate its contract at every op).
ValidationReport ValidatePlan(const Plan& plan, int max_per_kind = 8);

}  // namespace strata
