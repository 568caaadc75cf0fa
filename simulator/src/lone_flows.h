// The links a replay's flows are on, so that a flow alone on its route can
// run as a timer (private to the simulator).
#pragma once

#include <simgrid/s4u.hpp>

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace strata::sim {

namespace sg4 = simgrid::s4u;

// Under SimGrid's max-min sharing (CM02, bandwidth factor 1, no latency) a
// flow alone on every link of its route runs at its slowest link's
// bandwidth (NetworkCm02Model::comm_action_set_bounds), and nothing else
// depends on it. The replay's signal mode (replay.h) runs such a flow as a
// timer, as it runs the compute stream's ops: the same end, without an
// s4u Exec, a network action, an LMM variable and a completion signal.
// When another flow enters one of its links, the lone flow becomes a
// SimGrid flow of the bytes it has left, before the newcomer starts: from
// then on SimGrid shares the links as if both had been flows all along.
// A ring's hops over NVLink and between nodes are mostly alone; PCIe and
// NVMe, shared by a switch's or a node's GPUs, mostly are not.
//
// This class keeps the links of each route (from SimGrid's routing, cached
// per source: a rank's stream uses a few routes) and how many flows, and
// which lone one, are on each link.
class LoneFlows {
 public:
  static constexpr int64_t kOutside = -1;  // a source outside the simulated ranks
  // Sources are 0 to `sources` - 1, or kOutside.
  explicit LoneFlows(int64_t sources = 0) : by_source_(static_cast<size_t>(sources) + 1) {}

  // The route from `from` to `to` of a flow of `source`.
  int32_t Route(const sg4::Host* from, const sg4::Host* to, int64_t source);
  const sg4::Host* From(int32_t route) const { return routes_[static_cast<size_t>(route)].from; }
  const sg4::Host* To(int32_t route) const { return routes_[static_cast<size_t>(route)].to; }
  // Whether a flow entering the route now would be alone on all its links
  // (and the route has no latency, which a timer would not model).
  bool Alone(int32_t route) const;
  // Its slowest link's bandwidth: a lone flow's rate.
  double Rate(int32_t route) const { return routes_[static_cast<size_t>(route)].rate; }
  // A flow enters or leaves the route's links: `lone`, its id as a lone
  // flow, or -1 for a SimGrid flow.
  void Enter(int32_t route, int32_t lone);
  void Leave(int32_t route, int32_t lone);
  // The lone flows on any of the route's links, each once.
  void LoneOn(int32_t route, std::vector<int32_t>* out) const;
  // Lone flow `lone` on `route` became a SimGrid flow: still on its links.
  void Shared(int32_t route, int32_t lone);

 private:
  struct RouteInfo {
    const sg4::Host* from;
    const sg4::Host* to;
    double rate;         // its slowest link's bandwidth
    uint32_t first, n;   // its links in links_
    bool latency;        // a fixed latency on the route: never alone
  };
  struct LinkState {
    int32_t flows = 0;  // flows on the link, lone or not
    int32_t lone = -1;  // the lone flow on it, if any (then flows == 1, or more for an instant)
  };
  std::vector<std::vector<int32_t>> by_source_;  // [source + 1]: its routes
  std::vector<RouteInfo> routes_;
  std::vector<int32_t> links_;  // routes' links, as indices into link_
  std::vector<LinkState> link_;
  std::unordered_map<const sg4::Link*, int32_t> link_index_;
};

}  // namespace strata::sim
