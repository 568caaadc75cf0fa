// The SimGrid platform of a scenario's hardware (private to the simulator).
#pragma once

#include <simgrid/s4u.hpp>

#include <vector>

#include "strata/core/scenario.h"
#include "strata/scheduler/plan.h"

namespace strata::sim {

namespace sg4 = simgrid::s4u;

// Hosts of the simulated ranks' nodes; see simulator.h for the model.
// REQUIRES: an sg4::Engine exists and the network model is configured.
class Platform {
 public:
  // `ranks`: the ranks to simulate (whole nodes, ascending); `groups`: the
  // plan's communication groups, whose rings get routes.
  Platform(const HardwareSpec& hw, const std::vector<int>& ranks, const std::vector<CommGroup>& groups);

  sg4::Host* gpu(int rank) const { return gpu_[Local(rank)]; }
  sg4::Host* cpu(int rank) const { return cpu_[Node(rank) - first_node_]; }
  sg4::Host* nvme(int rank) const { return nvme_[Node(rank) - first_node_]; }
  // Ring hop endpoints in group `g` (Plan::groups): the successor of `rank`
  // in its group's ring, or the node's network exit when the successor is
  // not simulated.
  sg4::Host* ring_next(int rank, int g) const;
  // For a rank whose ring predecessor in group `g` is not simulated: where
  // its incoming flow starts (the node's network entry); nullptr otherwise.
  sg4::Host* ring_prev_outside(int rank, int g) const;
  bool simulated(int rank) const { return rank >= ranks_.front() && rank <= ranks_.back(); }
  // Where fixed per-op latencies elapse: a host of speed 1 with so many
  // cores that concurrent delays never share it (an exec of L flops takes L
  // seconds).
  sg4::Host* delay() const { return delay_; }

 private:
  int Node(int rank) const { return rank / gpn_; }
  int Local(int rank) const { return rank - ranks_.front(); }

  int gpn_ = 1;
  int first_node_ = 0;
  std::vector<int> ranks_;
  std::vector<CommGroup> groups_;
  std::vector<sg4::Host*> gpu_, cpu_, nvme_, net_out_, net_in_;
  sg4::Host* delay_ = nullptr;
};

}  // namespace strata::sim
