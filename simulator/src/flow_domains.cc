#include "flow_domains.h"

#include <algorithm>
#include <utility>

namespace strata::sim {

int32_t FlowDomains::Link(const void* key, double bandwidth) {
  auto [it, fresh] = link_index_.try_emplace(key, static_cast<int32_t>(link_.size()));
  if (fresh) {
    LinkState l;
    l.bandwidth = bandwidth;
    l.parent = it->second;
    link_.push_back(l);
    domain_.emplace_back();
  }
  return it->second;
}

int32_t FlowDomains::Find(int32_t link) {
  while (link_[static_cast<size_t>(link)].parent != link) {
    int32_t& p = link_[static_cast<size_t>(link)].parent;
    p = link_[static_cast<size_t>(p)].parent;  // path halving
    link = p;
  }
  return link;
}

int32_t FlowDomains::AddRoute(const std::vector<int32_t>& links, double now) {
  Route r{static_cast<uint32_t>(links_of_.size()), static_cast<uint32_t>(links.size())};
  links_of_.insert(links_of_.end(), links.begin(), links.end());
  routes_.push_back(r);
  for (size_t i = 1; i < links.size(); ++i) {
    int32_t a = Find(links[0]), b = Find(links[i]);
    if (a == b) continue;
    if (domain_[static_cast<size_t>(a)].flows.size() < domain_[static_cast<size_t>(b)].flows.size()) std::swap(a, b);
    Domain& keep = domain_[static_cast<size_t>(a)];
    Domain& gone = domain_[static_cast<size_t>(b)];
    // Both up to now (a flow due now stays, to end at the merged domain's
    // next end, now), then one list.
    BringUpTo(a, now);
    if (!gone.flows.empty()) {
      BringUpTo(b, now);
      keep.flows.insert(keep.flows.end(), gone.flows.begin(), gone.flows.end());
      gone.flows.clear();
    }
    link_[static_cast<size_t>(b)].parent = a;
    merged_.push_back(b);
  }
  return static_cast<int32_t>(routes_.size() - 1);
}

std::vector<int32_t> FlowDomains::TakeMerged() {
  std::vector<int32_t> out;
  out.swap(merged_);
  return out;
}

void FlowDomains::BringUpTo(int32_t domain, double now) {
  Domain& dom = domain_[static_cast<size_t>(domain)];
  if (now > dom.last)
    for (Flow& f : dom.flows) f.left -= f.rate * (now - dom.last);
  dom.last = now;
}

int32_t FlowDomains::Add(int32_t route, double bytes, uint32_t tag, double now) {
  const int32_t d = DomainOf(route);
  BringUpTo(d, now);
  domain_[static_cast<size_t>(d)].flows.push_back({route, tag, bytes, 0});
  return d;
}

void FlowDomains::Advance(int32_t domain, double now, std::vector<uint32_t>* done, double eps) {
  BringUpTo(domain, now);
  Domain& dom = domain_[static_cast<size_t>(domain)];
  size_t kept = 0;
  for (size_t i = 0; i < dom.flows.size(); ++i) {
    const Flow& f = dom.flows[i];
    // Done: no bytes left, or (with a rate) due within eps of now, or so
    // close that its end rounds to now (the clock's step exceeds eps from
    // about 2^20 simulated seconds on). A flow added since the last Solve
    // has no rate yet: only an empty one is done.
    if (f.left <= 0 || (f.rate > 0 && (f.left <= f.rate * eps || now + f.left / f.rate <= now))) {
      done->push_back(f.tag);
      continue;
    }
    dom.flows[kept++] = f;
  }
  dom.flows.resize(kept);
}

double FlowDomains::Solve(int32_t domain) {
  Domain& dom = domain_[static_cast<size_t>(domain)];
  if (dom.flows.empty()) return kNever;
  // The domain's links: their room and unfixed flows.
  ++epoch_;
  scratch_links_.clear();
  for (const Flow& f : dom.flows) {
    const Route& r = routes_[static_cast<size_t>(f.route)];
    for (uint32_t i = r.first; i < r.first + r.n; ++i) {
      LinkState& l = link_[static_cast<size_t>(links_of_[i])];
      if (l.mark != epoch_) {
        l.mark = epoch_;
        l.room = l.bandwidth;
        l.unfixed = 0;
        scratch_links_.push_back(links_of_[i]);
      }
      ++l.unfixed;
    }
  }
  // Progressive filling: the link with the least room per unfixed flow
  // fixes its flows at that share; their shares leave every link they
  // cross. A flow's bound, its slowest link, never binds before that.
  fixed_.assign(dom.flows.size(), 0);
  size_t left = dom.flows.size();
  while (left > 0) {
    int32_t best = -1;
    double share = kNever;
    for (int32_t li : scratch_links_) {
      const LinkState& l = link_[static_cast<size_t>(li)];
      if (l.unfixed > 0 && l.room / l.unfixed < share) {
        share = l.room / l.unfixed;
        best = li;
      }
    }
    // No finite share (only links of infinite or undefined bandwidth left,
    // which the platform never builds): the rest keep rate 0, and a replay
    // waiting on them reports a stall instead of looping here.
    if (best < 0) break;
    share = std::max(share, 0.0);
    for (size_t k = 0; k < dom.flows.size(); ++k) {
      if (fixed_[k]) continue;
      Flow& f = dom.flows[k];
      const Route& r = routes_[static_cast<size_t>(f.route)];
      const auto* first = links_of_.data() + r.first;
      if (std::find(first, first + r.n, best) == first + r.n) continue;
      fixed_[k] = 1;
      --left;
      f.rate = share;
      for (uint32_t i = 0; i < r.n; ++i) {
        LinkState& l = link_[static_cast<size_t>(first[i])];
        l.room -= share;
        --l.unfixed;
      }
    }
  }
  double next_end = kNever;
  for (const Flow& f : dom.flows)
    if (f.rate > 0) next_end = std::min(next_end, dom.last + f.left / f.rate);
  return next_end;
}

}  // namespace strata::sim
