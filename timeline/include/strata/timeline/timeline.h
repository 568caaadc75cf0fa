// The timeline: what happened when a plan ran, simulated or for real. Shared
// by the simulator and the executor (which never include each other) and read
// by the GUI. Times are seconds from the start of the iteration.
//
// Ops are instances of plan ops on a rank. Memory is per tier and owner (GPU:
// per rank; CPU and NVMe: per node, summing the node's ranks present in the
// timeline), derived from the plan's memory effects: a buffer counts from the
// start of the op that allocates it to the end of the op that frees it;
// resident buffers count throughout.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/plan/plan.h"
#include "strata/timeline/memory_points.h"

namespace strata {

// One op instance as measured or simulated.
struct OpSpan {
  int32_t rank = 0;
  OpId op = 0;
  double start_s = 0;
  double end_s = 0;
  bool operator==(const OpSpan&) const = default;
};

// What instances of a plan op share: kind, stream, layer, FLOPs, name, and
// the bytes moved on the instance's rank. The timeline holds one per plan
// op, and one more for each other byte count its ranks move (a partition's
// last share); each instance points to its own: a timeline of millions of
// instances had carried them in each (88 bytes an instance; 32 now).
struct OpInfo {
  OpKind kind = OpKind::kForward;
  Stream stream = Stream::kCompute;
  int layer = -1;
  double flops = 0;
  std::string name;
  Bytes bytes;
};
inline const OpInfo kNoOpInfo{};

// Append-only; a deque keeps every element's address, which the ops hold.
using OpInfos = std::deque<OpInfo>;

struct TimelineOp {
  int rank = 0;
  OpId op = 0;
  double start_s = 0;
  double end_s = 0;
  const OpInfo* info = &kNoOpInfo;  // never null: kNoOpInfo, or one of its timeline's infos

  Bytes bytes() const { return info->bytes; }  // on this rank (a partition's share differs by rank)
  OpKind kind() const { return info->kind; }
  Stream stream() const { return info->stream; }
  int layer() const { return info->layer; }
  double flops() const { return info->flops; }
  const std::string& name() const { return info->name; }
};

struct MemorySeries {
  Tier tier = Tier::kGpu;
  int owner = 0;        // rank (gpu) or node (cpu, nvme)
  MemoryPoints points;  // step function: value holds until the next point
  Bytes peak;
};

struct Timeline {
  std::string source;  // "simulate" or "run"
  std::string scenario;
  int world_size = 1;
  int nodes = 1;
  int gpus_per_node = 1;
  int pipeline = 1;  // pipeline stages (plan.pipeline): world / pipeline ranks each
  double iteration_s = 0;
  double model_flops = 0;  // per rank per iteration (plan.model_flops)
  int64_t samples_per_iteration = 0;
  Bytes capacity[kNumTiers];
  std::vector<TimelineOp> ops;  // sorted by (rank, start, op)
  // What the ops' infos point to. Shared by a timeline's copies, so their
  // ops stay valid; Intern while building a timeline, not on a copy that
  // another thread reads.
  std::shared_ptr<OpInfos> infos = std::make_shared<OpInfos>();
  const OpInfo* Intern(OpInfo info) {
    if (!infos) infos = std::make_shared<OpInfos>();  // a moved-from timeline
    infos->push_back(std::move(info));
    return &infos->back();
  }
  std::vector<MemorySeries> memory;  // gpu series per rank, then cpu and nvme per node
  // Where it came from (set by the CLI; empty when unknown): the scenario
  // path, the files and overrides applied to it, Strata's version.
  std::string strata_version, scenario_path;
  std::vector<std::pair<std::string, std::string>> overrides;  // (key, value): --set, --deepspeed, --hardware
  // Report lines its producer adds beside the spans (the NVMe drives' wear,
  // cost/endurance.h WearText): the GUI's summary shows them.
  std::vector<std::string> notes;
  // The critical path from the first rank's last op, first to last
  // (AnalyzeCriticalPath; empty when not analyzed, e.g. read from a trace
  // without it): op ids, and the rank of each (it moves to another rank at
  // a collective that waited for it, or at a pipeline receive).
  int critical_rank = 0;
  std::vector<OpId> critical_path;
  std::vector<int> critical_path_ranks;  // parallel to critical_path
  // Peak over all series of a tier.
  Bytes Peak(Tier t) const;
};

// The tiers whose peak exceeds their capacity (a capacity of 0 is unknown,
// never exceeded), one sentence each: "gpu (per GPU): peak 213 GiB exceeds
// the 80 GiB capacity by 133 GiB". Empty when the iteration fits.
std::vector<std::string> Overflows(const Timeline& t);

// Builds the timeline of `plan` from op spans (any order; every op of every
// listed rank should appear once).
Timeline BuildTimeline(const Plan& plan, std::vector<OpSpan> spans, std::string source);

// BuildTimeline for spans that arrive in batches (a simulation's child
// streams millions of them): each batch becomes ops at once, in its rank's
// slots, so the spans are never all held beside the ops, and the ops are
// sorted rank by rank at the end instead of all at once. The timeline is
// BuildTimeline's for the same spans.
class TimelineBuilder {
 public:
  // `counts`: each rank that has ops, ascending, with how many it has.
  TimelineBuilder(const Plan& plan, std::string source, const std::vector<std::pair<int, int64_t>>& counts);
  // False, adding nothing more, when a span names no plan op, a rank not in
  // `counts`, or one of a rank that has all its ops already.
  bool Add(const OpSpan* spans, size_t n);
  // The timeline of the spans added (a rank's slots not filled are dropped).
  Timeline Finish() &&;

 private:
  const Plan& plan_;
  Timeline t_;
  std::vector<int> slot_of_rank_;            // rank -> index into begin_/next_/end_, -1 if none
  std::vector<int64_t> begin_, next_, end_;  // per rank of `counts`: its slots in t_.ops
  std::vector<const OpInfo*> info_;          // per plan op, made on its first instance
  // Per (plan op, bytes) whose bytes differ from info_'s (a rank's share).
  std::map<std::pair<OpId, int64_t>, const OpInfo*> other_info_;
};

// Where the iteration's time went on one rank: compute-busy time, and for the
// rest of the iteration the transfer classes active while compute was idle
// ("exposed"), split evenly when several are active at once.
// kHost: the host stream's hooks (Stream::kHost).
enum class TimeClass { kCompute, kH2D, kD2H, kNvmeRead, kNvmeWrite, kCollective, kCpuOptimizer, kHost, kIdle };
inline constexpr int kNumTimeClasses = 9;
std::string_view TimeClassName(TimeClass c);
TimeClass TimeClassOf(const TimelineOp& op);

struct TimeBreakdown {
  double seconds[kNumTimeClasses] = {};        // compute busy, exposed per class, idle
  double busy[kNumTimeClasses] = {};           // total active time per class (overlapped or not)
  TimeClass bottleneck = TimeClass::kCompute;  // the largest of compute and the exposed classes
};
TimeBreakdown AnalyzeTimeline(const Timeline& t, int rank = 0);

// The pipeline bubble (Timeline::pipeline > 1), from the first rank of each
// stage: the span from the first to the last pipeline op of any stage, and
// each stage's work in it. A stage's pipeline work is what its compute
// stream runs for the micro batches: the passes, and the tensor-parallel
// collectives and the sends that stream waits for (not the optimizer step).
// A stage's bubble is the rest of the span; the pipeline's is their mean.
// Equal stages and free transfers give 1F1B's (P - 1) / (m + P - 1)
// (Narayanan et al., SC'21). Stages with no rank in the timeline count 0.
struct PipelineBubble {
  double span_s = 0;
  std::vector<double> busy_s;  // per stage
  std::vector<double> bubble;  // per stage: 1 - busy / span
  double fraction = 0;         // mean over the stages
};
PipelineBubble AnalyzePipeline(const Timeline& t);

}  // namespace strata
