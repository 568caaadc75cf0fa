// The replay's flow domains (replay.h, flow_domains.h): routes, flows,
// and bringing each domain touched by an event up to date.
#include <algorithm>
#include <cstdint>
#include <simgrid/kernel/Timer.hpp>
#include <vector>

#include "replay.h"

namespace strata::sim {

// The route's links as FlowDomains links, found once per source. A route
// with a latency, which a domain does not model, is left to SimGrid (not
// solvable); no flow in a domain may share a link with it, which holds as
// long as the platform gives no link a latency (platform.cc sets 0 on
// every one: latencies are the replay's own timers, Latency()).
int32_t Replay::FlowRoute(const sg4::Host* from, const sg4::Host* to, int64_t source) {
  std::vector<KnownRoute>& mine = routes_by_source_[static_cast<size_t>(source + 1)];
  for (const KnownRoute& k : mine)
    if (k.from == from && k.to == to) return k.route;
  std::vector<sg4::Link*> links;
  double latency = 0;
  from->route_to(to, links, &latency);
  std::vector<int32_t> ids;
  if (latency <= 0)
    for (const sg4::Link* l : links) ids.push_back(domains_.Link(l, l->get_bandwidth()));
  const int32_t route = domains_.AddRoute(ids, sg4::Engine::get_clock());
  if (domain_timer_.size() < domains_.Links()) {  // a domain is named by a link
    domain_timer_.resize(domains_.Links(), nullptr);
    domain_timer_at_.resize(domains_.Links(), FlowDomains::kNever);
    is_dirty_.resize(domains_.Links(), 0);
  }
  // Domains merged into another: their timers are stale, the merged one is
  // re-solved.
  for (int32_t d : domains_.TakeMerged()) SetDomainTimer(d, FlowDomains::kNever);
  if (domains_.Solvable(route)) MarkDirty(domains_.DomainOf(route));
  mine.push_back({from, to, route});
  return route;
}

bool Replay::DomainFlow(const sg4::Host* from, const sg4::Host* to, double bytes, const Task& t) {
  if (!domains_on_) return false;
  const int32_t route = FlowRoute(from, to, Source(t));
  if (!domains_.Solvable(route)) return false;
  uint32_t tag;
  if (free_tags_.empty()) {
    tag = static_cast<uint32_t>(flow_task_.size());
    flow_task_.push_back(t);
  } else {
    tag = free_tags_.back();
    free_tags_.pop_back();
    flow_task_[tag] = t;
  }
  ++activities;
  ++domain_flows;
  const int32_t d = domains_.Add(route, bytes, tag, sg4::Engine::get_clock());
  max_domain_flows = std::max<int64_t>(max_domain_flows, static_cast<int64_t>(domains_.Flows(d)));
  MarkDirty(d);
  return true;
}

void Replay::MarkDirty(int32_t domain) {
  if (is_dirty_[static_cast<size_t>(domain)]) return;
  is_dirty_[static_cast<size_t>(domain)] = 1;
  dirty_.push_back(domain);
}

void Replay::Settle() {
  if (settling_ || !domains_on_) return;
  settling_ = true;
  const double now = sg4::Engine::get_clock();
  while (!dirty_.empty()) {
    const int32_t marked = dirty_.back();
    dirty_.pop_back();
    is_dirty_[static_cast<size_t>(marked)] = 0;
    const int32_t d = domains_.Root(marked);
    due_.clear();
    domains_.Advance(d, now, &due_);
    if (due_.empty()) {
      SetDomainTimer(d, domains_.Solve(d));
      continue;
    }
    // Its flows due now end: their successors may add flows to it, so it
    // is re-solved after them. (Done never re-enters Settle, so due_ stays.)
    MarkDirty(d);
    for (uint32_t tag : due_) {
      const Task t = flow_task_[tag];
      free_tags_.push_back(tag);
      Done(t);
    }
  }
  settling_ = false;
}

// The domain's timer at `end` (none for kNever); kept when already there.
void Replay::SetDomainTimer(int32_t domain, double end) {
  const size_t d = static_cast<size_t>(domain);
  if (domain_timer_[d] != nullptr && domain_timer_at_[d] == end) return;
  if (domain_timer_[d] != nullptr) domain_timer_[d]->remove();
  domain_timer_[d] = nullptr;
  domain_timer_at_[d] = end;
  if (end == FlowDomains::kNever) return;
  domain_timer_[d] = simgrid::kernel::timer::Timer::set(std::max(end, sg4::Engine::get_clock()), [this, domain] {
    domain_timer_[static_cast<size_t>(domain)] = nullptr;  // SimGrid frees it after this call
    domain_timer_at_[static_cast<size_t>(domain)] = FlowDomains::kNever;
    MarkDirty(domain);
    Settle();
  });
}

}  // namespace strata::sim
