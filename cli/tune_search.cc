// strata tune's search: coordinate descent over the knobs from the
// scenario's own values, then from seeded random points, until the budget
// of simulations (or time) is spent. Every candidate is planned and
// validated first; only the points that would run are simulated.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>

#include "parallel.h"
#include "strata/cost/bound.h"
#include "tune.h"

namespace strata::cli {
namespace {

// a is better than b: it ran, and b did not or was slower.
bool Better(const Evaluated& a, const Evaluated& b) {
  return a.simulated && (!b.simulated || a.objective > b.objective * (1 + 1e-9));
}

class Search {
 public:
  Search(const CommonArgs& args, const TuneSpace& space, const TuneOptions& o)
      : args_(args), space_(space), o_(o), t0_(std::chrono::steady_clock::now()) {}

  // The nearest point that runs: every point with one knob changed from
  // the start, then every point with two; the fastest of the first that
  // hold one (fewest keys changed, then fastest).
  TuneResult Repair() {
    const Setting start = Normalize(space_, space_.start);
    r_.start = EvaluateAll({start}).front();
    std::vector<const Knob*> knobs;
    for (const Knob& k : space_.knobs) knobs.push_back(&k);
    for (int changes = 1; changes <= 2 && r_.start >= 0; ++changes) {
      if (r_.points[static_cast<size_t>(r_.start)].simulated) break;  // it runs as given
      std::vector<Setting> next;
      for (size_t a = 0; a < knobs.size(); ++a)
        for (const std::string& va : knobs[a]->values) {
          if (va == start.at(knobs[a]->key)) continue;
          Setting one = start;
          one[knobs[a]->key] = va;
          if (changes == 1) next.push_back(Normalize(space_, one));
          for (size_t b = a + 1; changes == 2 && b < knobs.size(); ++b)
            for (const std::string& vb : knobs[b]->values) {
              if (vb == start.at(knobs[b]->key)) continue;
              Setting two = one;
              two[knobs[b]->key] = vb;
              next.push_back(Normalize(space_, two));
            }
        }
      // Keys changed once the point is normalised (stage 0 also clears the
      // offload devices): fewer first, then faster.
      auto changed = [&](int i) { return ChangedKeys(start, r_.points[static_cast<size_t>(i)].setting).size(); };
      int best = -1;
      for (int i : EvaluateAll(next)) {
        if (i < 0 || !r_.points[static_cast<size_t>(i)].simulated) continue;
        if (best < 0 || changed(i) < changed(best) ||
            (changed(i) == changed(best) &&
             Better(r_.points[static_cast<size_t>(i)], r_.points[static_cast<size_t>(best)])))
          best = i;
      }
      Progress();
      if (best >= 0) {
        r_.best = best;
        break;
      }
      if (OutOfBudget()) break;
    }
    if (r_.start >= 0 && r_.points[static_cast<size_t>(r_.start)].simulated) r_.best = r_.start;
    r_.seconds = Elapsed();
    return std::move(r_);
  }

  TuneResult Run() {
    if (o_.method == Method::kRandom) return RandomSearch();
    if (o_.method == Method::kBound) return BoundFirst();
    r_.start = EvaluateAll({Normalize(space_, space_.start)}).front();
    if (r_.start < 0) return std::move(r_);  // a budget of 0
    int best = Descend(r_.start);
    std::mt19937_64 rng(o_.seed);
    // Restarts end with the budget, or after 20 in a row that simulated
    // nothing new (a small space seen whole).
    for (int idle = 0; !OutOfBudget() && idle < 20;) {
      const int sims = r_.simulations;
      const int at = EvaluateAll({RandomPoint(rng)}).front();
      if (at < 0) break;  // the budget is spent
      if (r_.points[static_cast<size_t>(at)].simulated) {
        const int found = Descend(at);
        if (Better(r_.points[static_cast<size_t>(found)], r_.points[static_cast<size_t>(best)])) best = found;
      }
      idle = r_.simulations == sims ? idle + 1 : 0;
    }
    r_.best = r_.points[static_cast<size_t>(best)].simulated ? best : -1;
    r_.seconds = Elapsed();
    return std::move(r_);
  }

  // Seeded random points, a fixed batch at a time (so the points do not
  // depend on --jobs), until the budget is spent or 200 batches in a row
  // simulate nothing new.
  TuneResult RandomSearch() {
    r_.start = EvaluateAll({Normalize(space_, space_.start)}).front();
    std::mt19937_64 rng(o_.seed);
    for (int idle = 0; r_.start >= 0 && !OutOfBudget() && idle < 200;) {
      std::vector<Setting> batch;
      for (int i = 0; i < 8; ++i) batch.push_back(RandomPoint(rng));
      const int sims = r_.simulations;
      EvaluateAll(batch);
      Progress();
      idle = r_.simulations == sims ? idle + 1 : 0;
    }
    return Finish();
  }

  // Every point of the space planned and bounded, then the points that
  // would run simulated least bound first while the budget lasts. (The
  // caller checks the space has at most kMaxBoundPoints.) The points
  // chosen are planned again to be simulated: keeping every plan of the
  // space until the bounds are ranked would hold them all in memory.
  TuneResult BoundFirst() {
    std::vector<Setting> all{Normalize(space_, space_.start)};
    Setting p;
    std::function<void(size_t)> enumerate = [&](size_t k) {
      if (k == space_.knobs.size()) return all.push_back(Normalize(space_, p));
      for (const std::string& v : space_.knobs[k].values) p[space_.knobs[k].key] = v, enumerate(k + 1);
    };
    enumerate(0);
    std::sort(all.begin() + 1, all.end());
    all.erase(std::unique(all.begin() + 1, all.end()), all.end());
    const Setting start = all[0];
    all.erase(std::remove(all.begin() + 1, all.end(), start), all.end());
    std::vector<Evaluated> ev(all.size());
    ParallelFor(all.size(), o_.jobs, [&](size_t j) { PlanPoint(all[j], &ev[j]); });
    std::vector<size_t> order;
    for (size_t j = 0; j < all.size(); ++j)
      if (!ev[j].refused && ev[j].fits) order.push_back(j);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ev[a].bound_s < ev[b].bound_s; });
    std::vector<Setting> first{all[0]};  // the start, then the least bounds
    for (size_t j : order)
      if (j != 0 && static_cast<int>(first.size()) < o_.budget) first.push_back(all[j]);
    for (size_t j = 0; j < all.size(); ++j)  // the points that do not run cost nothing: all recorded
      if (ev[j].refused || !ev[j].fits) seen_[all[j]] = static_cast<int>(r_.points.size()), r_.points.push_back(ev[j]);
    r_.start = EvaluateAll({all[0]}).front();
    EvaluateAll(first);
    Progress();
    return Finish();
  }

  TuneResult Finish() {
    int best = -1;
    for (size_t i = 0; i < r_.points.size(); ++i)
      if (r_.points[i].simulated && (best < 0 || Better(r_.points[i], r_.points[static_cast<size_t>(best)])))
        best = static_cast<int>(i);
    r_.best = best;
    r_.seconds = Elapsed();
    return std::move(r_);
  }

 private:
  // A seeded random value of every knob, normalised.
  Setting RandomPoint(std::mt19937_64& rng) const {
    Setting p;
    for (const Knob& k : space_.knobs) p[k.key] = k.values[rng() % k.values.size()];
    return Normalize(space_, p);
  }

  double Elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  bool OutOfBudget() const { return r_.simulations >= o_.budget || (o_.seconds > 0 && Elapsed() >= o_.seconds); }

  // From point `cur`: each relevant knob in turn moves to its best value,
  // the others held, until a whole pass moves nothing.
  int Descend(int cur) {
    for (bool moved = true; moved && !OutOfBudget();) {
      moved = false;
      for (const Knob& k : space_.knobs) {
        const Setting here = r_.points[static_cast<size_t>(cur)].setting;
        if (!Relevant(space_, k, here)) continue;
        std::vector<Setting> next;
        for (const std::string& v : k.values) {
          if (v == here.at(k.key)) continue;
          Setting q = here;
          q[k.key] = v;
          next.push_back(Normalize(space_, q));
        }
        for (int i : EvaluateAll(next))
          if (i >= 0 && Better(r_.points[static_cast<size_t>(i)], r_.points[static_cast<size_t>(cur)]))
            cur = i, moved = true;
        Progress();
        if (OutOfBudget()) break;
      }
    }
    return cur;
  }

  void Progress() const {
    if (!o_.progress) return;
    double best = 0;
    for (const Evaluated& e : r_.points)
      if (e.simulated) best = std::max(best, e.objective);
    char b[160];
    std::snprintf(b, sizeof b, "strata tune: %d simulated, %zu pruned, %.0f s; best so far %.4g\n", r_.simulations,
                  r_.points.size() - static_cast<size_t>(r_.simulations), Elapsed(), best);
    std::cerr << b;
  }

  // The points' indices in r_.points, evaluating those not seen yet: all
  // planned (in parallel), then those that would run simulated, in order,
  // while the budget lasts. A point left unsimulated for the budget is not
  // recorded: its index is -1.
  std::vector<int> EvaluateAll(const std::vector<Setting>& ps) {
    std::vector<size_t> fresh;  // the first of each point not seen yet
    for (size_t i = 0; i < ps.size(); ++i)
      if (!seen_.contains(ps[i]) && std::none_of(fresh.begin(), fresh.end(), [&](size_t j) { return ps[j] == ps[i]; }))
        fresh.push_back(i);
    std::vector<Evaluated> ev(fresh.size());
    std::vector<std::optional<Planned>> planned(fresh.size());
    ParallelFor(fresh.size(), o_.jobs, [&](size_t j) { planned[j] = PlanPoint(ps[fresh[j]], &ev[j]); });
    std::vector<size_t> run;
    std::vector<bool> recorded(fresh.size(), true);
    for (size_t j = 0; j < fresh.size(); ++j)
      if (planned[j]) {
        if (r_.simulations + static_cast<int>(run.size()) < o_.budget)
          run.push_back(j);
        else
          recorded[j] = false;  // over budget
      }
    ParallelFor(run.size(), o_.jobs, [&](size_t k) { Simulate(*planned[run[k]], &ev[run[k]]); });
    for (size_t j = 0; j < fresh.size(); ++j) {
      if (!recorded[j]) continue;
      r_.simulations += ev[j].simulated;
      seen_[ps[fresh[j]]] = static_cast<int>(r_.points.size());
      r_.points.push_back(std::move(ev[j]));
    }
    std::vector<int> out;
    for (const Setting& p : ps) {
      auto it = seen_.find(p);
      out.push_back(it != seen_.end() ? it->second : -1);
    }
    return out;
  }

  // Plans and validates p; the plan when it would run, else why not in *e.
  std::optional<Planned> PlanPoint(const Setting& p, Evaluated* e) const {
    e->setting = p;
    auto ov = PointOverrides(space_, p);
    if (!ov.ok()) {
      e->refused = true, e->why = ov.status().message();
      return std::nullopt;
    }
    auto planned = LoadAndPlan(args_, *ov);
    if (!planned.ok()) {
      e->refused = true, e->why = planned.status().message();
      return std::nullopt;
    }
    if (!planned->feasible) {
      e->fits = false, e->violations = planned->report.violations;
      e->why = e->violations.empty() ? "does not fit" : e->violations.front().message;
      return std::nullopt;
    }
    // Figures of a point that runs (reported with its simulation).
    for (const Op& op : planned->plan.ops)
      if (op.kind == OpKind::kNvmeWrite) e->nvme_written += op.bytes;
    const ResourceBound bound = ComputeResourceBound(planned->plan, planned->scenario.hardware);
    e->bound_s = bound.busiest.seconds, e->bound_by = bound.busiest.resource;
    return std::move(*planned);
  }

  void Simulate(const Planned& p, Evaluated* e) const {
    auto r = sim::Simulate(p.plan, p.scenario.hardware, o_.sim);
    if (!r.ok()) {
      e->why = r.status().message();
      return;
    }
    e->simulated = true;
    e->summary = sim::Summarize(p.plan, *r);
    e->gpus = p.scenario.hardware.world_size();
    switch (o_.objective) {
      case Objective::kSamplesPerS:
        e->objective = e->summary.samples_per_s;
        break;
      case Objective::kTokensPerS:
        e->objective = e->summary.tokens_per_s;
        break;
      case Objective::kCost:  // samples per dollar
        e->objective = e->summary.samples_per_s * 3600 / (e->gpus * o_.gpu_hour_price);
        break;
    }
  }

  const CommonArgs& args_;
  const TuneSpace& space_;
  const TuneOptions& o_;
  const std::chrono::steady_clock::time_point t0_;
  std::map<Setting, int> seen_;  // point -> index in r_.points
  TuneResult r_;
};

}  // namespace

TuneResult Tune(const CommonArgs& args, const TuneSpace& space, const TuneOptions& o) {
  return Search(args, space, o).Run();
}

TuneResult Repair(const CommonArgs& args, const TuneSpace& space, const TuneOptions& o) {
  return Search(args, space, o).Repair();
}

std::vector<int> ParetoFront(const std::vector<Evaluated>& points) {
  auto costs = [](const Evaluated& e) {
    return std::array<double, 4>{e.summary.iteration_s, static_cast<double>(PeakOf(e, Tier::kGpu).v),
                                 static_cast<double>(PeakOf(e, Tier::kCpu).v), static_cast<double>(e.nvme_written.v)};
  };
  std::vector<int> front;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!points[i].simulated) continue;
    const auto a = costs(points[i]);
    bool dominated = false;
    for (size_t j = 0; j < points.size() && !dominated; ++j) {
      if (j == i || !points[j].simulated) continue;
      const auto b = costs(points[j]);
      bool no_worse = true, better = false;
      for (int k = 0; k < 4; ++k) no_worse &= b[k] <= a[k], better |= b[k] < a[k];
      dominated = no_worse && better;
    }
    // A point with the same four figures as one already on the front adds nothing.
    const bool repeat = std::any_of(front.begin(), front.end(), [&](int f) { return costs(points[f]) == a; });
    if (!dominated && !repeat) front.push_back(static_cast<int>(i));
  }
  std::sort(front.begin(), front.end(), [&](int x, int y) {
    return points[static_cast<size_t>(x)].summary.iteration_s < points[static_cast<size_t>(y)].summary.iteration_s;
  });
  return front;
}

}  // namespace strata::cli
