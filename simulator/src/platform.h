// The SimGrid platform of a scenario's hardware (private to the simulator).
#pragma once

#include <simgrid/s4u.hpp>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/plan/plan.h"

namespace strata::sim {

namespace sg4 = simgrid::s4u;

// Hosts of the simulated ranks' nodes; see simulator.h for the model.
// REQUIRES: an sg4::Engine exists and the network model is configured.
class Platform {
 public:
  // `ranks`: the ranks to simulate (whole nodes, ascending; not
  // necessarily consecutive nodes: a pipeline's stages); `groups`: the
  // plan's communication groups, whose rings get routes; `peers`:
  // point-to-point pairs (from, to) of simulated ranks that get routes
  // (pipeline sends).
  // `work_as_flows`: also give each GPU and each node's CPU memory a link of
  // its speed to a sink host, so that their work can run as flows (the
  // replay's signal mode, replay.h; it times the compute stream's ops
  // instead, and uses a GPU's link only for GPU work on another stream).
  Platform(const HardwareSpec& hw, const std::vector<int>& ranks, const std::vector<CommGroup>& groups,
           const std::vector<std::pair<int, int>>& peers = {}, bool work_as_flows = false);

  sg4::Host* gpu(int rank) const { return gpu_[Local(rank)]; }
  sg4::Host* cpu(int rank) const { return cpu_[NodeIndex(rank)]; }
  sg4::Host* nvme(int rank) const { return nvme_[NodeIndex(rank)]; }
  // With work_as_flows: the far end of every GPU's compute link (its speed,
  // in flops: gpu(r) -> sink()) and of every node's CPU memory link (its
  // memory bandwidth: cpu(r) -> sink()).
  // With work_as_flows and cpu.staging_bandwidth the route sink() ->
  // gpu(r), otherwise unused, crosses rank r's own staging link (the
  // per-copy rate in bytes of traffic: op_cost.h kStagingTrafficPerByte)
  // and then its node's CPU memory link, so a pageable copy's staging runs
  // as a flow from sink() to gpu(r). No host is added (the full zone's
  // route table is hosts x hosts).
  sg4::Host* sink() const { return sink_; }
  // Ring hop endpoints in group `g` (Plan::groups): the successor of `rank`
  // in its group's ring, or the node's network exit when the successor is
  // not simulated.
  sg4::Host* ring_next(int rank, int g) const;
  // For a rank whose ring predecessor in group `g` is not simulated: where
  // its incoming flow starts (the node's network entry); nullptr otherwise.
  sg4::Host* ring_prev_outside(int rank, int g) const;
  bool simulated(int rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < local_.size() && local_[static_cast<size_t>(rank)] >= 0;
  }
  int Local(int rank) const { return local_[static_cast<size_t>(rank)]; }
  // Where fixed per-op latencies elapse: a host of speed 1 with so many
  // cores that concurrent delays never share it (an exec of L flops takes L
  // seconds).
  sg4::Host* delay() const { return delay_; }

 private:
  int Node(int rank) const { return rank / gpn_; }
  int NodeIndex(int rank) const { return node_index_[static_cast<size_t>(Node(rank))]; }

  int gpn_ = 1;
  std::vector<int> ranks_;
  std::vector<int> local_;       // per rank up to the last simulated: its index in ranks_, -1 if not simulated
  std::vector<int> node_index_;  // per node likewise: its index among the simulated nodes
  std::vector<CommGroup> groups_;
  std::vector<sg4::Host*> gpu_, cpu_, nvme_, net_out_, net_in_;
  sg4::Host* delay_ = nullptr;
  sg4::Host* sink_ = nullptr;
};

}  // namespace strata::sim
