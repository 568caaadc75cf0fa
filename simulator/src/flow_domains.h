// Max-min fair sharing of a replay's flows, solved domain by domain by the
// replay itself (private to the simulator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace strata::sim {

// SimGrid 3.32 spends most of an all-nodes replay on the activity layer
// around each flow (an s4u Exec, its ExecImpl, a network action, an LMM
// variable and its elements, created, started, posted and freed: about 60%
// of the helper's time on the 10T GPT at 4096 GPUs), not on the max-min
// solve itself (about 8%). This class shares flows as SimGrid's CM02 model
// does on this platform, without that layer:
//
// - Every link is a constraint of its bandwidth; a flow crosses each link of
//   its route once and is bounded by its slowest link; every flow has the
//   same weight (CM02: sharing penalty 1 on a route without latency,
//   bandwidth factor 1). Rates are max-min fair: progressive filling, as
//   lmm::MaxMin::do_solve.
// - Links fall into domains: two links are in one domain when a route
//   crosses both (union-find; a domain only grows, as routes are found).
//   Flows of different domains never share a link, so an event in one
//   domain changes no rate in another: each domain keeps its own flows and
//   the time they were last brought up to date.
//
// The caller (Replay) owns the clock and one timer per domain: it brings a
// domain up to date at each event there (Advance), adds and takes out
// flows, re-solves it (Solve) and sets the domain's timer at the end Solve
// returns. Tested against SimGrid's own flows: the same timelines to
// 1e-11 s (Simulate.FlowDomainsGiveTheSameTimeline).
class FlowDomains {
 public:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // The link `key` (SimGrid's link) of `bandwidth` bytes/s, interned.
  int32_t Link(const void* key, double bandwidth);
  // A route over `links` (indices from Link). Its links' domains become one;
  // when two domains with flows merge, both are first brought up to `now`.
  // An empty route (a host to itself) is not solvable here.
  int32_t AddRoute(const std::vector<int32_t>& links, double now);
  bool Solvable(int32_t route) const { return routes_[static_cast<size_t>(route)].n > 0; }
  // The domain a route's flows share (valid until the next AddRoute).
  int32_t DomainOf(int32_t route) { return Find(links_of_[routes_[static_cast<size_t>(route)].first]); }
  // The domain a domain id merged into (itself if it did not).
  int32_t Root(int32_t domain) { return Find(domain); }

  // A flow of `bytes` on `route` from `now` carrying `tag`: its domain is
  // brought up to `now` first. Returns the domain, to be solved.
  int32_t Add(int32_t route, double bytes, uint32_t tag, double now);
  // Brings the domain's flows' bytes left up to `now` at their rates, and
  // moves the tags of those done by then (within `eps` seconds of their end)
  // into `done`, in the order they were added.
  void Advance(int32_t domain, double now, std::vector<uint32_t>* done, double eps = 1e-10);
  // Max-min rates of the domain's flows; returns the time of its next end
  // (kNever with no flow).
  double Solve(int32_t domain);
  size_t Links() const { return link_.size(); }
  size_t Flows(int32_t domain) const { return domain_[static_cast<size_t>(domain)].flows.size(); }
  // Domains that were merged into another since the last call (their
  // timers are stale), each once.
  std::vector<int32_t> TakeMerged();

 private:
  struct Route {
    uint32_t first = 0, n = 0;  // its links in links_of_
  };
  struct Flow {
    int32_t route;
    uint32_t tag;
    double left;  // bytes left at the domain's `last`
    double rate;  // bytes/s since the last Solve
  };
  struct LinkState {
    double bandwidth = 0;
    int32_t parent = 0;  // union-find
    // Progressive filling's scratch (Solve).
    double room = 0;
    int32_t unfixed = 0;
    uint64_t mark = 0;
  };
  struct Domain {
    std::vector<Flow> flows;
    double last = 0;
  };
  int32_t Find(int32_t link);
  void BringUpTo(int32_t domain, double now);  // bytes left as of `now`

  std::unordered_map<const void*, int32_t> link_index_;
  std::vector<LinkState> link_;
  std::vector<Domain> domain_;  // by root link: a domain is its root's entry
  std::vector<Route> routes_;
  std::vector<int32_t> links_of_;
  std::vector<int32_t> merged_;
  std::vector<int32_t> scratch_links_;
  std::vector<uint8_t> fixed_;
  uint64_t epoch_ = 0;
};

}  // namespace strata::sim
