// Interleaved measurement for benchmarks that compare variants on a shared,
// noisy machine (two cores, other tenants, a disk that swings 1-5 GB/s):
// every round runs each variant once, the order rotating from round to
// round, so drift hits all of them alike; the figures are the min, median
// and max of each variant's rate over the rounds and of the per-round ratio
// of each variant to a reference one (bench/README.md says how to read
// them). A variant returns its rate for one run (units per second); the
// caller chooses the unit and how long a run lasts.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace strata::bench {

// Rounds per comparison: STRATA_BENCH_ROUNDS, default 7.
inline int Rounds() {
  const char* r = std::getenv("STRATA_BENCH_ROUNDS");
  return r != nullptr ? std::max(1, std::atoi(r)) : 7;
}

struct Variant {
  std::string name;
  std::function<double()> run;  // one measurement: its rate
};

struct Spread {
  double min = 0, median = 0, max = 0;
};

inline Spread SpreadOf(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {v.front(), med, v.back()};
}

struct Interleaved {
  std::vector<std::string> names;
  std::vector<std::vector<double>> rates;  // [variant][round]
  int reference = 0;
  std::string unit;

  Spread Rate(size_t v) const { return SpreadOf(rates[v]); }
  // Appends a variant whose rate in each round is the best of a's and b's
  // (two ways to the same limit: the limit is whichever got closer that
  // round); returns its index.
  int AddBestOf(const std::string& name, size_t a, size_t b) {
    names.push_back(name);
    std::vector<double> r;
    for (size_t k = 0; k < rates[a].size(); ++k) r.push_back(std::max(rates[a][k], rates[b][k]));
    rates.push_back(r);
    return static_cast<int>(rates.size()) - 1;
  }
  // Per-round rate of v over the reference's.
  Spread Ratio(size_t v) const { return RatioOf(v, static_cast<size_t>(reference)); }
  // Per-round rate of a over b's.
  Spread RatioOf(size_t a, size_t b) const {
    std::vector<double> r;
    for (size_t k = 0; k < rates[a].size(); ++k) r.push_back(rates[a][k] / rates[b][k]);
    return SpreadOf(r);
  }
};

// Runs `rounds` rounds; `before_each` (optional) runs before every
// measurement (an idle gap, a cache flush) so each variant starts alike.
inline Interleaved Interleave(const std::vector<Variant>& variants, int rounds, int reference, std::string unit,
                              const std::function<void()>& before_each = {}) {
  Interleaved out;
  out.reference = reference;
  out.unit = std::move(unit);
  out.rates.resize(variants.size());
  for (const Variant& v : variants) out.names.push_back(v.name);
  for (int r = 0; r < rounds; ++r)
    for (size_t j = 0; j < variants.size(); ++j) {
      const size_t v = (j + static_cast<size_t>(r)) % variants.size();
      if (before_each) before_each();
      out.rates[v].push_back(variants[v].run());
    }
  return out;
}

// Prints a table (one row per variant: rate min/median/max, ratio to the
// reference min/median/max) under `title`, and puts the medians into the
// benchmark's counters (NAME and NAME_ratio).
inline void Report(benchmark::State& state, const std::string& title, const Interleaved& r) {
  std::printf("%s: %zu rounds, rates in %s, ratio = per-round rate / %s's\n", title.c_str(),
              r.rates.empty() ? size_t{0} : r.rates[0].size(), r.unit.c_str(),
              r.names[static_cast<size_t>(r.reference)].c_str());
  std::printf("  %-22s %9s %9s %9s   %7s %7s %7s\n", "variant", "min", "median", "max", "r.min", "r.med", "r.max");
  for (size_t v = 0; v < r.names.size(); ++v) {
    const Spread s = r.Rate(v), q = r.Ratio(v);
    std::printf("  %-22s %9.3g %9.3g %9.3g   %7.3f %7.3f %7.3f\n", r.names[v].c_str(), s.min, s.median, s.max, q.min,
                q.median, q.max);
    state.counters[r.names[v]] = s.median;
    if (static_cast<int>(v) != r.reference) state.counters[r.names[v] + "_ratio"] = q.median;
  }
  std::fflush(stdout);
}

}  // namespace strata::bench
