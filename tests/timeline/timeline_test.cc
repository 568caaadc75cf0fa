#include "strata/timeline/timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "strata/timeline/critical_path.h"
#include "strata/timeline/trace_io.h"

namespace strata {
namespace {

// Two ranks on one node; a GPU buffer and a CPU buffer with known lifetimes.
Plan MemPlan() {
  Plan p;
  p.scenario = "mem";
  p.world_size = 2;
  p.gpus_per_node = 2;
  p.buffers = {{0, "w", Tier::kGpu, StateKind::kParam16, Bytes(100), true},
               {1, "a", Tier::kGpu, StateKind::kActivation, Bytes(40), false},
               {2, "s", Tier::kCpu, StateKind::kSwapBuffer, Bytes(7), false}};
  Op f;
  f.id = 0;
  f.name = "fwd";
  f.allocs = {1, 2};
  Op b;
  b.id = 1;
  b.name = "bwd";
  b.kind = OpKind::kBackward;
  b.frees = {1};
  Op c;
  c.id = 2;
  c.name = "copy";
  c.kind = OpKind::kCopyH2D;
  c.stream = Stream::kH2D;
  c.frees = {2};
  p.ops = {f, b, c};
  return p;
}

TEST(Timeline, MemoryFollowsAllocationsAndFrees) {
  const Plan p = MemPlan();
  // Rank 0: fwd [0,1], bwd [1,3], copy [0.5,2]. Rank 1 runs later.
  std::vector<OpSpan> spans = {{0, 0, 0, 1}, {0, 1, 1, 3}, {0, 2, 0.5, 2}, {1, 0, 4, 5}, {1, 1, 5, 6}, {1, 2, 5, 7}};
  const Timeline t = BuildTimeline(p, spans, "run");
  EXPECT_DOUBLE_EQ(t.iteration_s, 7);
  ASSERT_EQ(t.memory.size(), 4u);  // gpu rank 0, gpu rank 1, cpu node 0, nvme node 0
  const MemorySeries* gpu0 = nullptr;
  const MemorySeries* cpu = nullptr;
  for (const auto& s : t.memory) {
    if (s.tier == Tier::kGpu && s.owner == 0) gpu0 = &s;
    if (s.tier == Tier::kCpu) cpu = &s;
  }
  ASSERT_TRUE(gpu0 && cpu);
  EXPECT_EQ(gpu0->peak.v, 140);
  // One point per distinct time: the state from t on (allocations at t = 0
  // are part of the first point).
  ASSERT_EQ(gpu0->points.size(), 2u);
  EXPECT_DOUBLE_EQ(gpu0->points[0].t, 0);
  EXPECT_EQ(gpu0->points[0].total().v, 140);
  EXPECT_EQ(gpu0->points[0].by_kind[static_cast<int>(StateKind::kActivation)].v, 40);
  EXPECT_DOUBLE_EQ(gpu0->points[1].t, 3);
  EXPECT_EQ(gpu0->points[1].total().v, 100);
  EXPECT_EQ(cpu->peak.v, 7);  // the two ranks' swap buffers never overlap in time
  EXPECT_EQ(t.Peak(Tier::kGpu).v, 140);
}

// Spans added in batches, in any order, give BuildTimeline's timeline; the
// two ranks, running the same ops, share their GPU series' values (each its
// own times), and a changed copy stops sharing.
TEST(Timeline, BuilderInBatchesGivesTheSameTimelineAndAlikeSeriesShareValues) {
  const Plan p = MemPlan();
  const std::vector<OpSpan> spans = {{1, 2, 1, 4},   {0, 0, 0, 1}, {1, 0, 0, 2},
                                     {0, 2, 0.5, 2}, {0, 1, 1, 3}, {1, 1, 2, 5}};
  const Timeline whole = BuildTimeline(p, spans, "run");
  TimelineBuilder b(p, "run", {{1, 3}, {0, 3}});
  ASSERT_TRUE(b.Add(spans.data(), 2));
  ASSERT_TRUE(b.Add(spans.data() + 2, 4));
  const OpSpan extra{0, 1, 8, 9};
  EXPECT_FALSE(b.Add(&extra, 1));  // rank 0 has all its ops
  const OpSpan stranger{5, 0, 0, 1};
  EXPECT_FALSE(b.Add(&stranger, 1));
  const Timeline t = std::move(b).Finish();
  ASSERT_EQ(t.ops.size(), whole.ops.size());
  for (size_t i = 0; i < t.ops.size(); ++i) {
    EXPECT_EQ(t.ops[i].rank, whole.ops[i].rank);
    EXPECT_EQ(t.ops[i].op, whole.ops[i].op);
    EXPECT_EQ(t.ops[i].start_s, whole.ops[i].start_s);
    EXPECT_EQ(t.ops[i].name(), whole.ops[i].name());
  }
  EXPECT_EQ(t.ops.front().rank, 0);
  EXPECT_DOUBLE_EQ(t.ops[1].start_s, 0.5);  // by rank, then start
  ASSERT_EQ(t.memory.size(), whole.memory.size());
  for (size_t i = 0; i < t.memory.size(); ++i) EXPECT_TRUE(t.memory[i].points == whole.memory[i].points) << i;
  const MemoryPoints& gpu0 = t.memory[0].points;
  const MemoryPoints& gpu1 = t.memory[1].points;
  ASSERT_EQ(t.memory[1].owner, 1);
  EXPECT_TRUE(gpu1.SharesValuesWith(gpu0));
  EXPECT_DOUBLE_EQ(gpu1[1].t, 5);  // its own times
  EXPECT_DOUBLE_EQ(gpu0[1].t, 3);
  EXPECT_EQ(gpu1[1].total().v, 100);
  MemoryPoints changed = gpu1;
  MemoryPoint last = changed.back();
  last.by_kind[static_cast<int>(StateKind::kParam16)] = Bytes(1);
  changed.set_back(last);
  EXPECT_FALSE(changed.SharesValuesWith(gpu0));
  EXPECT_EQ(gpu0.back().total().v, 100);  // unchanged
  EXPECT_EQ(changed.back().total().v, 1);
}

// A series stores the kinds it holds as columns, added as they appear
// (earlier points read 0 in a new column); points read back as they went in.
TEST(Timeline, MemoryPointsKeepEveryKindTheyWereGiven) {
  auto point = [](double t, std::initializer_list<std::pair<StateKind, int64_t>> kinds) {
    MemoryPoint p;
    p.t = t;
    for (auto [k, v] : kinds) p.by_kind[static_cast<int>(k)] = Bytes(v);
    return p;
  };
  std::vector<MemoryPoint> in = {point(0, {}), point(1, {{StateKind::kParam16, 5}}),
                                 point(2, {{StateKind::kParam16, 5}, {StateKind::kActivation, 3}}),
                                 point(3, {{StateKind::kActivation, -2}, {StateKind::kMoments, 1LL << 40}})};
  MemoryPoints pts;
  for (const MemoryPoint& p : in) pts.push_back(p);
  ASSERT_EQ(pts.size(), in.size());
  EXPECT_EQ(pts.bytes_per_point(), 8u + 3 * 8u);  // three kinds used of eight
  for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(pts[i] == in[i]) << i;
  size_t i = 0;
  for (const MemoryPoint& p : pts) EXPECT_TRUE(p == in[i++]);
  EXPECT_EQ(pts.back().total().v, (1LL << 40) - 2);
  pts.set_back(point(3, {{StateKind::kGrad, 9}}));  // a fourth column, the other kinds now 0
  EXPECT_TRUE(pts.back() == point(3, {{StateKind::kGrad, 9}}));
  EXPECT_TRUE(pts[2] == in[2]);
  // Random access for a search by time.
  auto it = std::upper_bound(pts.begin(), pts.end(), 1.5, [](double t, const MemoryPoint& p) { return t < p.t; });
  EXPECT_EQ(it - pts.begin(), 2);
  // Columns reserved up front hold the same.
  MemoryPoints reserved;
  reserved.reserve(4, (1u << static_cast<int>(StateKind::kParam16)) | (1u << static_cast<int>(StateKind::kMoments)));
  for (const MemoryPoint& p : in) reserved.push_back(p);
  for (size_t j = 0; j < in.size(); ++j) EXPECT_TRUE(reserved[j] == in[j]) << j;
}

TEST(Timeline, BreakdownSplitsExposedTime) {
  const Plan p = MemPlan();
  // compute [0,1] and [1,3]; copy [0.5, 4]: exposed 1 s of h2d.
  const Timeline t = BuildTimeline(p, {{0, 0, 0, 1}, {0, 1, 1, 3}, {0, 2, 0.5, 4}}, "simulate");
  const TimeBreakdown b = AnalyzeTimeline(t, 0);
  EXPECT_DOUBLE_EQ(b.seconds[static_cast<int>(TimeClass::kCompute)], 3);
  EXPECT_DOUBLE_EQ(b.seconds[static_cast<int>(TimeClass::kH2D)], 1);
  EXPECT_DOUBLE_EQ(b.busy[static_cast<int>(TimeClass::kH2D)], 3.5);
  EXPECT_EQ(b.bottleneck, TimeClass::kCompute);
}

// Three fetches on the H2D stream, each feeding a forward. Compute is busy
// longer than any stretch of exposed copying, so the exposed-time breakdown
// names compute; but the fetches run back to back and the last forward waits
// on the last of them: the copies set the iteration's length.
Plan FetchChain() {
  Plan p;
  p.scenario = "chain";
  for (int i = 0; i < 3; ++i) {
    Op fetch;
    fetch.id = 2 * i;
    fetch.name = "fetch" + std::to_string(i);
    fetch.kind = OpKind::kCopyH2D;
    fetch.stream = Stream::kH2D;
    Op fwd;
    fwd.id = 2 * i + 1;
    fwd.name = "fwd" + std::to_string(i);
    fwd.deps = {fetch.id};
    p.ops.push_back(fetch);
    p.ops.push_back(fwd);
  }
  return p;
}

TEST(Timeline, CriticalPathFollowsWhatHeldTheIterationUp) {
  const Plan p = FetchChain();
  // fetch0 [0,2] fwd0 [2,4.5]; fetch1 [2,5] fwd1 [5,7.5]; fetch2 [5,8] fwd2 [8.2,10.5]
  // (fwd2 starts 0.2 s late: a wait). Rank 1's ops are not followed.
  const Timeline t = BuildTimeline(
      p, {{0, 0, 0, 2}, {0, 1, 2, 4.5}, {0, 2, 2, 5}, {0, 3, 5, 7.5}, {0, 4, 5, 8}, {0, 5, 8.2, 10.5}, {1, 4, 0, 11}},
      "run");
  const TimeBreakdown b = AnalyzeTimeline(t, 0);
  EXPECT_EQ(b.bottleneck, TimeClass::kCompute);  // 7.3 s busy against 3 s of exposed copying
  const CriticalPath c = AnalyzeCriticalPath(p, t, 0);
  EXPECT_EQ(c.ops, (std::vector<OpId>{0, 2, 4, 5}));
  EXPECT_DOUBLE_EQ(c.seconds[static_cast<int>(TimeClass::kH2D)], 8);
  EXPECT_DOUBLE_EQ(c.seconds[static_cast<int>(TimeClass::kCompute)], 2.3);
  EXPECT_NEAR(c.seconds[static_cast<int>(TimeClass::kIdle)], 0.2 + 0.5, 1e-12);  // the late start; rank 1's tail
  double sum = 0;
  for (double v : c.seconds) sum += v;
  EXPECT_DOUBLE_EQ(sum, t.iteration_s);
  EXPECT_EQ(c.bottleneck, TimeClass::kH2D);
  EXPECT_NEAR(c.waited[static_cast<int>(TimeClass::kCompute)], 0.2, 1e-12);  // fwd2's late start
  EXPECT_NEAR(c.Charged(static_cast<int>(TimeClass::kCompute)), 2.5, 1e-12);
  // Fast copies: the forwards are the path.
  const Timeline fast = BuildTimeline(
      p, {{0, 0, 0, 0.1}, {0, 1, 0.1, 2.6}, {0, 2, 0.1, 0.2}, {0, 3, 2.6, 5.1}, {0, 4, 0.2, 0.3}, {0, 5, 5.1, 7.6}},
      "run");
  const CriticalPath cf = AnalyzeCriticalPath(p, fast, 0);
  EXPECT_EQ(cf.bottleneck, TimeClass::kCompute);
  EXPECT_EQ(cf.ops.front(), 0);
}

// A collective starts when the last rank is ready for it: the path goes on
// at that rank. Rank 1's fetch ends at 3, rank 0's at 1; the allgather
// [3, 4] then the forward [4, 6] on rank 0: fetch (rank 1), allgather,
// forward, and no wait.
// A fetch (H2D) on every one of `ranks` ranks, then their allgather.
Plan FetchThenAllgather(int ranks) {
  Plan p;
  p.scenario = "collective";
  p.world_size = ranks;
  p.gpus_per_node = std::min(ranks, 16);
  p.nodes = ranks / p.gpus_per_node;
  p.groups = {CommGroup{}};
  for (int r = 0; r < ranks; ++r) p.groups[0].ranks.push_back(r);
  Op fetch;
  fetch.id = 0;
  fetch.name = "fetch";
  fetch.kind = OpKind::kCopyH2D;
  fetch.stream = Stream::kH2D;
  Op ag;
  ag.id = 1;
  ag.name = "allgather";
  ag.kind = OpKind::kAllGather;
  ag.stream = Stream::kComm;
  ag.group = 0;
  ag.deps = {0};
  p.ops = {fetch, ag};
  return p;
}

TEST(Timeline, CriticalPathFollowsACollectiveToTheRankReadyLast) {
  Plan p = FetchThenAllgather(2);
  Op fwd;
  fwd.id = 2;
  fwd.name = "fwd";
  fwd.deps = {1};
  p.ops.push_back(fwd);
  const Timeline t =
      BuildTimeline(p, {{0, 0, 0, 1}, {1, 0, 0, 3}, {0, 1, 3, 4}, {1, 1, 3, 4}, {0, 2, 4, 6}, {1, 2, 4, 6}}, "run");
  const CriticalPath c = AnalyzeCriticalPath(p, t, 0);
  EXPECT_EQ(c.ops, (std::vector<OpId>{0, 1, 2}));
  EXPECT_EQ(c.ranks, (std::vector<int>{1, 0, 0}));
  EXPECT_DOUBLE_EQ(c.seconds[static_cast<int>(TimeClass::kH2D)], 3);  // rank 1's fetch
  EXPECT_DOUBLE_EQ(c.seconds[static_cast<int>(TimeClass::kIdle)], 0);
  // The timeline keeps the ranks; its trace draws the first arrow from
  // rank 1's fetch and reads the ranks back.
  EXPECT_EQ(t.critical_path_ranks, c.ranks);
  std::ostringstream trace;
  WriteChromeTrace(t, trace);
  EXPECT_NE(trace.str().find("\"critical_path_ranks\":[1,0,0]"), std::string::npos);
  const size_t arrow = trace.str().find("\"cat\":\"critical_path\",\"ph\":\"s\"");
  ASSERT_NE(arrow, std::string::npos);
  EXPECT_NE(trace.str().find("\"pid\":1,", arrow), std::string::npos);
  EXPECT_LT(trace.str().find("\"pid\":1,", arrow), trace.str().find('}', arrow));
  auto back = ReadChromeTrace(trace.str(), "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->critical_path_ranks, c.ranks);
}

// The same with 512 ranks (an --all-nodes replay of the ZeRO-Infinity
// paper's 512 GPUs): the path still goes to the rank whose fetch ended last.
TEST(Timeline, CriticalPathFollowsACollectiveAcross512Ranks) {
  constexpr int kRanks = 512;
  const Plan p = FetchThenAllgather(kRanks);
  std::vector<OpSpan> spans;
  for (int r = 0; r < kRanks; ++r) {
    spans.push_back({r, 0, 0, r == 300 ? 3.0 : 1.0});  // rank 300's fetch ends last
    spans.push_back({r, 1, 3, 4});
  }
  const CriticalPath c = AnalyzeCriticalPath(p, BuildTimeline(p, spans, "run"), 0);
  EXPECT_EQ(c.ops, (std::vector<OpId>{0, 1}));
  EXPECT_EQ(c.ranks, (std::vector<int>{300, 0}));
  EXPECT_DOUBLE_EQ(c.seconds[static_cast<int>(TimeClass::kH2D)], 3);
}

TEST(Timeline, CsvExports) {
  const Timeline t = BuildTimeline(MemPlan(), {{0, 0, 0, 1}, {0, 1, 1, 3}, {0, 2, 0.5, 2}}, "run");
  std::ostringstream ops, mem;
  WriteOpsCsv(t, ops);
  WriteMemoryCsv(t, mem);
  EXPECT_EQ(ops.str().substr(0, ops.str().find('\n')), "rank,op,name,kind,stream,layer,start_s,end_s,bytes,flops");
  EXPECT_NE(ops.str().find("0,2,copy,copy_h2d,h2d,-1,0.5,2,0,0"), std::string::npos) << ops.str();
  EXPECT_NE(mem.str().find("gpu,0,3,100,100,0,0,0,0,0,0,0"), std::string::npos) << mem.str();
}

// Overflows names each tier whose peak exceeds its capacity, with the bytes
// over; an unknown (0) capacity is never exceeded.
TEST(Timeline, OverflowsNameTheTierAndTheBytesOver) {
  Timeline t;
  t.capacity[0] = Bytes(1000);
  t.capacity[1] = Bytes(0);
  t.capacity[2] = Bytes(5000);
  MemorySeries gpu, cpu, nvme;
  gpu.tier = Tier::kGpu, gpu.peak = Bytes(1500);
  cpu.tier = Tier::kCpu, cpu.peak = Bytes(1LL << 40);
  nvme.tier = Tier::kNvme, nvme.peak = Bytes(5000);
  t.memory = {gpu, cpu, nvme};
  const auto over = Overflows(t);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0], "gpu (per GPU): peak " + FormatBytes(Bytes(1500)) + " exceeds the " + FormatBytes(Bytes(1000)) +
                         " capacity by " + FormatBytes(Bytes(500)));
  t.memory[0].peak = Bytes(1000);  // exactly full fits
  EXPECT_TRUE(Overflows(t).empty());
}

}  // namespace
}  // namespace strata
