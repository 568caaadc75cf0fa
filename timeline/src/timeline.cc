#include "strata/timeline/timeline.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <utility>

#include "strata/core/huge_pages.h"
#include "strata/timeline/critical_path.h"

namespace strata {

// A timeline holds one per op instance: tens of millions when every rank of
// a large run is simulated (docs/limits.md).
static_assert(sizeof(TimelineOp) == 32, "TimelineOp grew");

Bytes Timeline::Peak(Tier t) const {
  Bytes p;
  for (const auto& s : memory)
    if (s.tier == t) p = std::max(p, s.peak);
  return p;
}

std::vector<std::string> Overflows(const Timeline& t) {
  std::vector<std::string> out;
  for (Tier tier : kAllTiers) {
    const Bytes peak = t.Peak(tier), cap = t.capacity[static_cast<int>(tier)];
    if (cap.v <= 0 || peak <= cap) continue;
    out.push_back(std::string(TierName(tier)) + (tier == Tier::kGpu ? " (per GPU)" : " (per node)") + ": peak " +
                  FormatBytes(peak) + " exceeds the " + FormatBytes(cap) + " capacity by " + FormatBytes(peak - cap));
  }
  return out;
}

namespace {

struct MemEvent {
  double t;
  int order;  // frees (0) before allocs (1) at equal times
  int kind;
  int64_t delta;
  bool operator<(const MemEvent& o) const { return t != o.t ? t < o.t : order < o.order; }
};

MemorySeries Accumulate(Tier tier, int owner, const Bytes (&resident)[kNumStateKinds], std::vector<MemEvent>& ev) {
  std::stable_sort(ev.begin(), ev.end());
  MemorySeries s;
  s.tier = tier;
  s.owner = owner;
  MemoryPoint cur;
  std::copy(std::begin(resident), std::end(resident), std::begin(cur.by_kind));
  size_t times = 1;    // the points: one before the first event, one per distinct time after
  unsigned kinds = 0;  // the kinds the series holds: its columns
  for (int k = 0; k < kNumStateKinds; ++k) kinds |= (resident[k].v != 0 ? 1u : 0u) << k;
  for (size_t i = 0; i < ev.size(); ++i) {
    times += i == 0 || ev[i].t != ev[i - 1].t;
    kinds |= 1u << ev[i].kind;
  }
  s.points.reserve(times, kinds);  // exactly (grown by doubling, up to half of it had been spare)
  s.points.push_back(cur);
  s.peak = cur.total();
  for (size_t i = 0; i < ev.size();) {
    const double t = ev[i].t;
    // Apply every event at time t; the peak is taken after allocations.
    while (i < ev.size() && ev[i].t == t) {
      cur.by_kind[ev[i].kind] += Bytes(ev[i].delta);
      ++i;
    }
    cur.t = t;
    if (s.points.time(s.points.size() - 1) == t)
      s.points.set_back(cur);
    else
      s.points.push_back(cur);
    s.peak = std::max(s.peak, cur.total());
  }
  return s;
}

}  // namespace

Timeline BuildTimeline(const Plan& plan, std::vector<OpSpan> spans, std::string source) {
  std::vector<std::pair<int, int64_t>> counts;  // per rank present, ascending
  {
    std::vector<int64_t> n;
    for (const OpSpan& sp : spans) {
      if (sp.rank < 0) continue;  // Add refuses it
      if (static_cast<size_t>(sp.rank) >= n.size()) n.resize(static_cast<size_t>(sp.rank) + 1, 0);
      ++n[static_cast<size_t>(sp.rank)];
    }
    for (size_t r = 0; r < n.size(); ++r)
      if (n[r] > 0) counts.emplace_back(static_cast<int>(r), n[r]);
  }
  TimelineBuilder b(plan, std::move(source), counts);
  b.Add(spans.data(), spans.size());
  std::vector<OpSpan>().swap(spans);
  return std::move(b).Finish();
}

TimelineBuilder::TimelineBuilder(const Plan& plan, std::string source,
                                 const std::vector<std::pair<int, int64_t>>& counts)
    : plan_(plan), info_(plan.ops.size(), nullptr) {
  Timeline& t = t_;
  t.source = std::move(source);
  t.scenario = plan.scenario;
  t.world_size = plan.world_size;
  t.nodes = plan.nodes;
  t.gpus_per_node = plan.gpus_per_node;
  t.pipeline = plan.pipeline;
  t.model_flops = plan.model_flops;
  t.samples_per_iteration = plan.samples_per_iteration;
  for (int i = 0; i < kNumTiers; ++i) t.capacity[i] = plan.capacity[i];
  std::vector<std::pair<int, int64_t>> sorted = counts;  // the timeline's ops are by rank
  std::sort(sorted.begin(), sorted.end());
  int64_t total = 0;
  for (const auto& [rank, n] : sorted) {
    if (rank < 0 || n < 0) continue;
    if (static_cast<size_t>(rank) >= slot_of_rank_.size()) slot_of_rank_.resize(static_cast<size_t>(rank) + 1, -1);
    int& slot = slot_of_rank_[static_cast<size_t>(rank)];
    if (slot >= 0) continue;  // listed twice: the first count holds
    slot = static_cast<int>(begin_.size());
    begin_.push_back(total);
    next_.push_back(total);
    total += n;
    end_.push_back(total);
  }
  t.ops.reserve(static_cast<size_t>(total));
  AdviseHugePages(t.ops.data(), t.ops.capacity() * sizeof(TimelineOp));  // before the first write
  t.ops.resize(static_cast<size_t>(total));
}

bool TimelineBuilder::Add(const OpSpan* spans, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    const OpSpan& s = spans[k];
    if (s.op < 0 || static_cast<size_t>(s.op) >= plan_.ops.size() || s.rank < 0 ||
        static_cast<size_t>(s.rank) >= slot_of_rank_.size() || slot_of_rank_[static_cast<size_t>(s.rank)] < 0)
      return false;
    const size_t slot = static_cast<size_t>(slot_of_rank_[static_cast<size_t>(s.rank)]);
    if (next_[slot] == end_[slot]) return false;
    const Op& op = plan_.ops[s.op];
    const Bytes bytes(OpBytesOnRank(op, plan_.DataRank(s.rank)));
    const OpInfo*& first = info_[static_cast<size_t>(s.op)];
    if (first == nullptr) first = t_.Intern({op.kind, op.stream, op.layer, op.flops, op.name, bytes});
    const OpInfo* i = first;
    if (i->bytes != bytes) {  // another share of the op's bytes: an info of its own
      const OpInfo*& other = other_info_[{s.op, bytes.v}];
      if (other == nullptr) other = t_.Intern({op.kind, op.stream, op.layer, op.flops, op.name, bytes});
      i = other;
    }
    t_.ops[static_cast<size_t>(next_[slot]++)] = {s.rank, s.op, s.start_s, s.end_s, i};
    t_.iteration_s = std::max(t_.iteration_s, s.end_s);
  }
  return true;
}

Timeline TimelineBuilder::Finish() && {
  Timeline t = std::move(t_);
  const Plan& plan = plan_;
  // Each rank's slots, filled ones first, sorted by (start, op); slots left
  // empty are closed up (none when every span came).
  size_t out = 0;
  for (size_t r = 0; r < begin_.size(); ++r) {
    auto first = t.ops.begin() + begin_[r], last = t.ops.begin() + next_[r];
    std::sort(first, last, [](const TimelineOp& a, const TimelineOp& b) {
      return a.start_s != b.start_s ? a.start_s < b.start_s : a.op < b.op;
    });
    if (static_cast<int64_t>(out) != begin_[r])
      std::move(first, last, t.ops.begin() + static_cast<std::ptrdiff_t>(out));
    out += static_cast<size_t>(next_[r] - begin_[r]);
  }
  t.ops.resize(out);

  // Memory, node by node: the ops are sorted by rank, so a node's ranks are
  // one run of them; its events (GPU per rank, CPU and NVMe per node) are
  // accumulated and dropped before the next node's are made. (Every node's
  // events held at once had cost about as much as the ops themselves.)
  // Resident bytes per stage (a rank holds its stage's buffers).
  const int P = std::max(1, plan.pipeline);
  std::vector<std::array<std::array<Bytes, kNumStateKinds>, kNumTiers>> resident(static_cast<size_t>(P));
  for (const Buffer& b : plan.buffers)
    if (b.resident && b.stage >= 0 && b.stage < P)
      resident[static_cast<size_t>(b.stage)][static_cast<size_t>(b.tier)][static_cast<size_t>(b.kind)] += b.bytes;
  auto base_of = [&](int rank, Tier tier, Bytes(&base)[kNumStateKinds]) {
    const auto& res = resident[static_cast<size_t>(std::min(P - 1, plan.StageOf(rank)))][static_cast<size_t>(tier)];
    for (int k = 0; k < kNumStateKinds; ++k) base[k] += res[static_cast<size_t>(k)];
  };
  std::vector<MemorySeries> series[kNumTiers];  // GPU per rank, then CPU and NVMe per node
  // Series alike in kinds and bytes (ranks that run the same plan) share
  // their values as they are made (memory_points.h): a time per point each.
  std::unordered_map<uint64_t, std::vector<std::pair<int, size_t>>> alike;  // values hash -> (tier, index)
  auto add = [&](int k, MemorySeries m) {
    auto& candidates = alike[m.points.ValuesHash()];
    bool shared = false;
    for (const auto& [tier, j] : candidates)
      if ((shared = m.points.ShareValues(series[tier][j].points))) break;
    if (!shared) candidates.emplace_back(k, series[k].size());
    series[k].push_back(std::move(m));
  };
  std::vector<MemEvent> gpu_ev, node_ev[kNumTiers];
  for (size_t i = 0; i < t.ops.size();) {
    const int node = t.ops[i].rank / plan.gpus_per_node;
    for (auto& e : node_ev) e.clear();
    Bytes node_base[kNumTiers][kNumStateKinds] = {};
    while (i < t.ops.size() && t.ops[i].rank / plan.gpus_per_node == node) {
      const int rank = t.ops[i].rank;
      gpu_ev.clear();
      for (; i < t.ops.size() && t.ops[i].rank == rank; ++i) {
        const TimelineOp& s = t.ops[i];
        const Op& op = plan.ops[s.op];
        auto events = [&](const Buffer& b) -> std::vector<MemEvent>& {
          return b.tier == Tier::kGpu ? gpu_ev : node_ev[static_cast<int>(b.tier)];
        };
        for (BufferId id : op.allocs) {
          const Buffer& b = plan.buffers[id];
          events(b).push_back({s.start_s, 1, static_cast<int>(b.kind), b.bytes.v});
        }
        for (BufferId id : op.frees) {
          const Buffer& b = plan.buffers[id];
          events(b).push_back({s.end_s, 0, static_cast<int>(b.kind), -b.bytes.v});
        }
      }
      Bytes base[kNumStateKinds] = {};
      base_of(rank, Tier::kGpu, base);
      add(0, Accumulate(Tier::kGpu, rank, base, gpu_ev));
      base_of(rank, Tier::kCpu, node_base[static_cast<int>(Tier::kCpu)]);
      base_of(rank, Tier::kNvme, node_base[static_cast<int>(Tier::kNvme)]);
    }
    for (Tier tier : {Tier::kCpu, Tier::kNvme}) {
      const int k = static_cast<int>(tier);
      add(k, Accumulate(tier, node, node_base[k], node_ev[k]));
    }
  }
  for (auto& v : series)
    for (MemorySeries& m : v) t.memory.push_back(std::move(m));
  if (!t.ops.empty()) {
    t.critical_rank = t.ops.front().rank;
    CriticalPath path = AnalyzeCriticalPath(plan, t, t.critical_rank);
    t.critical_path = std::move(path.ops);
    t.critical_path_ranks = std::move(path.ranks);
  }
  return t;
}

std::string_view TimeClassName(TimeClass c) {
  static constexpr std::array<std::string_view, kNumTimeClasses> kNames = {
      "compute", "h2d", "d2h", "nvme_read", "nvme_write", "collective", "cpu_optimizer", "host", "idle"};
  return kNames[static_cast<int>(c)];
}

TimeClass TimeClassOf(const TimelineOp& op) {
  // A collective or a pipeline transfer is communication whatever its
  // stream (tensor parallelism's and the pipeline's run on the compute
  // stream, which waits for them).
  if (IsCollective(op.kind()) || IsPointToPoint(op.kind())) return TimeClass::kCollective;
  // A copy is a copy on any stream (DeepSpeed's CPU checkpoints are copied
  // on the compute stream, which waits for them).
  if (op.kind() == OpKind::kCopyH2D) return TimeClass::kH2D;
  if (op.kind() == OpKind::kCopyD2H) return TimeClass::kD2H;
  switch (op.stream()) {
    case Stream::kCompute:
      return TimeClass::kCompute;
    case Stream::kH2D:
      return TimeClass::kH2D;
    case Stream::kD2H:
      return TimeClass::kD2H;
    case Stream::kNvmeRead:
      return TimeClass::kNvmeRead;
    case Stream::kNvmeWrite:
      return TimeClass::kNvmeWrite;
    case Stream::kComm:
      return TimeClass::kCollective;
    case Stream::kCpuOptim:
      return TimeClass::kCpuOptimizer;
    case Stream::kHost:
      return TimeClass::kHost;
  }
  return TimeClass::kIdle;
}

TimeBreakdown AnalyzeTimeline(const Timeline& t, int rank) {
  // Sweep over interval boundaries of this rank's ops.
  struct Edge {
    double t;
    int cls;
    int delta;
  };
  std::vector<Edge> edges;
  for (const auto& op : t.ops) {
    if (op.rank != rank || op.end_s <= op.start_s) continue;
    const int c = static_cast<int>(TimeClassOf(op));
    edges.push_back({op.start_s, c, +1});
    edges.push_back({op.end_s, c, -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  TimeBreakdown r;
  int active[kNumTimeClasses] = {};
  double prev = 0;
  auto account = [&](double dt) {
    if (dt <= 0) return;
    int n = 0;
    for (int c = 0; c < kNumTimeClasses; ++c)
      if (active[c] > 0) {
        r.busy[c] += dt;
        if (c != 0) ++n;
      }
    if (active[0] > 0) {
      r.seconds[0] += dt;
    } else if (n == 0) {
      r.seconds[static_cast<int>(TimeClass::kIdle)] += dt;
    } else {
      for (int c = 1; c < kNumTimeClasses; ++c)
        if (active[c] > 0) r.seconds[c] += dt / n;
    }
  };
  for (size_t i = 0; i < edges.size();) {
    const double now = edges[i].t;
    account(now - prev);
    while (i < edges.size() && edges[i].t == now) {
      active[edges[i].cls] += edges[i].delta;
      ++i;
    }
    prev = now;
  }
  account(t.iteration_s - prev);
  int best = 0;
  for (int c = 1; c < kNumTimeClasses - 1; ++c)
    if (r.seconds[c] > r.seconds[best]) best = c;
  r.bottleneck = static_cast<TimeClass>(best);
  return r;
}

PipelineBubble AnalyzePipeline(const Timeline& t) {
  PipelineBubble b;
  const int P = std::max(1, t.pipeline);
  const int per_stage = std::max(1, t.world_size / P);
  b.busy_s.assign(static_cast<size_t>(P), 0.0);
  b.bubble.assign(static_cast<size_t>(P), 0.0);
  double first = 0, last = 0;
  bool any = false;
  for (const TimelineOp& op : t.ops) {
    // A stage's pipeline work: what its compute stream runs for the micro
    // batches (the passes, tensor-parallel collectives, sends), not the
    // optimizer step.
    if (op.rank % per_stage != 0 || op.stream() != Stream::kCompute || op.kind() == OpKind::kOptimizerStep ||
        op.kind() == OpKind::kRecv)
      continue;
    b.busy_s[static_cast<size_t>(std::min(P - 1, op.rank / per_stage))] += op.end_s - op.start_s;
    first = any ? std::min(first, op.start_s) : op.start_s;
    last = any ? std::max(last, op.end_s) : op.end_s;
    any = true;
  }
  b.span_s = last - first;
  if (b.span_s <= 0) return b;
  for (int s = 0; s < P; ++s) {
    b.bubble[static_cast<size_t>(s)] = 1 - b.busy_s[static_cast<size_t>(s)] / b.span_s;
    b.fraction += b.bubble[static_cast<size_t>(s)] / P;
  }
  return b;
}

}  // namespace strata
