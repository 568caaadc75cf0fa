// strata tune's search (private to the CLI): a space of knobs (scenario
// keys and the values to try), points pruned by planning and validating
// them before any simulation, and coordinate descent from the scenario's
// own values with seeded random restarts. docs/tune.md.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "strata/report/line_plot.h"
#include "strata/simulator/sim_report.h"

namespace strata::cli {

// One scenario key and the values tried for it. `relevant` says whether the
// key changes anything at a point (offload_param's buffers only when
// parameters are on NVMe): where it does not, the point holds `neutral`
// (empty: the scenario's own value) and the search does not vary it.
struct Knob {
  std::string key;
  std::vector<std::string> values;
  std::function<bool(const std::map<std::string, std::string>&)> relevant;
  std::string neutral;
};

// The micro batch knob: gradient_accumulation_steps follows it (and the
// tensor and pipeline degrees) so that micro x accumulation x data-parallel
// ranks stays the scenario's global batch.
inline constexpr const char* kMicroBatchKey = "training.micro_batch_size";

// A point: one value per knob, by key.
using Setting = std::map<std::string, std::string>;

struct Evaluated {
  Setting setting;
  // Pruned before simulation: a config DeepSpeed or Strata refuses (the
  // message), or a plan that does not fit (its violations).
  bool refused = false, fits = true, simulated = false;
  std::string why;
  std::vector<Violation> violations;
  sim::SimSummary summary;
  // Set for a point that would run (its plan fits):
  Bytes nvme_written;  // per GPU per iteration: the plan's NVMe writes
  int gpus = 0;        // the point's hardware.world_size() (once simulated)
  // The plan's resource bound (cost/bound.h): the least iteration time its
  // busiest resource allows, the cheap proxy --method bound ranks by.
  double bound_s = 0;
  std::string bound_by;
  double objective = 0;
};

struct TuneSpace {
  std::vector<Knob> knobs;
  Setting start;  // the scenario's own value of every knob
  // The scenario's value of every key of the default space, searched or
  // not (--only, --fix): what relevance reads where a point has no value.
  Setting context;
  int64_t global_batch = 1;
  int nodes = 1, gpus_per_node = 1;  // the scenario's
  // The scenario's own micro batch and degrees, for points without those knobs.
  int64_t micro = 1, tensor = 1, pipeline = 1;
};

// The default space for `s` (docs/tune.md lists it): keys the scenario's
// hardware and model make meaningful, each with the scenario's own value
// among its values.
TuneSpace DefaultSpace(const Scenario& s);

// What the search maximises. kCost: samples per dollar, from the GPU-hour
// price (TuneOptions); it ranks points apart from samples/s only where the
// number of GPUs varies (hardware.nodes or gpus_per_node searched).
enum class Objective { kSamplesPerS, kTokensPerS, kCost };

// How points are chosen (docs/tune.md "How it searches", and the measured
// comparison in "Quality"):
//   kDescent  coordinate descent from the start, then from seeded random
//             points (the default);
//   kRandom   seeded random points, the baseline;
//   kBound    every point of the space planned (no simulation), then
//             simulated in order of their resource bound, least first: a
//             cheap proxy before the exact replay.
enum class Method { kDescent, kRandom, kBound };

// Points in the product of the knobs' values (saturates at INT64_MAX).
int64_t SpaceSize(const TuneSpace& space);
inline constexpr int64_t kMaxBoundPoints = 20000;  // --method bound plans them all

struct TuneOptions {
  Method method = Method::kDescent;
  int budget = 60;     // simulations at most
  double seconds = 0;  // wall-time limit (0: none)
  uint64_t seed = 1;   // random restarts
  int jobs = 1;        // simulations at once
  Objective objective = Objective::kSamplesPerS;
  double gpu_hour_price = 0;  // dollars per GPU-hour (kCost)
  sim::SimOptions sim;
  bool progress = true;  // a line on stderr per descent step
};

struct TuneResult {
  std::vector<Evaluated> points;  // every point evaluated, in evaluation order
  int start = -1, best = -1;      // indices into points; best -1: nothing fits
  int simulations = 0;
  double seconds = 0;
};

// The keys whose values differ between two points of a space, in key order.
std::vector<std::string> ChangedKeys(const Setting& from, const Setting& to);

// Whether knob `k` changes anything at `p` (read over the space's context).
bool Relevant(const TuneSpace& space, const Knob& k, const Setting& p);

// `p` with every knob that is not relevant there at its neutral value.
Setting Normalize(const TuneSpace& space, Setting p);

// The --set overrides that realise `p` (with gradient_accumulation_steps
// derived for the micro batch), or why none do (the batch does not divide).
Result<std::vector<std::pair<std::string, std::string>>> PointOverrides(const TuneSpace& space, const Setting& p);

// Searches `space` from its start. Deterministic for a seed, whatever jobs.
TuneResult Tune(const CommonArgs& args, const TuneSpace& space, const TuneOptions& o);

// The nearest point that runs to a start that does not: the fewest knobs
// changed (one, then two), then the fastest. best -1: none within two
// changes (or the budget); best == start: it runs as given.
TuneResult Repair(const CommonArgs& args, const TuneSpace& space, const TuneOptions& o);

// Indices of the simulated points on the Pareto front of iteration time,
// peak GPU memory, peak CPU memory and NVMe bytes written (all minimised),
// fastest first.
std::vector<int> ParetoFront(const std::vector<Evaluated>& points);

inline Bytes PeakOf(const Evaluated& e, Tier t) { return e.summary.peak[static_cast<int>(t)]; }

// Every point evaluated as CSV: the knobs, the verdict (runs, refused,
// does_not_fit) and why, the figures, and whether it is on the front.
std::string FrontCsv(const TuneSpace& space, const TuneResult& r);

// The simulated points as a scatter of iteration time against peak GPU
// memory, the Pareto front and the best point drawn over them.
LinePlot FrontPlot(const std::string& scenario, const TuneResult& r);

// -o DIR: the best point as DIR/ds_config.json and DIR/scenario.yaml,
// every point as DIR/front.csv, the front as DIR/front.png (a warning on
// stderr, not a failure, where strata-plot is not built). Returns lines
// saying what was written.
Result<std::string> WriteTuneOutputs(const CommonArgs& a, const std::string& dir, const TuneSpace& space,
                                     const TuneResult& r);

}  // namespace strata::cli
