// Strata's window prefetch (policy.prefetch: window), the fetch schedule of
// every plan without DeepSpeed's coordinator: stages 0-2 (nothing is
// fetched), pipelines and the parameter caches (fetch_policy.h).
#include <algorithm>
#include <utility>

#include "fetch_policy.h"

namespace strata::detail {
namespace {

class WindowFetch final : public FetchPolicy {
 public:
  explicit WindowFetch(const ZeroConfig& z)
      : bucket_(z.stage3_prefetch_bucket_size.v),
        max_live_(z.stage3_max_live_parameters.v),
        reuse_(z.stage3_max_reuse_distance.v) {}

  // A micro step's two passes (forward, then backward with the
  // recomputations) are planned each on its own.
  Status Emit(FetchSite& site, int lo, int hi) override {
    if (needs_fetch_.size() != static_cast<size_t>(site.Positions())) PrepareReuse(site);
    const int m = site.NumModules();
    if (lo < m && hi > m) {
      Pass(site, lo, m);
      Pass(site, m, hi);
    } else {
      Pass(site, lo, hi);
    }
    return Status::Ok();
  }
  int64_t WindowNvmeReads() const override { return nvme_reads_; }

 private:
  void PrepareReuse(const FetchSite& site);
  void Pass(FetchSite& site, int lo, int hi);

  const int64_t bucket_, max_live_, reuse_;  // elements
  // Per position, per group there (GroupsAt order): fetch it before the
  // compute; release its gathered copy after. The same every micro step.
  std::vector<std::vector<char>> needs_fetch_, release_after_;
  int64_t nvme_reads_ = 0;
};

// Which uses of a gathered group must fetch it, and which may keep it for the
// next use: kept when the elements fetched in between are at most
// stage3_max_reuse_distance (e.g. the LM head between forward and backward).
void WindowFetch::PrepareReuse(const FetchSite& site) {
  const int P = site.Positions();
  needs_fetch_.assign(P, {});
  release_after_.assign(P, {});
  std::vector<int64_t> prefix(P + 1, 0);  // fetched elements before each position
  for (int p = 0; p < P; ++p) {
    const auto& gs = site.GroupsAt(p);
    release_after_[p].assign(gs.size(), true);
    int64_t fetched = 0;
    for (int gi : gs) {
      const FetchSite::GroupInfo g = site.Group(gi);
      needs_fetch_[p].push_back(g.fetched);
      if (g.fetched) fetched += g.elements.v;
    }
    prefix[p + 1] = prefix[p] + fetched;
  }
  std::vector<std::pair<int, size_t>> last(site.NumGroups(), {-1, 0});  // (position, index there)
  for (int p = 0; p < P; ++p) {
    const auto& gs = site.GroupsAt(p);
    for (size_t k = 0; k < gs.size(); ++k) {
      const int gi = gs[k];
      if (!site.Group(gi).fetched) continue;
      const auto [q, kq] = last[gi];
      if (q >= 0 && prefix[p] - prefix[q + 1] <= reuse_) {
        release_after_[q][kq] = false;
        needs_fetch_[p][k] = false;
      }
      last[gi] = {p, k};
    }
  }
}

// Emits the positions [lo, hi) of one pass. The fetch of position j is issued
// right before the compute of position I(j) = max(i, r), where
//   i: the first position with at most stage3_prefetch_bucket_size elements
//      to fetch in (i, j]  (prefetch depth), and
//   r: the first position with at most stage3_max_live_parameters elements
//      fetched in [r, j]  (everything before r is released first).
// and never before the compute of the group's previous use in the pass.
// It depends on the compute before I(j), so list order stays a valid order.
void WindowFetch::Pass(FetchSite& site, int lo, int hi) {
  std::vector<int64_t> f(hi - lo + 1, 0);  // prefix sums of fetched elements
  for (int p = lo; p < hi; ++p) {
    int64_t n = 0;
    const auto& gs = site.GroupsAt(p);
    for (size_t k = 0; k < gs.size(); ++k)
      if (needs_fetch_[p][k]) n += site.Group(gs[k]).elements.v;
    f[p - lo + 1] = f[p - lo] + n;
  }
  auto sum = [&](int a, int b) { return f[b - lo + 1] - f[a - lo]; };  // elements in [a, b]
  std::vector<std::vector<std::pair<int, int>>> issue_at(hi - lo);     // (position, group)
  int i = lo, r = lo;
  // A group used twice in the pass (a checkpointed layer's recompute, then
  // its backward) is fetched again only after its earlier use has computed:
  // one gathered copy per group at a time.
  std::vector<int> prev_use(site.NumGroups(), lo - 1);
  for (int j = lo; j < hi; ++j) {
    const auto& gs = site.GroupsAt(j);
    if (sum(j, j) > 0) {
      while (i < j && sum(i + 1, j) > bucket_) ++i;
      while (r < j && sum(r, j) > max_live_) ++r;
      for (size_t k = 0; k < gs.size(); ++k)
        if (needs_fetch_[j][k]) issue_at[std::max({i, r, prev_use[gs[k]] + 1}) - lo].push_back({j, gs[k]});
    }
    for (int gi : gs) prev_use[gi] = j;
  }
  const OpId before_pass = site.LastCompute();
  // NVMe reads in flight at each position: issued at or before it, their
  // position's compute at or after it (CacheStats::window_nvme_reads).
  std::vector<int64_t> reading(hi - lo + 1, 0);
  for (int k = lo; k < hi; ++k) {
    site.BeginPosition(k);
    site.Hook(k, !issue_at[k - lo].empty());
    for (auto [j, gi] : issue_at[k - lo]) {
      const Bytes read_before = site.NvmeReadBytes();
      site.Gather(j, gi, k == lo ? before_pass : site.ComputeOp(k - 1));
      if (site.NvmeReadBytes() != read_before) ++reading[k - lo], --reading[j - lo + 1];
    }
    site.Compute(k, release_after_[k]);
  }
  int64_t in_flight = 0;
  for (int64_t d : reading) {
    in_flight += d;
    nvme_reads_ = std::max(nvme_reads_, in_flight);
  }
}

}  // namespace

std::unique_ptr<FetchPolicy> NewWindowFetch(const ZeroConfig& z) { return std::make_unique<WindowFetch>(z); }

}  // namespace strata::detail
