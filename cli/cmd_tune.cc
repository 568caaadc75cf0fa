// strata tune: the best configuration of a scenario's ZeRO, offload, batch
// and parallel knobs by simulation (tune.h; docs/tune.md).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "parallel.h"
#include "strata/core/units.h"
#include "tune.h"

namespace strata::cli {
namespace {

struct TuneArgs : CommonArgs {
  TuneOptions tune;
  std::string objective = "samples_per_s";
  std::string method = "descent";
  std::vector<std::string> search, fix;
  bool only = false;    // --only: the --search keys alone
  bool repair = false;  // --repair: the nearest point that runs
  std::string out_dir;  // -o DIR
};

// The default space with --search ranges and --fix holds applied.
Result<TuneSpace> BuildSpace(TuneArgs& a) {
  std::vector<std::string> fixed;
  for (const auto& arg : a.fix) {
    STRATA_ASSIGN_OR_RETURN(auto kv, config::ParseSetArgument(arg));
    if (kv.second.size() != 1) return Status::InvalidArgument("--fix " + arg + ": one value");
    fixed.push_back(kv.first);
    a.sets.push_back(arg);  // every point loads it
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> searched;
  for (const auto& arg : a.search) {
    STRATA_ASSIGN_OR_RETURN(auto kv, config::ParseSetArgument(arg));
    searched.push_back(std::move(kv));
  }
  auto s = Load(a);
  if (!s.ok()) return Status::InvalidArgument("the scenario with its --set and --fix values: " + s.status().message());
  TuneSpace space = DefaultSpace(*s);
  auto drop = [&](const std::function<bool(const std::string&)>& gone) {
    std::erase_if(space.knobs, [&](const Knob& k) { return gone(k.key); });
    std::erase_if(space.start, [&](const auto& kv) { return gone(kv.first); });
  };
  if (a.only) {
    if (a.search.empty()) return Status::InvalidArgument("--only needs --search");
    drop([&](const std::string& key) {
      return std::none_of(searched.begin(), searched.end(), [&](const auto& kv) { return kv.first == key; });
    });
  }
  drop([&](const std::string& key) { return std::find(fixed.begin(), fixed.end(), key) != fixed.end(); });
  for (size_t n = 0; n < searched.size(); ++n) {
    // Named references, not a structured binding: clang 14 (the sanitizer
    // job) does not let a lambda capture a binding.
    const std::string& key = searched[n].first;
    const auto& values = searched[n].second;
    // Each value loaded on the scenario alone: a key that does not exist,
    // or a range none of whose values DeepSpeed or Strata accepts, is bad input.
    std::string first_error;
    bool any = false;
    for (const auto& v : values) {
      auto probe = Load(a, {{key, v}});
      if (probe.ok()) {
        any = true;
        break;
      }
      if (first_error.empty()) first_error = probe.status().message();
      if (first_error.find("unknown key") != std::string::npos) break;
    }
    if (!any) return Status::InvalidArgument("--search " + a.search[n] + ": no value is accepted: " + first_error);
    auto it = std::find_if(space.knobs.begin(), space.knobs.end(), [&](const Knob& k) { return k.key == key; });
    if (it == space.knobs.end()) {
      space.knobs.push_back({key, values, {}, {}});
      space.start[key] = values.front();
    } else {
      // The scenario as given stays the start: its own value joins the range.
      it->values = values;
      if (std::find(values.begin(), values.end(), space.start[key]) == values.end())
        it->values.push_back(space.start[key]);
    }
  }
  return space;
}

std::string Changes(const Setting& from, const Setting& to) {
  std::string out;
  for (const std::string& k : ChangedKeys(from, to)) out += (out.empty() ? "" : ", ") + k + "=" + to.at(k);
  return out.empty() ? "(none)" : out;
}

const char* UnitOf(const TuneArgs& a) {
  return a.objective == "tokens_per_s" ? "tokens/s" : a.objective == "cost" ? "samples/$" : "samples/s";
}

std::string Figure(const Evaluated& e, const char* unit) {
  char b[160];
  if (!e.simulated) return e.refused ? "refused: " + e.why : e.fits ? "failed: " + e.why : "does not fit: " + e.why;
  const auto& s = e.summary;
  std::snprintf(b, sizeof b, "%.4g %s, iteration %.4g s, bottleneck %s (exposed %.3g s)", e.objective, unit,
                s.iteration_s, std::string(TimeClassName(s.path.bottleneck)).c_str(),
                s.breakdown.seconds[static_cast<int>(s.path.bottleneck)]);
  return b;
}

int FindPoint(const TuneResult& r, const Setting& p) {
  for (size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].setting == p) return static_cast<int>(i);
  return -1;
}

std::string Text(const TuneArgs& a, const TuneSpace& space, const TuneResult& r) {
  const char* unit = UnitOf(a);
  int refused = 0, unfit = 0;
  for (const auto& e : r.points) refused += e.refused, unfit += !e.refused && !e.fits;
  std::ostringstream o;
  o << "strata tune: " << a.scenario << ", objective " << unit << ", seed " << a.tune.seed << "\n";
  o << "  " << r.points.size() << " points: " << r.simulations << " simulated, " << refused
    << " refused by DeepSpeed's or Strata's checks, " << unfit << " do not fit; " << r.seconds << " s\n";
  const Evaluated& start = r.points[static_cast<size_t>(r.start)];
  o << "start (the scenario as given): " << Figure(start, unit) << "\n";
  const Evaluated& best = r.points[static_cast<size_t>(r.best)];
  o << "best: " << Figure(best, unit);
  if (start.simulated) o << " — " << best.objective / start.objective << "x the start";
  o << "\n  peak GPU " << FormatBytes(PeakOf(best, Tier::kGpu)) << ", CPU " << FormatBytes(PeakOf(best, Tier::kCpu))
    << " per node; NVMe written " << FormatBytes(best.nvme_written) << " per GPU per iteration\n";
  if (a.tune.objective == Objective::kCost) {
    char b[160];
    std::snprintf(b, sizeof b, "  $%.4g per 1000 samples: %d GPUs at $%.4g per GPU-hour\n", 1000 / best.objective,
                  best.gpus, a.tune.gpu_hour_price);
    o << b;
  }
  o << "  changes: " << Changes(start.setting, best.setting) << "\n";
  o << "each knob at the best point, and the point with it changed:\n";
  for (const Knob& k : space.knobs) {
    if (!Relevant(space, k, best.setting)) continue;
    o << "  " << k.key << " = " << best.setting.at(k.key) << "\n";
    for (const auto& v : k.values) {
      if (v == best.setting.at(k.key)) continue;
      Setting q = best.setting;
      q[k.key] = v;
      const int i = FindPoint(r, Normalize(space, q));
      o << "      " << v << ": " << (i < 0 ? "not evaluated" : Figure(r.points[static_cast<size_t>(i)], unit)) << "\n";
    }
  }
  o << "Pareto front (iteration time; peak GPU; peak CPU per node; NVMe written per GPU):\n";
  for (int i : ParetoFront(r.points)) {
    const Evaluated& e = r.points[static_cast<size_t>(i)];
    char b[64];
    std::snprintf(b, sizeof b, "%.4g s", e.summary.iteration_s);
    o << "  " << b << "; " << FormatBytes(PeakOf(e, Tier::kGpu)) << "; " << FormatBytes(PeakOf(e, Tier::kCpu)) << "; "
      << FormatBytes(e.nvme_written) << "  (" << Changes(start.setting, e.setting) << ")\n";
  }
  return o.str();
}

// --repair: each key the repaired point changed, and why it had to: the
// verdict of the same point without that change.
struct Change {
  std::string key, from, to, without_it;
};
std::vector<Change> RepairChanges(const TuneSpace& space, const TuneResult& r, const char* unit) {
  const Setting& start = r.points[static_cast<size_t>(r.start)].setting;
  const Setting& best = r.points[static_cast<size_t>(r.best)].setting;
  std::vector<Change> out;
  for (const std::string& k : ChangedKeys(start, best)) {
    Setting without = best;
    without[k] = start.at(k);
    const int i = FindPoint(r, Normalize(space, without));
    out.push_back(
        {k, start.at(k), best.at(k), i < 0 ? "not evaluated" : Figure(r.points[static_cast<size_t>(i)], unit)});
  }
  return out;
}

std::string RepairText(const TuneArgs& a, const TuneSpace& space, const TuneResult& r) {
  const char* unit = UnitOf(a);
  std::ostringstream o;
  const Evaluated& start = r.points[static_cast<size_t>(r.start)];
  o << "strata tune --repair: " << a.scenario << "; " << r.points.size() << " points, " << r.simulations
    << " simulated, " << r.seconds << " s\n";
  if (r.best == r.start) {
    o << "the scenario runs as given: " << Figure(start, unit) << "\n";
    return o.str();
  }
  o << "as given: " << Figure(start, unit) << "\n";
  const auto changes = RepairChanges(space, r, unit);
  o << "repaired with " << changes.size() << (changes.size() == 1 ? " change" : " changes") << ":\n";
  for (const Change& c : changes)
    o << "  " << c.key << ": " << c.from << " -> " << c.to << "\n      without it: " << c.without_it << "\n";
  o << "the repaired point: " << Figure(r.points[static_cast<size_t>(r.best)], unit) << "\n";
  // The other points that run with as few changes: a slower repair may keep
  // what the user meant (parameters on NVMe, with a larger buffer).
  auto changed = [&](const Evaluated& e) {
    std::string out;
    for (const std::string& k : ChangedKeys(start.setting, e.setting))
      out += (out.empty() ? "" : ", ") + k + ": " + start.setting.at(k) + " -> " + e.setting.at(k);
    return out;
  };
  std::vector<const Evaluated*> others;
  for (size_t i = 0; i < r.points.size(); ++i)
    if (static_cast<int>(i) != r.best && r.points[i].simulated &&
        ChangedKeys(start.setting, r.points[i].setting).size() == changes.size())
      others.push_back(&r.points[i]);
  std::sort(others.begin(), others.end(),
            [](const Evaluated* x, const Evaluated* y) { return x->objective > y->objective; });
  if (!others.empty()) o << "other repairs with as few changes:\n";
  for (size_t i = 0; i < others.size() && i < 5; ++i)
    o << "  " << changed(*others[i]) << ": " << Figure(*others[i], unit) << "\n";
  return o.str();
}

nlohmann::ordered_json PointJson(const Evaluated& e) {
  nlohmann::ordered_json j;
  j["settings"] = e.setting;
  j["simulated"] = e.simulated;
  if (!e.simulated) {
    j["refused"] = e.refused;
    j["fits"] = e.fits;
    j["why"] = e.why;
    return j;
  }
  j["objective"] = e.objective;
  j["iteration_time_s"] = e.summary.iteration_s;
  j["samples_per_s"] = e.summary.samples_per_s;
  j["tokens_per_s"] = e.summary.tokens_per_s;
  j["bottleneck"] = TimeClassName(e.summary.path.bottleneck);
  j["peak_gpu_bytes"] = PeakOf(e, Tier::kGpu).v;
  j["peak_cpu_bytes"] = PeakOf(e, Tier::kCpu).v;
  j["nvme_written_bytes"] = e.nvme_written.v;
  j["gpus"] = e.gpus;
  j["bound_s"] = e.bound_s;  // the resource bound: the least time the busiest resource allows
  j["bound_by"] = e.bound_by;
  return j;
}

std::string Json(const TuneArgs& a, const TuneSpace& space, const TuneResult& r) {
  nlohmann::ordered_json j;
  j["scenario"] = a.scenario;
  j["objective"] = a.objective;
  j["seed"] = a.tune.seed;
  j["simulations"] = r.simulations;
  j["seconds"] = r.seconds;
  j["start"] = PointJson(r.points[static_cast<size_t>(r.start)]);
  j["best"] = r.best >= 0 ? PointJson(r.points[static_cast<size_t>(r.best)]) : nlohmann::ordered_json();
  auto front = nlohmann::ordered_json::array();
  for (int i : ParetoFront(r.points)) front.push_back(PointJson(r.points[static_cast<size_t>(i)]));
  j["front"] = front;
  if (a.repair && r.best >= 0) {
    auto changes = nlohmann::ordered_json::array();
    for (const Change& c : RepairChanges(space, r, UnitOf(a)))
      changes.push_back({{"key", c.key}, {"from", c.from}, {"to", c.to}, {"without_it", c.without_it}});
    j["repair"] = changes;
  }
  auto all = nlohmann::ordered_json::array();
  for (const auto& e : r.points) all.push_back(PointJson(e));
  j["points"] = all;
  return j.dump(2) + "\n";
}

// Nothing ran: the evaluated point with the fewest capacity violations.
int NothingRuns(const TuneResult& r) {
  int closest = -1;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& e = r.points[i];
    if (!e.refused && !e.fits &&
        (closest < 0 || e.violations.size() < r.points[static_cast<size_t>(closest)].violations.size()))
      closest = static_cast<int>(i);
  }
  std::cerr << "strata: no point of the search space runs (" << r.points.size() << " tried)\n";
  if (closest >= 0) {
    const auto& e = r.points[static_cast<size_t>(closest)];
    std::cerr << "the closest point (" << e.violations.size() << " violations), from the scenario as given: "
              << (r.start >= 0 ? Changes(r.points[static_cast<size_t>(r.start)].setting, e.setting) : "") << "\n";
    for (const auto& v : e.violations) std::cerr << "  " << v.message << "\n";
  } else if (!r.points.empty()) {
    std::cerr << "  e.g. " << r.points.front().why << "\n";
  }
  return 1;
}

}  // namespace

Runner AddTune(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand("tune", "Search ZeRO, offload, batch and parallel settings for the fastest that runs");
  AddCommon(cmd, *a, nullptr);
  cmd->add_option("--budget", a->tune.budget, "Simulations at most (default 60)")->check(CLI::PositiveNumber);
  cmd->add_option("--time", a->tune.seconds, "Stop after SECONDS of searching")->check(CLI::PositiveNumber);
  cmd->add_option("--objective", a->objective,
                  "samples_per_s (default), tokens_per_s, or cost (samples per dollar: needs --gpu-hour-price)")
      ->check(CLI::IsMember({"samples_per_s", "tokens_per_s", "cost"}));
  cmd->add_option("--gpu-hour-price", a->tune.gpu_hour_price, "Dollars per GPU-hour, for --objective cost")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--search", a->search,
                  "KEY=V1,V2,... or A:B:*F: the values tried for a key (repeatable; replaces the default range)");
  cmd->add_option("--fix", a->fix, "KEY=V: hold a key at V (repeatable; the search leaves it)");
  cmd->add_option("-o", a->out_dir,
                  "DIR: write the best point as DIR/ds_config.json (a DeepSpeed config) and DIR/scenario.yaml, "
                  "every point evaluated as DIR/front.csv, and the front as DIR/front.png");
  cmd->add_flag("--repair", a->repair,
                "From a scenario that does not run: the nearest point that does (fewest keys changed, then fastest), "
                "each change with the check that forced it");
  cmd->add_flag("--only", a->only, "Search the --search keys alone; every other key stays as the scenario has it");
  cmd->add_option("--method", a->method,
                  "descent (default: coordinate descent and random restarts), random (the baseline), or bound "
                  "(every point planned, then simulated least resource bound first)")
      ->check(CLI::IsMember({"descent", "random", "bound"}));
  cmd->add_option("--seed", a->tune.seed, "Seed of the random restarts (default 1)");
  cmd->add_option("--jobs,-j", a->tune.jobs, "Points planned and simulated at once (default: the number of cores)")
      ->check(CLI::PositiveNumber);
  AddJitter(cmd, &a->tune.sim);
  a->tune.jobs = DefaultJobs();
  return [a]() {
    a->tune.objective = a->objective == "tokens_per_s" ? Objective::kTokensPerS
                        : a->objective == "cost"       ? Objective::kCost
                                                       : Objective::kSamplesPerS;
    if ((a->tune.objective == Objective::kCost) != (a->tune.gpu_hour_price > 0))
      return Fail(Status::InvalidArgument(a->tune.gpu_hour_price > 0
                                              ? "--gpu-hour-price is for --objective cost"
                                              : "--objective cost needs --gpu-hour-price DOLLARS (per GPU-hour)"));
    a->tune.method = a->method == "random" ? Method::kRandom : a->method == "bound" ? Method::kBound : Method::kDescent;
    auto space = BuildSpace(*a);
    if (!space.ok()) return Fail(space.status());
    if (a->tune.method == Method::kBound && SpaceSize(*space) > kMaxBoundPoints)
      return Fail(Status::InvalidArgument("--method bound plans every point: the space has " +
                                          std::to_string(SpaceSize(*space)) + ", more than " +
                                          std::to_string(kMaxBoundPoints) + "; narrow it with --only and --search"));
    if (a->repair && a->tune.method != Method::kDescent)
      return Fail(Status::InvalidArgument("--repair has its own search: no --method"));
    const TuneResult r = a->repair ? Repair(*a, *space, a->tune) : Tune(*a, *space, a->tune);
    if (r.best < 0) return NothingRuns(r);
    std::string written;
    if (!a->out_dir.empty()) {
      auto w = WriteTuneOutputs(*a, a->out_dir, *space, r);
      if (!w.ok()) return Fail(w.status());
      written = *w;
    }
    std::cout << (a->json     ? Json(*a, *space, r)
                  : a->repair ? RepairText(*a, *space, r) + written
                              : Text(*a, *space, r) + written);
    return 0;
  };
}

}  // namespace strata::cli
