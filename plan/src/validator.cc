#include "strata/plan/validator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <tuple>

#include "hazards.h"
#include "strata/plan/fresh_bytes.h"
#include "strata/plan/op_regions.h"

namespace strata {
namespace {

class Validator {
 public:
  Validator(const Plan& p, int max_per_kind) : p_(p), max_(max_per_kind) {}

  ValidationReport Run() {
    if (CheckReferences()) {
      std::vector<OpId> order = TopologicalOrder();
      if (!order.empty()) {
        ReplayMemory(order);
        CheckLifetimesOrdered(order);
        if (count_["order"] == 0) CheckFreshBytes();
      }
    }
    return std::move(r_);
  }

 private:
  void Add(Violation v) {
    if (count_[v.kind]++ < max_) r_.violations.push_back(std::move(v));
  }
  void Add(const std::string& kind, std::string msg, OpId op = -1, BufferId buf = -1) {
    Violation v;
    v.kind = kind;
    v.message = std::move(msg);
    v.op = op;
    v.buffer = buf;
    Add(std::move(v));
  }
  std::string OpName(OpId id) const { return "op " + std::to_string(id) + " '" + p_.ops[id].name + "'"; }
  std::string BufName(BufferId id) const {
    const Buffer& b = p_.buffers[id];
    return "buffer " + std::to_string(id) + " '" + b.name + "' (" + std::string(TierName(b.tier)) + ")";
  }

  // A delayed update (RunSpec::delayed_warmup; docs/dpu.md). An executor
  // swaps the memory of the step's gradient buffer (the pending one) and
  // delayed_grads after each step, and runs a warm-up step's ops in two
  // passes, the step's phase last. So: one pending buffer, read by the
  // steps alone, and delayed_grads written by the iteration, both resident
  // gradient buffers in memory alike (stage, tier, size, pinning), and no
  // op outside the step's phase waits for one inside it. Runs after the
  // references are known good (ids are indices).
  void CheckDelayed() {
    const RunSpec& r = p_.run;
    if (r.delayed_warmup < 0 && r.delayed_grads < 0) return;
    const auto nb = static_cast<BufferId>(p_.buffers.size());
    if (r.delayed_warmup < 0 || r.delayed_grads < 0 || r.delayed_grads >= nb) {
      Add("delayed_update", "delayed_warmup " + std::to_string(r.delayed_warmup) + " with delayed_grads " +
                                std::to_string(r.delayed_grads) + ": both or neither, and a buffer of the plan");
      return;
    }
    const BufferId gi = r.delayed_grads;
    BufferId pending = -1;
    for (const Op& op : p_.ops) {
      if (op.kind != OpKind::kOptimizerStep || op.phase != Phase::kStep) continue;
      if (op.grad_in.buffer < 0 || op.grad_in.buffer >= nb) {
        Add("delayed_update", OpName(op.id) + " names no gradient buffer (grad_in)", op.id);
        return;
      }
      if (pending < 0) pending = op.grad_in.buffer;
      if (op.grad_in.buffer != pending)
        Add("delayed_update", OpName(op.id) + " reads its gradients from another buffer than the first step's", op.id);
    }
    if (pending < 0) return Add("delayed_update", "a delayed update without an optimizer step of phase step");
    const Buffer &g = p_.buffers[gi], &pb = p_.buffers[pending];
    auto alike = [](const Buffer& b) { return b.resident && b.kind == StateKind::kGrad && b.tier != Tier::kNvme; };
    if (pending == gi || !alike(g) || !alike(pb) || pb.tier != g.tier || pb.bytes != g.bytes ||
        pb.stage != g.stage || pb.pinned != g.pinned)
      Add("delayed_update",
          BufName(pending) + " (the steps' gradients) and " + BufName(gi) +
              " (delayed_grads) cannot swap: two resident gradient buffers in memory, of one stage, tier, size and "
              "pinning",
          -1, pending);
    bool filled = false;
    for (const Op& op : p_.ops) {
      auto names = [&](BufferId b) {
        return std::find(op.reads.begin(), op.reads.end(), b) != op.reads.end() ||
               std::find(op.writes.begin(), op.writes.end(), b) != op.writes.end();
      };
      if (op.kind != OpKind::kOptimizerStep && names(pending))
        Add("delayed_update", OpName(op.id) + " touches " + BufName(pending) + ", which only the step reads", op.id);
      filled = filled || std::find(op.writes.begin(), op.writes.end(), gi) != op.writes.end();
      if (op.phase != Phase::kStep)
        for (OpId d : op.deps)
          if (p_.ops[d].phase == Phase::kStep)
            Add("delayed_update",
                OpName(op.id) + " waits for " + OpName(d) + " of the step's phase, which a warm-up step runs last",
                op.id);
    }
    if (!filled) Add("delayed_update", "no op writes " + BufName(gi) + " (delayed_grads)", -1, gi);
  }

  bool CheckReferences() {
    bool ok = true;
    const auto nb = static_cast<BufferId>(p_.buffers.size());
    const auto no = static_cast<OpId>(p_.ops.size());
    if (p_.pipeline < 1 || p_.world_size < 1 || p_.world_size % p_.pipeline != 0) {
      Add("reference",
          "pipeline " + std::to_string(p_.pipeline) + " does not divide world_size " + std::to_string(p_.world_size));
      return false;
    }
    for (BufferId i = 0; i < nb; ++i)
      if (const int st = p_.buffers[i].stage; st < 0 || st >= p_.pipeline) {
        Add("reference", "buffer at index " + std::to_string(i) + " is on stage " + std::to_string(st) + " of " +
                             std::to_string(p_.pipeline));
        ok = false;
      }
    for (BufferId i = 0; i < nb; ++i)
      if (!p_.buffers[i].backed && !p_.buffers[i].resident)
        Add("unbacked", BufName(i) + " is counted but never allocated, so it must be resident", -1, i);
    // An NVMe buffer names its swap directory (RunSpec::nvme_dirs); no
    // other does.
    for (BufferId i = 0; i < nb; ++i) {
      const Buffer& b = p_.buffers[i];
      const bool nvme = b.tier == Tier::kNvme;
      if (nvme ? b.nvme_dir < 0 || b.nvme_dir >= static_cast<int>(p_.run.nvme_dirs.size()) : b.nvme_dir != -1)
        Add("reference",
            BufName(i) + " has swap directory " + std::to_string(b.nvme_dir) + " of " +
                std::to_string(p_.run.nvme_dirs.size()) + (nvme ? "" : " (only NVMe buffers have one)"),
            -1, i);
    }
    for (BufferId i = 0; i < nb; ++i)
      if (p_.buffers[i].id != i) {
        Add("reference", "buffer at index " + std::to_string(i) + " has id " + std::to_string(p_.buffers[i].id));
        ok = false;
      }
    for (OpId i = 0; i < no; ++i) {
      const Op& op = p_.ops[i];
      if (op.id != i) {
        Add("reference", "op at index " + std::to_string(i) + " has id " + std::to_string(op.id));
        ok = false;
        continue;
      }
      for (OpId d : op.deps)
        if (d < 0 || d >= no || d == i) {
          Add("reference", OpName(i) + " depends on missing op " + std::to_string(d), i);
          ok = false;
        }
      for (const auto* list : {&op.allocs, &op.frees, &op.reads, &op.writes})
        for (BufferId b : *list) {
          if (b < 0 || b >= nb) {
            Add("reference", OpName(i) + " names missing buffer " + std::to_string(b), i);
            ok = false;
          } else if (!p_.buffers[b].backed)
            Add("unbacked", OpName(i) + " names " + BufName(b) + ", which is counted but never allocated", i, b);
        }
      CheckRegions(op, ok);
      if (IsCollective(op.kind) && (op.group < 0 || op.group >= static_cast<int>(p_.groups.size()))) {
        Add("reference", OpName(i) + " is a collective without a valid group", i);
        ok = false;
      }
      if (!CheckStages(op)) ok = false;
      CheckHostOp(op, i);
    }
    if (ok) CheckDelayed();
    return ok;
  }

  // Pipeline stages (plan.h): an op uses its own stage's buffers and
  // depends on its own stage's ops, except a receive, which depends on one
  // send of its peer stage with the same bytes.
  bool CheckStages(const Op& op) {
    const int P = p_.pipeline;
    if (op.stage < 0 || op.stage >= P) {
      Add("reference", OpName(op.id) + " is on stage " + std::to_string(op.stage) + " of " + std::to_string(P), op.id);
      return false;
    }
    bool ok = true;
    for (const auto* list : {&op.allocs, &op.frees, &op.reads, &op.writes})
      for (BufferId b : *list)
        if (b >= 0 && b < static_cast<BufferId>(p_.buffers.size()) && p_.buffers[b].stage != op.stage) {
          Add("reference",
              OpName(op.id) + " (stage " + std::to_string(op.stage) + ") uses " + BufName(b) + " of stage " +
                  std::to_string(p_.buffers[b].stage),
              op.id, b);
          ok = false;
        }
    const bool p2p = IsPointToPoint(op.kind);
    if (p2p && (op.peer_stage < 0 || op.peer_stage >= P || op.peer_stage == op.stage)) {
      Add("reference", OpName(op.id) + " sends or receives without a valid peer stage", op.id);
      return false;
    }
    int sends = 0;
    for (OpId d : op.deps) {
      if (d < 0 || d >= static_cast<OpId>(p_.ops.size())) continue;  // reported as a reference
      const Op& dep = p_.ops[d];
      if (dep.stage == op.stage) continue;
      if (op.kind == OpKind::kRecv && dep.kind == OpKind::kSend && dep.stage == op.peer_stage &&
          dep.peer_stage == op.stage && dep.bytes == op.bytes) {
        ++sends;
        continue;
      }
      Add("reference",
          OpName(op.id) + " (stage " + std::to_string(op.stage) + ") depends on " + OpName(d) + " of stage " +
              std::to_string(dep.stage) + ": only a receive may depend on its send across stages",
          op.id);
      ok = false;
    }
    if (op.kind == OpKind::kRecv && sends != 1) {
      Add("reference",
          OpName(op.id) + " depends on " + std::to_string(sends) + " matching sends of stage " +
              std::to_string(op.peer_stage) + " (a receive needs one, of the same bytes)",
          op.id);
      ok = false;
    }
    return ok;
  }

  // Every region lies inside its buffer, and the op declares the buffer:
  // sources and compute/optimizer inputs in reads, destinations in writes.
  void CheckRegions(const Op& op, bool& ok) {
    const auto nb = static_cast<BufferId>(p_.buffers.size());
    auto listed = [](const std::vector<BufferId>& v, BufferId b) {
      return std::find(v.begin(), v.end(), b) != v.end();
    };
    auto check = [&](const Region& r, const char* what, bool write, int) {
      if (!r.valid() || r.buffer == kOpOutput) return;
      if (r.buffer < 0 || r.buffer >= nb) {
        Add("reference", OpName(op.id) + " " + what + " names missing buffer " + std::to_string(r.buffer), op.id);
        ok = false;
        return;
      }
      const Buffer& b = p_.buffers[r.buffer];
      if (r.offset.v < 0 || r.bytes.v < 0 || r.end() > b.bytes)
        Add("layout",
            OpName(op.id) + " " + what + " [" + std::to_string(r.offset.v) + ", +" + std::to_string(r.bytes.v) +
                ") lies outside " + BufName(r.buffer) + " of " + std::to_string(b.bytes.v) + " bytes",
            op.id, r.buffer);
      const bool declared = write ? listed(op.writes, r.buffer) || listed(op.allocs, r.buffer)
                                  : listed(op.reads, r.buffer) || listed(op.writes, r.buffer);
      if (!declared)
        Add("layout",
            OpName(op.id) + " " + what + " uses " + BufName(r.buffer) + " without listing it in its " +
                (write ? "writes" : "reads"),
            op.id, r.buffer);
    };
    ForEachRegion(op, check);
    // A compute op names one parameter region per group of its module (the
    // executor lays them end to end), and a backward as many gradients.
    if ((op.kind == OpKind::kForward || op.kind == OpKind::kBackward) && op.module >= 0 &&
        op.module < static_cast<int>(p_.modules.size())) {
      const size_t n = p_.modules[static_cast<size_t>(op.module)].param_groups.size();
      if (op.params.size() != n || (op.kind == OpKind::kBackward ? op.grads.size() != n : !op.grads.empty()))
        Add("reference",
            OpName(op.id) + " names " + std::to_string(op.params.size()) + " parameter and " +
                std::to_string(op.grads.size()) + " gradient regions for a module of " + std::to_string(n) +
                " parameter groups",
            op.id);
    }
    std::vector<int> per_rank(static_cast<size_t>(std::max(1, p_.world_size)), 0);
    bool named = false;
    for (const Move& m : op.moves) {
      if (m.rank >= p_.data_parallel()) {
        Add("reference",
            OpName(op.id) + " has a move for rank " + std::to_string(m.rank) + " of " +
                std::to_string(p_.data_parallel()) + " data-parallel ranks",
            op.id);
        continue;
      }
      if (m.rank >= 0) ++per_rank[static_cast<size_t>(m.rank)], named = true;
    }
    // An allgather runs once per rank with that rank's move: each rank needs
    // exactly one, or the collective would hang.
    if (named && op.kind == OpKind::kAllGather)
      for (int r = 0; r < p_.data_parallel(); ++r)
        if (per_rank[static_cast<size_t>(r)] != 1)
          Add("reference",
              OpName(op.id) + " names ranks but has " + std::to_string(per_rank[static_cast<size_t>(r)]) +
                  " moves for rank " + std::to_string(r) + " (an allgather needs one per rank)",
              op.id);
  }

  // The host stream runs hooks, which move and name nothing; nothing else
  // takes host time.
  void CheckHostOp(const Op& op, OpId i) {
    const bool hook = op.kind == OpKind::kHook, host = op.stream == Stream::kHost;
    if (hook != host)
      Add("host", OpName(i) + (hook ? " is a hook off the host stream" : " runs on the host stream but is no hook"), i);
    if (!(op.host_seconds >= 0) || !std::isfinite(op.host_seconds) || (!hook && op.host_seconds != 0))
      Add("host",
          OpName(i) + " has host_seconds " + std::to_string(op.host_seconds) +
              " (a hook's: finite, >= 0; 0 on every other op)",
          i);
    if (op.grads_store != 0 &&
        (op.kind != OpKind::kBackward || (op.grads.size() < 32 && (op.grads_store >> op.grads.size()) != 0)))
      Add("layout",
          OpName(i) + " stores gradients it does not name (grads_store " + std::to_string(op.grads_store) + ")", i);
    if (op.coalesce && op.kind != OpKind::kNvmeWrite)
      Add("layout", OpName(i) + " is coalesced but only NVMe writes are", i);
    if (op.stored != 1 && (!(op.stored > 0 && op.stored < 1) || p_.run.compression.codec == CodecKind::kNone ||
                           (op.kind != OpKind::kNvmeWrite && op.kind != OpKind::kNvmeRead)))
      Add("layout",
          OpName(i) + " has stored ratio " + std::to_string(op.stored) +
              " (NVMe ops of a plan with a codec only, in (0, 1])",
          i);
    if (op.quant_bits != 0 && op.kind != OpKind::kAllGather && op.kind != OpKind::kReduceScatter)
      Add("layout",
          OpName(i) + " has quant_bits " + std::to_string(op.quant_bits) +
              " but only allgathers and reduce-scatters move quantized data",
          i);
    if (hook && (!op.moves.empty() || !op.allocs.empty() || !op.frees.empty() || !op.reads.empty() ||
                 !op.writes.empty() || op.bytes.v != 0 || op.flops != 0))
      Add("host", OpName(i) + " is a hook that names buffers, bytes or FLOPs", i);
  }

  // Kahn's algorithm over deps plus stream order, smallest id first: equals
  // list order when list order is valid. Empty result when cyclic.
  std::vector<OpId> TopologicalOrder() {
    const size_t n = p_.ops.size();
    std::vector<std::vector<OpId>> succ(n);
    std::vector<int> indeg(n, 0);
    std::vector<OpId> last(StreamSlots(p_), -1);
    for (const Op& op : p_.ops) {
      auto edge = [&](OpId from) {
        succ[from].push_back(op.id);
        ++indeg[op.id];
      };
      for (OpId d : op.deps) {
        edge(d);
        if (d > op.id)
          Add("order",
              OpName(op.id) + " depends on " + OpName(d) + ", listed after it: list order is not a valid order", op.id);
      }
      OpId& prev = last[StreamSlot(op)];
      if (prev >= 0) edge(prev);
      prev = op.id;
    }
    std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
    for (size_t i = 0; i < n; ++i)
      if (indeg[i] == 0) ready.push(static_cast<OpId>(i));
    std::vector<OpId> order;
    order.reserve(n);
    while (!ready.empty()) {
      OpId id = ready.top();
      ready.pop();
      order.push_back(id);
      for (OpId s : succ[id])
        if (--indeg[s] == 0) ready.push(s);
    }
    if (order.size() == n) return order;
    std::string names;
    int shown = 0;
    for (size_t i = 0; i < n && shown < 4; ++i)
      if (indeg[i] > 0) {
        names += (shown++ ? ", " : "") + OpName(static_cast<OpId>(i));
      }
    Add("cycle",
        "dependency cycle among " + std::to_string(n - order.size()) + " ops (deps plus stream order), e.g. " + names);
    return {};
  }

  // Memory per stage: a rank holds its stage's buffers; a node's CPU and
  // NVMe hold those of its ranks (NodeKinds: which stages, how many ranks
  // each). The peak of a tier is over its ranks (GPU) or nodes.
  struct NodeShare {
    int stage, ranks;
  };
  std::vector<std::vector<NodeShare>> NodeKinds() const {
    std::vector<std::vector<NodeShare>> kinds;
    const int gpn = std::max(1, p_.gpus_per_node);
    for (int node = 0; node < std::max(1, p_.nodes); ++node) {
      std::vector<NodeShare> k;
      for (int r = node * gpn; r < (node + 1) * gpn && r < p_.world_size; ++r) {
        const int st = p_.StageOf(r);
        if (k.empty() || k.back().stage != st) k.push_back({st, 0});
        ++k.back().ranks;
      }
      auto same = [&](const std::vector<NodeShare>& x) {
        if (x.size() != k.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
          if (x[i].stage != k[i].stage || x[i].ranks != k[i].ranks) return false;
        return true;
      };
      if (std::none_of(kinds.begin(), kinds.end(), same)) kinds.push_back(std::move(k));
      if (p_.pipeline == 1) break;  // every node alike
    }
    return kinds;
  }

  void ReplayMemory(const std::vector<OpId>& order) {
    enum State : uint8_t { kUnborn, kLive, kDead };
    const int P = p_.pipeline;
    std::vector<State> state(p_.buffers.size(), kUnborn);
    struct Use {
      Bytes tier[kNumTiers];
      Bytes by_kind[kNumTiers][kNumStateKinds];
    };
    std::vector<Use> use(static_cast<size_t>(P));
    auto add = [&](const Buffer& b, int sign) {
      Use& u = use[static_cast<size_t>(b.stage)];
      u.tier[static_cast<int>(b.tier)] += b.bytes * sign;
      u.by_kind[static_cast<int>(b.tier)][static_cast<int>(b.kind)] += b.bytes * sign;
    };
    for (const Buffer& b : p_.buffers)
      if (b.resident) {
        state[b.id] = kLive;
        add(b, 1);
      }
    // Node kinds (which stages' ranks a node holds): a kind of one stage is
    // exact in list order; a kind mixing stages is bounded after the
    // replay by the sum of each stage's own peak (the list interleaves the
    // stages in one order of many the hardware could run).
    const std::vector<std::vector<NodeShare>> kinds = NodeKinds();
    std::vector<std::vector<size_t>> single_of(static_cast<size_t>(P));
    for (size_t k = 0; k < kinds.size(); ++k)
      if (kinds[k].size() == 1) single_of[static_cast<size_t>(kinds[k][0].stage)].push_back(k);
    struct StagePeak {
      Bytes peak[kNumTiers];
      Bytes kinds[kNumTiers][kNumStateKinds];
      OpId op[kNumTiers] = {-1, -1, -1};
    };
    std::vector<StagePeak> stage_peak(static_cast<size_t>(P));
    bool reported_capacity[kNumTiers] = {false, false, false};
    // Whose buffers a peak is made of (MemoryPeaks::ranks_at_peak): one
    // rank of a stage, or a node kind's ranks per stage; built once, copied
    // only when a peak moves (this runs at every op).
    std::vector<std::vector<int>> one_rank(static_cast<size_t>(P), std::vector<int>(static_cast<size_t>(P), 0));
    for (int st = 0; st < P; ++st) one_rank[static_cast<size_t>(st)][static_cast<size_t>(st)] = 1;
    std::vector<std::vector<int>> kind_ranks(kinds.size(), std::vector<int>(static_cast<size_t>(P), 0));
    for (size_t k = 0; k < kinds.size(); ++k)
      for (const NodeShare& sh : kinds[k]) kind_ranks[k][static_cast<size_t>(sh.stage)] += sh.ranks;
    auto consider = [&](Tier t, OpId at, Bytes total, const Bytes(&kinds_bytes)[kNumStateKinds], int stage,
                        const std::vector<int>& ranks) {
      const int ti = static_cast<int>(t);
      if (total > r_.memory.peak[ti] || r_.memory.peak_op[ti] < 0) {
        r_.memory.peak[ti] = total;
        r_.memory.peak_op[ti] = at;
        for (int k = 0; k < kNumStateKinds; ++k) r_.memory.at_peak[ti][k] = kinds_bytes[k];
        r_.memory.ranks_at_peak[ti] = ranks;
      }
      const Bytes cap = p_.capacity[ti];
      if (total > cap && !reported_capacity[ti]) {
        reported_capacity[ti] = true;
        ReportCapacity(t, at, total, cap, stage);
      }
    };
    auto check_peaks = [&](OpId at, int stage) {
      const Use& u = use[static_cast<size_t>(stage)];
      StagePeak& sp = stage_peak[static_cast<size_t>(stage)];
      for (int ti = 0; ti < kNumTiers; ++ti)
        if (u.tier[ti] > sp.peak[ti] || sp.op[ti] < 0) {
          sp.peak[ti] = u.tier[ti];
          sp.op[ti] = at;
          for (int k = 0; k < kNumStateKinds; ++k) sp.kinds[ti][k] = u.by_kind[ti][k];
        }
      consider(Tier::kGpu, at, u.tier[static_cast<int>(Tier::kGpu)], u.by_kind[static_cast<int>(Tier::kGpu)], stage,
               one_rank[static_cast<size_t>(stage)]);
      for (Tier t : {Tier::kCpu, Tier::kNvme}) {
        const int ti = static_cast<int>(t);
        for (size_t k : single_of[static_cast<size_t>(stage)]) {
          const int n = kinds[k][0].ranks;
          Bytes by_kind[kNumStateKinds];
          for (int c = 0; c < kNumStateKinds; ++c) by_kind[c] = u.by_kind[ti][c] * n;
          consider(t, at, u.tier[ti] * n, by_kind, stage, kind_ranks[k]);
        }
      }
    };
    for (int st = 0; st < P; ++st) check_peaks(-1, st);
    for (OpId id : order) {
      const Op& op = p_.ops[id];
      for (BufferId b : op.allocs) {
        const Buffer& buf = p_.buffers[b];
        if (buf.resident || state[b] != kUnborn) {
          Add("double_alloc", OpName(id) + " allocates " + BufName(b) + ", which already exists or was freed", id, b);
          continue;
        }
        state[b] = kLive;
        add(buf, 1);
      }
      check_peaks(id, op.stage);
      for (const auto* list : {&op.reads, &op.writes, &op.frees})
        for (BufferId b : *list) {
          if (state[b] == kUnborn)
            Add("use_before_alloc", OpName(id) + " uses " + BufName(b) + " before any op allocates it", id, b);
          if (state[b] == kDead)
            Add("use_after_free", OpName(id) + " uses " + BufName(b) + " after it was freed", id, b);
        }
      for (BufferId b : op.frees) {
        const Buffer& buf = p_.buffers[b];
        if (buf.resident) {
          Add("double_free", OpName(id) + " frees resident " + BufName(b), id, b);
          continue;
        }
        if (state[b] != kLive) continue;  // reported above
        state[b] = kDead;
        add(buf, -1);
      }
    }
    for (const Buffer& b : p_.buffers)
      if (!b.resident && state[b.id] == kLive)
        Add("never_freed", BufName(b.id) + " is allocated but never freed by the end of the iteration", -1, b.id);
    // Nodes holding several stages: each stage's own peak, together.
    for (size_t k = 0; k < kinds.size(); ++k) {
      const std::vector<NodeShare>& kind = kinds[k];
      if (kind.size() < 2) continue;
      for (Tier t : {Tier::kCpu, Tier::kNvme}) {
        const int ti = static_cast<int>(t);
        Bytes total, by_kind[kNumStateKinds];
        int biggest = kind[0].stage;
        Bytes most(-1);
        for (const NodeShare& sh : kind) {
          const StagePeak& sp = stage_peak[static_cast<size_t>(sh.stage)];
          total += sp.peak[ti] * sh.ranks;
          for (int c = 0; c < kNumStateKinds; ++c) by_kind[c] += sp.kinds[ti][c] * sh.ranks;
          if (sp.peak[ti] * sh.ranks > most) most = sp.peak[ti] * sh.ranks, biggest = sh.stage;
        }
        consider(t, stage_peak[static_cast<size_t>(biggest)].op[ti], total, by_kind, biggest, kind_ranks[k]);
      }
    }
  }

  // Under concurrent execution a buffer is safe only if the op allocating it
  // happens before every other user, and every user happens before the op
  // freeing it. "Happens before" is reachability over deps plus stream order;
  // since a stream runs in order, it is summarised per op by a vector clock:
  // the latest op of each stream among its ancestors.
  void CheckLifetimesOrdered(const std::vector<OpId>& order) {
    const size_t n = p_.ops.size();
    // Clocks are per stage (a buffer's users are all of its stage): a
    // receive's send of another stage adds nothing; stage s's ops order
    // among themselves through its own streams, where its sends and
    // receives also sit.
    std::vector<std::array<OpId, kNumStreams>> clock(n);
    std::vector<OpId> last(StreamSlots(p_), -1);
    std::vector<OpId> stream_prev(n, -1);
    for (const Op& op : p_.ops) {
      stream_prev[op.id] = last[StreamSlot(op)];
      last[StreamSlot(op)] = op.id;
    }
    auto merge = [&](std::array<OpId, kNumStreams>& into, OpId from) {
      const auto& c = clock[from];
      for (int s = 0; s < kNumStreams; ++s) into[s] = std::max(into[s], c[s]);
      const int fs = static_cast<int>(p_.ops[from].stream);
      into[fs] = std::max(into[fs], from);
    };
    for (OpId id : order) {
      auto& c = clock[id];
      c.fill(-1);
      for (OpId d : p_.ops[id].deps)
        if (p_.ops[d].stage == p_.ops[id].stage) merge(c, d);
      if (stream_prev[id] >= 0) merge(c, stream_prev[id]);
    }
    auto before = [&](OpId a, OpId b) {  // a happens before b (or is b)
      return a == b || a <= clock[b][static_cast<int>(p_.ops[a].stream)];
    };
    std::vector<OpId> alloc_by(p_.buffers.size(), -1), free_by(p_.buffers.size(), -1);
    std::vector<std::vector<OpId>> users(p_.buffers.size());
    for (const Op& op : p_.ops) {
      for (BufferId b : op.allocs) alloc_by[b] = op.id;
      for (BufferId b : op.frees) free_by[b] = op.id;
      for (const auto* list : {&op.reads, &op.writes, &op.frees})
        for (BufferId b : *list)
          if (users[b].empty() || users[b].back() != op.id) users[b].push_back(op.id);
    }
    for (const Buffer& b : p_.buffers) {
      if (b.resident) continue;
      for (OpId u : users[b.id]) {
        if (alloc_by[b.id] >= 0 && !before(alloc_by[b.id], u))
          Add("race",
              OpName(u) + " uses " + BufName(b.id) + " but is not ordered after " + OpName(alloc_by[b.id]) +
                  ", which allocates it",
              u, b.id);
        if (free_by[b.id] >= 0 && !before(u, free_by[b.id]))
          Add("race",
              OpName(u) + " uses " + BufName(b.id) + " but is not ordered before " + OpName(free_by[b.id]) +
                  ", which frees it",
              u, b.id);
      }
    }
    CheckHazards(before, order);
  }

  // Bytes a transient buffer's reader may find unwritten need the buffer
  // cleared (plan.h Buffer::cleared; fresh_bytes.h).
  void CheckFreshBytes() {
    for (const UnwrittenRead& u : FindUnwrittenReads(p_)) {
      if (p_.buffers[u.buffer].cleared) continue;
      Add("unwritten_read",
          OpName(u.op) + " reads its " + u.what + " [" + std::to_string(u.offset.v) + ", +" +
              std::to_string(u.bytes.v) + ") in " + BufName(u.buffer) +
              ", bytes no op wrote since the buffer's allocation, and the buffer is not cleared",
          u.op, u.buffer);
    }
  }

  // Data hazards: two ops touching overlapping bytes of a buffer, one of
  // them writing, must be ordered (read after write, write after read,
  // write after write), or what the reader sees depends on timing.
  // Accesses are the ops' regions (ForEachRegion; a write conflicts with
  // any access, so an accumulating destination needs no separate read),
  // fed per buffer in the topological order to a HazardTracker (hazards.h).
  template <typename Before>
  void CheckHazards(const Before& before, const std::vector<OpId>& order) {
    struct Access {
      OpId op;
      int64_t begin, end;
      bool write;
      int rank;
    };
    std::vector<size_t> pos(p_.ops.size());
    for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
    std::vector<std::vector<Access>> by_buffer(p_.buffers.size());
    const auto nb = static_cast<BufferId>(p_.buffers.size());
    for (const Op& op : p_.ops)
      ForEachRegion(op, [&](const Region& r, const char*, bool write, int rank) {
        if (r.buffer < 0 || r.buffer >= nb || r.bytes.v <= 0) return;
        by_buffer[r.buffer].push_back({op.id, r.offset.v, r.end().v, write, rank});
      });
    const HazardTracker::Before ordered = before;
    auto key = [](const Access& x) { return std::make_tuple(x.rank, x.begin, x.end, x.write); };
    for (BufferId b = 0; b < nb; ++b) {
      auto& acc = by_buffer[b];
      std::stable_sort(acc.begin(), acc.end(), [&](const Access& x, const Access& y) { return pos[x.op] < pos[y.op]; });
      // An op may name the same bytes many times: an allgather's move per
      // rank each writes the whole destination on every rank. One access
      // of the op suffices (its own accesses never conflict), and each
      // every-rank access walks every rank's bytes: 16 x 1,024 ranks made
      // that 16k x 16k walks per allgather.
      size_t kept = 0;
      for (size_t i = 0; i < acc.size();) {
        size_t j = i + 1;
        while (j < acc.size() && acc[j].op == acc[i].op) ++j;
        if (j - i > 1) {
          std::sort(acc.begin() + static_cast<ptrdiff_t>(i), acc.begin() + static_cast<ptrdiff_t>(j),
                    [&](const Access& x, const Access& y) { return key(x) < key(y); });
        }
        for (size_t k = i; k < j; ++k)
          if (k == i || key(acc[k]) != key(acc[k - 1])) acc[kept++] = acc[k];
        i = j;
      }
      acc.resize(kept);
      HazardTracker tracker;
      for (const Access& x : acc)
        for (const HazardTracker::Conflict& c : tracker.Access(x.op, x.begin, x.end, x.write, x.rank, ordered)) {
          const OpId first = std::min(x.op, c.other), second = std::max(x.op, c.other);
          const bool fw = first == x.op ? x.write : c.other_writes, sw = first == x.op ? c.other_writes : x.write;
          const char* what = fw && sw ? "writes" : fw ? "reads what" : "writes what";
          Add("hazard",
              OpName(second) + " " + what + " " + OpName(first) + (fw ? " writes" : " reads") + " in " + BufName(b) +
                  " [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + ") but is not ordered with it",
              second, b);
        }
    }
  }

  void ReportCapacity(Tier t, OpId at, Bytes needed, Bytes cap, int stage) {
    Violation v;
    v.kind = "capacity";
    v.tier = t;
    v.op = at;
    v.needed = needed;
    v.capacity = cap;
    std::string where;
    if (p_.pipeline == 1 && t == Tier::kGpu) {
      v.rank = 0;
      where = "on rank 0 (every rank runs the same plan)";
    } else if (p_.pipeline == 1) {
      v.node = 0;
      where = "on node 0 (" + std::to_string(p_.gpus_per_node) + " ranks)";
    } else if (t == Tier::kGpu) {
      v.rank = stage * p_.RanksPerStage();
      where =
          "on the ranks of pipeline stage " + std::to_string(stage) + " (rank " + std::to_string(v.rank) + " first)";
    } else {
      // The first node holding the stage's ranks.
      v.node = stage * p_.RanksPerStage() / std::max(1, p_.gpus_per_node);
      where = "on node " + std::to_string(v.node) + " (with pipeline stage " + std::to_string(stage) + "'s ranks)";
    }
    const Bytes over = needed - cap;
    v.message = std::string(TierName(t)) + " tier over capacity " + where + " " +
                (at >= 0 ? "at " + OpName(at) : std::string("before the first op (resident state)")) + ": needs " +
                FormatBytes(needed) + ", capacity " + FormatBytes(cap) + ", over by " + FormatBytes(over) + " (" +
                std::to_string(over.v) + " bytes)";
    if (t == Tier::kGpu) v.message += GpuReservedNote(p_);
    Add(std::move(v));
  }

  const Plan& p_;
  int max_;
  std::map<std::string, int> count_;
  ValidationReport r_;
};

}  // namespace

ValidationReport ValidatePlan(const Plan& plan, int max_per_kind) { return Validator(plan, max_per_kind).Run(); }

}  // namespace strata
