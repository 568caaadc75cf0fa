#include "exclusive_routes.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace strata::sim {

ExclusiveRoutes::ExclusiveRoutes(const std::vector<RouteUse>& uses, int64_t sources) {
  // Each link's one source, or kShared once two differ (or one is kShared).
  std::unordered_map<const sg4::Link*, int64_t> owner;
  struct Route {
    RouteUse use;
    std::vector<sg4::Link*> links;
    double latency = 0;
  };
  std::vector<Route> routes;
  routes.reserve(uses.size());
  for (const RouteUse& u : uses) {
    Route r{u, {}, 0};
    u.from->route_to(u.to, r.links, &r.latency);
    for (const sg4::Link* l : r.links) {
      auto [o, first] = owner.try_emplace(l, u.source);
      if (!first && o->second != u.source) o->second = RouteUse::kShared;
    }
    routes.push_back(std::move(r));
  }
  // By source, then route: the entries of a source together, each route once.
  std::sort(routes.begin(), routes.end(), [](const Route& a, const Route& b) {
    return std::tie(a.use.source, a.use.from, a.use.to) < std::tie(b.use.source, b.use.from, b.use.to);
  });
  routes.erase(std::unique(routes.begin(), routes.end(),
                           [](const Route& a, const Route& b) {
                             return a.use.source == b.use.source && a.use.from == b.use.from && a.use.to == b.use.to;
                           }),
               routes.end());
  begin_.assign(static_cast<size_t>(sources) + 1, 0);
  for (const Route& r : routes) {
    if (r.use.source == RouteUse::kShared) {
      shared_.push_back({r.use.from, r.use.to, 0});
      continue;
    }
    double rate = 0;
    const bool alone = !r.links.empty() && r.latency == 0 &&
                       std::all_of(r.links.begin(), r.links.end(),
                                   [&](const sg4::Link* l) { return owner.at(l) == r.use.source; });
    if (alone) {
      // SimGrid's bound on a flow (NetworkCm02Model::comm_action_set_bounds):
      // its route's smallest bandwidth.
      rate = r.links.front()->get_bandwidth();
      for (const sg4::Link* l : r.links) rate = std::min(rate, l->get_bandwidth());
      ++exclusive_;
    }
    entries_.push_back({r.use.from, r.use.to, rate});
    ++begin_[static_cast<size_t>(r.use.source) + 1];
  }
  for (size_t i = 1; i < begin_.size(); ++i) begin_[i] += begin_[i - 1];
}

double ExclusiveRoutes::Rate(const sg4::Host* from, const sg4::Host* to, int64_t source) const {
  const Entry* b = nullptr;
  const Entry* e = nullptr;
  if (source == RouteUse::kShared) {
    b = shared_.data();
    e = b + shared_.size();
  } else if (source >= 0 && static_cast<size_t>(source) + 1 < begin_.size()) {
    b = entries_.data() + begin_[static_cast<size_t>(source)];
    e = entries_.data() + begin_[static_cast<size_t>(source) + 1];
  }
  for (const Entry* x = b; x != e; ++x)
    if (x->from == from && x->to == to) return x->rate;
  return -1;
}

}  // namespace strata::sim
