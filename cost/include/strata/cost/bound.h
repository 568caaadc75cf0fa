// The resource bound of a plan: how long one iteration must take at least,
// given the hardware section's rates, if every resource were kept busy and
// nothing waited on anything else. It is the yardstick for overlap: an
// executed or simulated iteration over this bound is time lost to
// dependencies, contention or fixed costs the rates leave out.
#pragma once

#include <string>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/plan/plan.h"

namespace strata {

struct ResourceTime {
  std::string resource;  // "compute", "cpu", "h2d", "d2h", "nvme_read", "nvme_write", "nvme", "collective", "p2p",
                         // "host" (hooks), "pipeline"
  double seconds = 0;
};

struct ResourceBound {
  std::vector<ResourceTime> resources;  // every resource the plan uses
  ResourceTime busiest;                 // the largest: the bound
};

// Per rank (rank 0's share of node-wide resources: the node's NVMe, CPU
// memory and network carry gpus_per_node ranks' bytes). Each resource's time
// is its ops' work over its rate plus the per-op latency:
//   compute        forward/backward ops and GPU optimizer steps as the
//                  compute model charges them (op_cost.h OpGpuSeconds)
//   cpu            CPU optimizer work (op_cost.h OpCpuWorkBytes: its bytes,
//                  or more when the cores bind), and the staging pass of
//                  copies to or from pageable memory (2 bytes of traffic a
//                  byte: a memcpy), / cpu.memory_bandwidth
//   h2d, d2h       bytes / PcieSharedRate + pcie.latency (a direction each),
//                  plus a pageable copy's bytes / cpu.staging_bandwidth and
//                  a copy's side kernels (op_cost.h OpCopySeconds)
//   nvme_read/write bytes / the node's read (write) bandwidth (all drives)
//                  + nvme.latency
//   nvme           with nvme.readwrite_bandwidth (one device): the least
//                  time to move both, the better of taking turns at the solo
//                  rates (read + write) and running both at once at
//                  readwrite_bandwidth (each direction capped by its rate);
//                  transfers only, latency stays with each direction
//   collective     ring bytes per rank over the link (nvlink, else pcie;
//                  network across nodes) + latency, plus the reduction
//                  and the copy kernels after it (op_cost.h
//                  CollectiveTailSeconds)
ResourceBound ComputeResourceBound(const Plan& plan, const HardwareSpec& hw);

// One GPU's PCIe rate per direction when every GPU of its node copies at
// once: its own link, its share of its switch's uplink, and its share of
// the host's aggregate, whichever is least.
Bandwidth PcieSharedRate(const HardwareSpec& hw);

}  // namespace strata
