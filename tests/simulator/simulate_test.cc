// Shipped scenarios through the simulator: determinism, golden traces,
// Perfetto-compatible trace schema, monotonicity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "sim_test_util.h"
#include "strata/planner/planner.h"
#include "strata/simulator/sim_report.h"
#include "strata/simulator/simulator.h"
#include "strata/timeline/trace_io.h"
#include "test_paths.h"
#include "test_util.h"

namespace strata::sim {
namespace {

using testing::Builtin;

SimResult Sim(const Scenario& s, SimOptions o = {}) {
  auto plan = BuildPlan(s);
  if (!plan.ok()) throw std::runtime_error(plan.status().message());
  auto r = Simulate(*plan, s.hardware, o);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return *r;
}

std::string Trace(const Timeline& t) {
  std::ostringstream o;
  WriteChromeTrace(t, o);
  return o.str();
}

TEST(Simulate, EveryShippedScenarioSimulates) {
  for (const auto& name : config::BuiltinScenarioNames()) {
    SCOPED_TRACE(name);
    // One plan per scenario, simulated and summarized (planning the 1T
    // scenarios is most of this test's time).
    const Scenario scenario = Builtin(name);
    auto planned = BuildPlan(scenario);
    ASSERT_TRUE(planned.ok()) << planned.status().message();
    const Plan& plan = *planned;
    auto simulated = Simulate(plan, scenario.hardware, {});
    ASSERT_TRUE(simulated.ok()) << simulated.status().message();
    const SimResult& r = *simulated;
    const SimSummary s = Summarize(plan, r);
    EXPECT_GT(s.iteration_s, 0);
    EXPECT_GT(s.tflops_per_gpu, 0);
    // Sustained model FLOPs never beat the GPUs' peak.
    EXPECT_LE(s.tflops_per_gpu * 1e12, scenario.hardware.gpu.peak_flops.flops_per_s);
    double sum = 0;
    for (double x : s.breakdown.seconds) sum += x;
    EXPECT_NEAR(sum, s.iteration_s, 1e-6 * s.iteration_s);
    // The critical path accounts for the whole iteration, and in a
    // simulation nothing waits: each op on it starts as its last
    // predecessor ends, on whichever rank (a collective waits for the
    // rank ready last, which with SimOptions::jitter need not be this one;
    // collective latency and staging are parts of ops).
    double on_path = 0;
    for (double x : s.path.seconds) on_path += x;
    EXPECT_NEAR(on_path, s.iteration_s, 1e-6 * s.iteration_s);
    EXPECT_FALSE(s.path.ops.empty());
    EXPECT_NEAR(s.path.seconds[static_cast<int>(TimeClass::kIdle)], 0, 1e-6 * s.iteration_s);
    // Each simulated rank runs its pipeline stage's ops (all of them without stages).
    size_t instances = 0;
    for (int rank : r.ranks)
      for (const Op& op : plan.ops) instances += op.stage == plan.StageOf(rank);
    EXPECT_EQ(r.timeline.ops.size(), instances);
  }
}

TEST(Simulate, DeterministicJsonAndTrace) {
  const Scenario s = Builtin("gpt2-1.5b-v100");
  const SimResult a = Sim(s), b = Sim(s);
  const Plan plan = *BuildPlan(s);
  EXPECT_EQ(SummaryJson(a.timeline, Summarize(plan, a)), SummaryJson(b.timeline, Summarize(plan, b)));
  EXPECT_EQ(Trace(a.timeline), Trace(b.timeline));
}

// The seed scenario's trace is checked byte for byte. Regenerate after an
// intended model change with:
//   STRATA_UPDATE_GOLDEN=1 build/tests/simulator_test --gtest_filter='*Golden*'
// (not with strata simulate --trace, which also records the version, the
// scenario path and the overrides).
// Replayed exactly (no jitter: the model's own round numbers, which
// TraceReader's tests read back); the 2-GPU trace below has the default.
TEST(Simulate, SeedGoldenTrace) {
  const SimResult r = Sim(Builtin("seed"), testing::Exact());
  const std::string path = std::string(testing::SourceDir()) + "/tests/golden/seed.trace.json";
  if (std::getenv("STRATA_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << Trace(r.timeline);
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file";
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(Trace(r.timeline), golden.str());
}

// A 2-GPU stage-3 transformer: collectives, prefetch, bucketed reduction,
// with the default jitter (SimOptions::jitter: deterministic, so byte for
// byte too). Regenerate with STRATA_UPDATE_GOLDEN=1 build/tests/simulator_test.
TEST(Simulate, SmallTwoGpuGoldenTrace) {
  const SimResult r = Sim(testing::SmallGpt(3, 2));
  const std::string path = std::string(testing::SourceDir()) + "/tests/golden/small-gpt-2gpu.trace.json";
  if (std::getenv("STRATA_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << Trace(r.timeline);
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file";
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(Trace(r.timeline), golden.str());
}

// The Chrome Trace Event format as Perfetto and chrome://tracing read it.
void ExpectChromeTraceSchema(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("traceEvents") && j["traceEvents"].is_array());
  EXPECT_EQ(j["otherData"]["format"], "strata.trace");
  EXPECT_TRUE(j["displayTimeUnit"] == "ms" || j["displayTimeUnit"] == "ns");
  int complete = 0, counters = 0, meta = 0, flows = 0, totals = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.is_object());
    ASSERT_TRUE(e.contains("name") && e["name"].is_string());
    ASSERT_TRUE(e.contains("ph") && e["ph"].is_string());
    ASSERT_TRUE(e.contains("pid") && e["pid"].is_number_integer());
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++complete;
      ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number());
      EXPECT_GE(e["ts"].get<double>(), 0);
      EXPECT_GE(e["dur"].get<double>(), 0);
      ASSERT_TRUE(e["tid"].is_number_integer());
      ASSERT_TRUE(e["cat"].is_string());
      ASSERT_TRUE(e["args"].is_object());
    } else if (ph == "C") {
      ++counters;
      const std::string n = e["name"];
      if (n.size() > 6 && n.compare(n.size() - 6, 6, " total") == 0) {  // one total track per tier
        ++totals;
        EXPECT_TRUE(e["args"].contains("bytes")) << n;
      }
      ASSERT_TRUE(e["ts"].is_number());
      ASSERT_TRUE(e["args"].is_object());
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << k;
    } else if (ph == "M") {
      ++meta;
      const std::string n = e["name"];
      EXPECT_TRUE(n == "process_name" || n == "thread_name" || n == "process_sort_index" || n == "thread_sort_index")
          << n;
      ASSERT_TRUE(e["args"].is_object());
    } else if (ph == "s" || ph == "f") {  // the critical path's flow arrows
      ++flows;
      EXPECT_EQ(e["cat"], "critical_path");
      ASSERT_TRUE(e["id"].is_number_integer() && e["ts"].is_number() && e["tid"].is_number_integer());
      if (ph == "f") {
        EXPECT_EQ(e["bp"], "e");
      }
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  EXPECT_GT(flows, 0);
  EXPECT_EQ(flows % 2, 0);
  EXPECT_GT(totals, 0);
  EXPECT_GT(complete, 0);
  EXPECT_GT(counters, 0);
  EXPECT_GT(meta, 0);
}

// Slices on one thread never overlap: ts and dur come from instants rounded
// once to whole nanoseconds (rounding them separately overlapped
// consecutive slices by 1 ns, which Perfetto flags).
void ExpectNoOverlapWithinAThread(const std::string& text, const std::string& what) {
  const auto j = nlohmann::json::parse(text);
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> threads;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int64_t ts = std::llround(e["ts"].get<double>() * 1000), dur = std::llround(e["dur"].get<double>() * 1000);
    threads[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + dur});
  }
  ASSERT_FALSE(threads.empty());
  for (auto& [key, spans] : threads) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_GE(spans[i].first, spans[i - 1].second) << what << " pid " << key.first << " tid " << key.second;
  }
}

TEST(Simulate, SlicesNeverOverlapWithinAThread) {
  for (const char* name : {"seed.trace.json", "small-gpt-2gpu.trace.json"}) {
    std::ifstream in(std::string(testing::SourceDir()) + "/tests/golden/" + name);
    std::stringstream text;
    text << in.rdbuf();
    ExpectNoOverlapWithinAThread(text.str(), name);
  }
  ExpectNoOverlapWithinAThread(Trace(Sim(Builtin("gpt2-1.5b-v100")).timeline), "gpt2-1.5b-v100");
}

TEST(Simulate, TraceFollowsTheChromeTraceEventFormat) {
  ExpectChromeTraceSchema(Trace(Sim(Builtin("seed")).timeline));
  ExpectChromeTraceSchema(Trace(Sim(Builtin("gpt2-1.5b-v100")).timeline));
}

TEST(Simulate, MemoryTimelineMatchesTheValidatorsPeak) {
  const Scenario s = Builtin("seed");
  const SimResult r = Sim(s);
  const Plan plan = *BuildPlan(s);
  Bytes resident[kNumTiers];
  for (const auto& b : plan.buffers)
    if (b.resident) resident[static_cast<int>(b.tier)] += b.bytes;
  // Sequential replay and the simulated timeline agree on resident state.
  EXPECT_GE(r.timeline.Peak(Tier::kNvme).v, 1'011'010LL * 16);
  EXPECT_GT(r.timeline.Peak(Tier::kGpu).v, 0);
  for (const auto& series : r.timeline.memory) {
    EXPECT_FALSE(series.points.empty());
    for (size_t i = 1; i < series.points.size(); ++i) EXPECT_LT(series.points[i - 1].t, series.points[i].t);
    // The iteration ends with the resident state it started with.
    EXPECT_EQ(series.points.back().total(), resident[static_cast<int>(series.tier)]);
  }
}

// More bandwidth (one copy's staging rate too), compute or memory never
// makes an iteration slower.
TEST(Simulate, MonotoneInResources) {
  std::vector<std::pair<const char*, std::function<void(HardwareSpec&, double)>>> knobs = {
      {"pcie", [](HardwareSpec& h, double k) { h.pcie.bandwidth.bytes_per_s *= k; }},
      {"nvme_read", [](HardwareSpec& h, double k) { h.nvme.read_bandwidth.bytes_per_s *= k; }},
      {"nvme_write", [](HardwareSpec& h, double k) { h.nvme.write_bandwidth.bytes_per_s *= k; }},
      {"nvlink", [](HardwareSpec& h, double k) { h.nvlink.bandwidth.bytes_per_s *= k; }},
      {"network", [](HardwareSpec& h, double k) { h.network.bandwidth.bytes_per_s *= k; }},
      {"cpu", [](HardwareSpec& h, double k) { h.cpu.memory_bandwidth.bytes_per_s *= k; }},
      {"staging", [](HardwareSpec& h, double k) { h.cpu.staging_bandwidth.bytes_per_s = 1e9 * k; }},
      {"gpu_flops", [](HardwareSpec& h, double k) { h.gpu.peak_flops.flops_per_s *= k; }},
      {"gpu_memory", [](HardwareSpec& h, double k) { h.gpu.memory.v = static_cast<int64_t>(h.gpu.memory.v * k); }},
  };
  for (const char* name : {"seed", "gpt2-1.5b-v100", "gpt-tiny"}) {  // gpt-tiny: pageable copies
    Scenario base = Builtin(name);
    base.hardware.nvlink.bandwidth.bytes_per_s = 50e9;
    base.hardware.gpus_per_node = 2;  // exercise collectives too
    for (auto& [knob, apply] : knobs) {
      double prev = 1e300;
      for (double k : {0.5, 1.0, 2.0, 4.0}) {
        Scenario s = base;
        apply(s.hardware, k);
        const double t = Sim(s).timeline.iteration_s;
        EXPECT_LE(t, prev * (1 + 1e-12)) << name << " " << knob << " x" << k;
        prev = t;
      }
    }
  }
}

TEST(Simulate, HardwareMustMatchThePlan) {
  const Scenario s = Builtin("seed");
  auto plan = BuildPlan(s);
  HardwareSpec h = s.hardware;
  h.gpus_per_node = 2;
  EXPECT_FALSE(Simulate(*plan, h).ok());
}

}  // namespace
}  // namespace strata::sim

namespace strata::sim {
namespace {

TEST(Simulate, ReportsProgressAndCanBeCancelled) {
  const Scenario s = testing::Builtin("gpt-1t-dgx2");
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  std::vector<double> seen;
  SimOptions o;
  o.on_progress = [&](double f) { seen.push_back(f); };
  auto r = Simulate(*plan, s.hardware, o);
  ASSERT_TRUE(r.ok());
  ASSERT_GT(seen.size(), 10u);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
  EXPECT_DOUBLE_EQ(seen.back(), 1.0);

  std::atomic<bool> cancel{true};
  o.on_progress = nullptr;
  o.cancel = &cancel;
  auto c = Simulate(*plan, s.hardware, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "simulation cancelled");
}

// From several threads at once (sweep -j, compare, the GUI) each simulation
// runs in the spawned helper, never in a fork of a multi-threaded process;
// the results are the forked child's, to the byte. Without the helper the
// threads get an error that names it.
TEST(Simulate, FromThreadsTheHelperGivesTheForkedResult) {
  const Scenario s = testing::Builtin("gpt-tiny");
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  auto forked = Simulate(*plan, s.hardware);  // this process has one thread here
  ASSERT_TRUE(forked.ok()) << forked.status().message();
  const std::string want = Trace(forked->timeline);
  std::vector<std::string> got(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      auto r = Simulate(*plan, s.hardware);
      got[i] = r.ok() ? Trace(r->timeline) : "error: " + r.status().message();
    });
  for (auto& t : threads) t.join();
  for (const std::string& g : got) EXPECT_EQ(g, want);
  ::setenv("STRATA_SIM_WORKER", "/nonexistent/strata-sim-worker", 1);
  std::string msg;
  std::thread([&] {
    auto r = Simulate(*plan, s.hardware);
    msg = r.ok() ? "ok" : r.status().message();
  }).join();
  ::unsetenv("STRATA_SIM_WORKER");
  EXPECT_NE(msg.find("cannot start the simulator helper '/nonexistent/strata-sim-worker'"), std::string::npos) << msg;
}

// Owner actors (replay.h) waiting on their activities, owners whose
// activities the network's signal reports (every activity a flow, latencies
// timers), or maestro creating every activity: the same timeline, to the
// bit, for one node and for several simulated in full (ring collectives
// across nodes, pageable staging, latencies).
// Two timelines of the same plan, instance by instance (the same ranks and
// ops in the same order, asserted): the largest difference of a start or an
// end, and how many instances differ at all.
void CompareTimelines(const Timeline& a, const Timeline& b, double* worst, size_t* differ) {
  *worst = 0;
  *differ = 0;
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const TimelineOp& x = a.ops[i];
    const TimelineOp& y = b.ops[i];
    ASSERT_EQ(x.rank, y.rank);
    ASSERT_EQ(x.op, y.op);
    *worst = std::max({*worst, std::abs(x.start_s - y.start_s), std::abs(x.end_s - y.end_s)});
    *differ += x.start_s != y.start_s || x.end_s != y.end_s;
  }
}

TEST(Simulate, OwnerActorsGiveTheSameTimeline) {
  std::vector<Scenario> cases = {testing::Builtin("seed"), testing::Builtin("gpt-tiny")};
  Scenario multi = testing::Builtin("gpt-1t-512gpu");
  multi.model.layers = 2;
  multi.hardware.nodes = 4;
  cases.push_back(multi);
  for (const Scenario& s : cases) {
    auto plan = BuildPlan(s);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    for (const double jitter : {0.0, SimOptions{}.jitter}) {
      SCOPED_TRACE(s.name + " jitter " + std::to_string(jitter));
      SimOptions maestro, owners, signals;
      maestro.jitter = owners.jitter = signals.jitter = jitter;
      maestro.reduce_symmetric_nodes = owners.reduce_symmetric_nodes = signals.reduce_symmetric_nodes = false;
      maestro.activity_owners_from_ranks = std::numeric_limits<int>::max();
      owners.activity_owners_from_ranks = signals.activity_owners_from_ranks = 0;
      owners.signal_completions = false;
      signals.signal_completions = true;
      auto a = Simulate(*plan, s.hardware, maestro);
      auto b = Simulate(*plan, s.hardware, owners);
      auto c = Simulate(*plan, s.hardware, signals);
      ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().message() << b.status().message() << c.status().message();
      EXPECT_EQ(a->activities, b->activities);
      EXPECT_EQ(a->activities, c->activities);
      if (jitter == 0) {  // byte for byte
        EXPECT_EQ(Trace(a->timeline), Trace(b->timeline));
        EXPECT_EQ(Trace(a->timeline), Trace(c->timeline));
      } else {  // flows that end nanoseconds apart: SimGrid's precision
        for (const auto* other : {&b->timeline, &c->timeline}) {
          double worst = 0;
          size_t differ = 0;
          ASSERT_NO_FATAL_FAILURE(CompareTimelines(a->timeline, *other, &worst, &differ));
          EXPECT_LE(worst, 1e-6 * a->timeline.iteration_s) << differ << " instances differ";
        }
      }
    }
  }
}

// Signal mode shares flows in the replay's own flow domains instead of as
// SimGrid flows: every op instance starts and ends when it does with every
// flow a SimGrid flow (to SimGrid's precision). The 4-node 1T GPT's rings
// run their hops over NVLink and the network, its copies share PCIe; with
// tensor parallelism 4 (on the compute stream) beside ZeRO-3's rings (on
// the comm stream) a GPU's NVLink is shared; GPT-3 with 3D parallelism adds
// pipeline sends; the DGX-2 (PCIe switches under the host's ports, NVMe
// drives) with every state on NVMe and the CPU optimizer shares each
// level of PCIe, NVMe and CPU memory; without NVLink the rings' hops go
// through PCIe and merge a node's two PCIe trees into one domain; and NVMe
// drives whose reads and writes share a rate join both directions.
TEST(Simulate, FlowDomainsGiveTheSameTimeline) {
  struct Case {
    Scenario s;
    CollectiveModel model;
  };
  std::vector<Case> cases;
  Scenario zero3 = testing::Builtin("gpt-1t-512gpu");
  zero3.model.layers = 2;
  zero3.hardware.nodes = 4;
  cases.push_back({zero3, CollectiveModel::kRing});
  cases.push_back({zero3, CollectiveModel::kRingSteps});
  Scenario tp = zero3;
  tp.parallelism.tensor = 4;
  cases.push_back({tp, CollectiveModel::kRing});
  Scenario three_d = testing::Builtin("gpt3-175b-3d");
  three_d.model.layers = 8;
  three_d.training.gradient_accumulation_steps = 8;
  cases.push_back({three_d, CollectiveModel::kRing});
  Scenario dgx2 = testing::Builtin("gpt-1t-dgx2");
  dgx2.model.layers = 2;
  dgx2.hardware.nodes = 2;
  cases.push_back({dgx2, CollectiveModel::kRing});
  Scenario no_nvlink = dgx2;
  no_nvlink.hardware.nvlink.bandwidth = Bandwidth{0};
  cases.push_back({no_nvlink, CollectiveModel::kRing});
  Scenario rw = dgx2;
  rw.hardware.nvme.readwrite_bandwidth = Bandwidth{2e9};
  cases.push_back({rw, CollectiveModel::kRing});
  int64_t most_shared = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.s.name + (c.model == CollectiveModel::kRing ? " ring" : " ring steps") + " tensor " +
                 std::to_string(c.s.parallelism.tensor) + " nvlink " +
                 std::to_string(c.s.hardware.nvlink.bandwidth.bytes_per_s));
    auto plan = BuildPlan(c.s);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    for (const double jitter : {0.0, SimOptions{}.jitter}) {
      SCOPED_TRACE(jitter);
      SimOptions flows, domains;
      flows.jitter = domains.jitter = jitter;
      flows.reduce_symmetric_nodes = domains.reduce_symmetric_nodes = false;
      flows.activity_owners_from_ranks = domains.activity_owners_from_ranks = 0;
      flows.collectives = domains.collectives = c.model;
      flows.flow_domains = false;
      auto a = Simulate(*plan, c.s.hardware, flows);
      auto b = Simulate(*plan, c.s.hardware, domains);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << b.status().message();
      EXPECT_EQ(a->domain_flows, 0);
      EXPECT_GT(b->domain_flows, 0);
      most_shared = std::max(most_shared, b->max_domain_flows);
      EXPECT_EQ(a->activities, b->activities);
      double worst = 0;
      size_t differ = 0;
      ASSERT_NO_FATAL_FAILURE(CompareTimelines(a->timeline, b->timeline, &worst, &differ));
      // The same max-min rates and the same end formula (last update + bytes
      // left / rate): equal, or a few ulps of the clock apart where SimGrid
      // updated an action's bytes left at other instants. With jitter, flows
      // that would end together end nanoseconds apart, and SimGrid's
      // precision (its surf and max-min epsilons) ends some of them at once;
      // on a node's shared NVMe drives such a difference moves every later
      // flow there, and the optimizer step's chain of sub-group reads and
      // writes carries it on (the tensor-parallel 1T: 1.6e-5 of the
      // iteration, all in that chain).
      if (jitter == 0)
        EXPECT_LE(worst, 1e-11) << differ << " of " << a->timeline.ops.size() << " instances differ";
      else
        EXPECT_LE(worst, 5e-5 * a->timeline.iteration_s)
            << differ << " of " << a->timeline.ops.size() << " instances differ";
      std::printf("worst %.3g s, %zu of %zu differ, %lld domain flows, at most %lld in a domain\n", worst, differ,
                  a->timeline.ops.size(), static_cast<long long>(b->domain_flows),
                  static_cast<long long>(b->max_domain_flows));
    }
  }
  EXPECT_GE(most_shared, 8);  // flows did share domains: the solve ran beyond lone flows
}

// The child streams the completed instances in frames while it simulates:
// any frame size gives the same timeline, with every instance once.
TEST(Simulate, SpansStreamedInAnyFramesGiveTheSameTimeline) {
  Scenario s = testing::Builtin("gpt-1t-512gpu");
  s.model.layers = 2;
  s.hardware.nodes = 2;
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::string first;
  for (int64_t frame : {int64_t{1}, int64_t{777}, int64_t{1} << 40}) {
    SCOPED_TRACE(frame);
    SimOptions o;
    o.reduce_symmetric_nodes = false;
    o.spans_per_frame = frame;
    auto r = Simulate(*plan, s.hardware, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->timeline.ops.size(), plan->ops.size() * static_cast<size_t>(plan->world_size));
    std::set<std::pair<int, OpId>> seen;
    for (const TimelineOp& op : r->timeline.ops) EXPECT_TRUE(seen.insert({op.rank, op.op}).second);
    if (first.empty())
      first = Trace(r->timeline);
    else
      EXPECT_EQ(Trace(r->timeline), first);
  }
}

TEST(Simulate, AChildPastItsTimeoutIsKilled) {
  const Scenario s = testing::Builtin("gpt-1t-dgx2");
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  SimOptions o;
  o.timeout_s = 0.2;
  auto r = Simulate(*plan, s.hardware, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "the simulator process did not finish in 0.2 s and was killed (SimOptions::timeout_s)");
}

}  // namespace
}  // namespace strata::sim
