// Which flows of a replay are alone on their whole route for all their life
// (private to the simulator).
#pragma once

#include <simgrid/s4u.hpp>

#include <cstdint>
#include <vector>

namespace strata::sim {

namespace sg4 = simgrid::s4u;

// A route a replay may start flows on, and who starts them. A source is one
// simulated rank's one stream (the replay's Source()): a stream runs one op
// at a time and an op has at most one flow in flight at a time, so two
// flows of one source never overlap. kShared: flows that may overlap each
// other (a ring's entry from outside the simulated nodes).
struct RouteUse {
  static constexpr int64_t kShared = -1;
  const sg4::Host* from = nullptr;
  const sg4::Host* to = nullptr;
  int64_t source = kShared;
};

// A link every flow of which comes from one source carries at most one flow
// at a time. A flow whose every link is such a link (of its own source), on
// a route without latency, is alone on its route from start to end: under
// SimGrid's max-min sharing (CM02, bandwidth factor 1) it runs at its
// slowest link's bandwidth throughout, so it ends `bytes / rate` after it
// starts, and no other flow's rate depends on it. The replay's signal mode
// (replay.h) then runs it as a timer of that length, as it runs the
// compute stream's ops: the same end time without SimGrid's activity, LMM
// variable and completion signal. A ring's hops over NVLink and between
// nodes are such flows on a ZeRO-3 plan (each GPU's link out carries only
// its own collectives, one at a time); PCIe and NVMe, shared by the GPUs of
// a switch or a node, are not.
class ExclusiveRoutes {
 public:
  ExclusiveRoutes() = default;
  // `uses`: every (route, source) the replay may start a flow for; links of
  // routes not among them must carry no flows. Sources are 0 to
  // `sources` - 1, or kShared.
  ExclusiveRoutes(const std::vector<RouteUse>& uses, int64_t sources);

  // The rate (bytes/s) a flow of this source gets on this route if it is
  // alone there for its whole life; 0 if it may share a link; -1 if the
  // use was not among the constructor's (a replay that enumerates its
  // routes wrongly: it must then not use any rate from here). A lookup
  // per flow: a source's few routes lie together (no hash table, whose
  // scattered nodes cost a cache miss per flow at thousands of ranks).
  double Rate(const sg4::Host* from, const sg4::Host* to, int64_t source) const;
  // How many of the constructor's distinct uses are exclusive.
  size_t exclusive() const { return exclusive_; }

 private:
  struct Entry {
    const sg4::Host* from;
    const sg4::Host* to;
    double rate;
  };
  std::vector<uint32_t> begin_;  // per source + 1: its entries in entries_
  std::vector<Entry> entries_;
  std::vector<Entry> shared_;    // kShared's routes (rate 0)
  size_t exclusive_ = 0;
};

}  // namespace strata::sim
