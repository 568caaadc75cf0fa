#include "lone_flows.h"

#include <algorithm>

namespace strata::sim {

int32_t LoneFlows::Route(const sg4::Host* from, const sg4::Host* to, int64_t source) {
  std::vector<int32_t>& mine = by_source_[static_cast<size_t>(source + 1)];
  for (int32_t r : mine)
    if (routes_[static_cast<size_t>(r)].from == from && routes_[static_cast<size_t>(r)].to == to) return r;
  std::vector<sg4::Link*> links;
  double latency = 0;
  from->route_to(to, links, &latency);
  RouteInfo info{from, to, 0, static_cast<uint32_t>(links_.size()), static_cast<uint32_t>(links.size()), latency > 0};
  for (const sg4::Link* l : links) {
    auto [it, fresh] = link_index_.try_emplace(l, static_cast<int32_t>(link_.size()));
    if (fresh) link_.emplace_back();
    links_.push_back(it->second);
    info.rate = info.rate == 0 ? l->get_bandwidth() : std::min(info.rate, l->get_bandwidth());
  }
  if (links.empty()) info.latency = true;  // a host to itself: leave it to SimGrid
  routes_.push_back(info);
  mine.push_back(static_cast<int32_t>(routes_.size() - 1));
  return mine.back();
}

bool LoneFlows::Alone(int32_t route) const {
  const RouteInfo& r = routes_[static_cast<size_t>(route)];
  if (r.latency) return false;
  for (uint32_t i = r.first; i < r.first + r.n; ++i)
    if (link_[static_cast<size_t>(links_[i])].flows > 0) return false;
  return true;
}

void LoneFlows::Enter(int32_t route, int32_t lone) {
  const RouteInfo& r = routes_[static_cast<size_t>(route)];
  for (uint32_t i = r.first; i < r.first + r.n; ++i) {
    LinkState& l = link_[static_cast<size_t>(links_[i])];
    ++l.flows;
    if (lone >= 0) l.lone = lone;
  }
}

void LoneFlows::Leave(int32_t route, int32_t lone) {
  const RouteInfo& r = routes_[static_cast<size_t>(route)];
  for (uint32_t i = r.first; i < r.first + r.n; ++i) {
    LinkState& l = link_[static_cast<size_t>(links_[i])];
    --l.flows;
    if (lone >= 0 && l.lone == lone) l.lone = -1;
  }
}

void LoneFlows::LoneOn(int32_t route, std::vector<int32_t>* out) const {
  out->clear();
  const RouteInfo& r = routes_[static_cast<size_t>(route)];
  for (uint32_t i = r.first; i < r.first + r.n; ++i) {
    const int32_t lone = link_[static_cast<size_t>(links_[i])].lone;
    if (lone >= 0 && std::find(out->begin(), out->end(), lone) == out->end()) out->push_back(lone);
  }
}

void LoneFlows::Shared(int32_t route, int32_t lone) {
  const RouteInfo& r = routes_[static_cast<size_t>(route)];
  for (uint32_t i = r.first; i < r.first + r.n; ++i) {
    LinkState& l = link_[static_cast<size_t>(links_[i])];
    if (l.lone == lone) l.lone = -1;
  }
}

}  // namespace strata::sim
