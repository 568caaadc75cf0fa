#include "strata/plan/validator.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

// A tiny hand-made plan: h2d copies a buffer to the GPU, compute uses it.
Plan TinyPlan() {
  Plan p;
  p.scenario = "tiny";
  p.capacity[0] = Bytes(1000);
  p.capacity[1] = Bytes(1000);
  p.capacity[2] = Bytes(1000);
  p.groups.push_back({"dp", {0}});
  p.buffers = {
      {0, "host.src", Tier::kCpu, StateKind::kParam16, Bytes(100), true},
      {1, "dev.dst", Tier::kGpu, StateKind::kGatherBuffer, Bytes(400), false},
  };
  Op h2d;
  h2d.id = 0;
  h2d.name = "copy";
  h2d.kind = OpKind::kCopyH2D;
  h2d.stream = Stream::kH2D;
  h2d.bytes = Bytes(100);
  h2d.allocs = {1};
  h2d.reads = {0};
  h2d.writes = {1};
  Op fwd;
  fwd.id = 1;
  fwd.name = "compute";
  fwd.deps = {0};
  fwd.reads = {1};
  fwd.frees = {1};
  p.ops = {h2d, fwd};
  return p;
}

std::vector<std::string> Kinds(const ValidationReport& r) {
  std::vector<std::string> k;
  for (const auto& v : r.violations) k.push_back(v.kind);
  return k;
}

TEST(Validator, AcceptsTheTinyPlanAndMeasuresPeaks) {
  const auto r = ValidatePlan(TinyPlan());
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.memory.peak[0].v, 400);
  EXPECT_EQ(r.memory.peak[1].v, 100);
  EXPECT_EQ(r.memory.peak_op[0], 0);
  EXPECT_EQ(r.memory.at_peak[0][static_cast<int>(StateKind::kGatherBuffer)].v, 400);
}

TEST(Validator, CpuAndNvmeArePerNode) {
  Plan p = TinyPlan();
  p.gpus_per_node = 8;
  p.world_size = 8;
  const auto r = ValidatePlan(p);
  EXPECT_EQ(r.memory.peak[1].v, 800);  // 8 ranks x 100 bytes
  EXPECT_EQ(r.memory.peak[0].v, 400);  // GPU stays per rank
  p.gpus_per_node = 16;
  p.world_size = 16;
  const auto over = ValidatePlan(p);
  ASSERT_EQ(Kinds(over), std::vector<std::string>{"capacity"});
  EXPECT_EQ(over.violations[0].tier, Tier::kCpu);
  EXPECT_EQ(over.violations[0].node, 0);
  EXPECT_EQ((over.violations[0].needed - over.violations[0].capacity).v, 600);
}

TEST(Validator, DetectsCycles) {
  Plan p = TinyPlan();
  p.ops[0].deps = {1};
  const auto r = ValidatePlan(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::find(Kinds(r).begin(), Kinds(r).end(), "cycle"), Kinds(r).end());
  bool named = false;
  for (const auto& v : r.violations) named |= v.kind == "cycle" && v.message.find("'copy'") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(Validator, DetectsCyclesThroughStreamOrder) {
  Plan p = TinyPlan();
  // Both on the compute stream: op 1 after op 0 by stream order, op 0 waits for op 1.
  p.ops[0].stream = Stream::kCompute;
  p.ops[1].deps = {};
  p.ops[0].deps = {1};
  EXPECT_NE(std::find(Kinds(ValidatePlan(p)).begin(), Kinds(ValidatePlan(p)).end(), "cycle"),
            Kinds(ValidatePlan(p)).end());
}

TEST(Validator, UseBeforeAllocAndAfterFree) {
  Plan p = TinyPlan();
  p.ops[0].allocs.clear();
  p.ops[1].frees.clear();
  p.ops[1].allocs = {1};
  auto r = ValidatePlan(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.violations[0].kind, "use_before_alloc");
  EXPECT_NE(r.violations[0].message.find("'dev.dst'"), std::string::npos);

  p = TinyPlan();
  Op late;
  late.id = 2;
  late.name = "late";
  late.deps = {1};
  late.reads = {1};
  p.ops.push_back(late);
  r = ValidatePlan(p);
  // Also a race: nothing orders the late use before the free.
  ASSERT_EQ(Kinds(r), (std::vector<std::string>{"use_after_free", "race"}));
  EXPECT_EQ(r.violations[0].op, 2);
}

TEST(Validator, DoubleAllocAndNeverFreed) {
  Plan p = TinyPlan();
  p.ops[1].frees.clear();
  auto r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"never_freed"});
  p = TinyPlan();
  p.ops[1].allocs = {1};
  r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), (std::vector<std::string>{"double_alloc", "race"}));
  p = TinyPlan();
  p.ops[1].frees = {0, 1};
  r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"double_free"});
}

// Sequentially fine, but under concurrency the compute could free the buffer
// before the copy that fills it has run: no dependency orders them.
TEST(Validator, UnorderedLifetimeIsARace) {
  Plan p = TinyPlan();
  p.ops[1].deps.clear();
  const auto r = ValidatePlan(p);
  ASSERT_FALSE(r.ok());
  // Both ends: the copy is not ordered before the free, the compute not after the allocation.
  EXPECT_EQ(Kinds(r), (std::vector<std::string>{"race", "race"}));
  EXPECT_NE(r.violations[0].message.find("not ordered before op 1 'compute', which frees it"), std::string::npos)
      << r.violations[0].message;
  EXPECT_NE(r.violations[1].message.find("not ordered after op 0 'copy', which allocates it"), std::string::npos)
      << r.violations[1].message;
  // Stream order counts as ordering: on one stream the copy runs first.
  p.ops[0].stream = Stream::kCompute;
  EXPECT_TRUE(ValidatePlan(p).ok());
}

// Data hazards on a resident buffer: a second copy reads bytes the first
// writes, on another stream with no dependency (the accumulation read-back
// bug: a micro step read partial gradient sums from NVMe before the previous
// micro step's write of them). Ordering them, or disjoint bytes, is fine.
TEST(Validator, UnorderedReadOfWrittenBytesIsAHazard) {
  Plan p = TinyPlan();
  p.buffers.push_back({2, "host.sums", Tier::kCpu, StateKind::kGrad, Bytes(200), true});
  p.ops[0].moves = {{Region{0, Bytes(0), Bytes(100)}, Region{1, Bytes(0), Bytes(100)}}};
  Op wr;
  wr.id = 2;
  wr.name = "write_sums";
  wr.kind = OpKind::kCopyD2H;
  wr.stream = Stream::kD2H;
  wr.bytes = Bytes(100);
  wr.reads = {0};
  wr.writes = {2};
  wr.moves = {{Region{0, Bytes(0), Bytes(100)}, Region{2, Bytes(50), Bytes(100)}}};
  Op rd = wr;
  rd.id = 3;
  rd.name = "read_sums";
  rd.kind = OpKind::kCopyH2D;
  rd.stream = Stream::kH2D;
  rd.reads = {2};
  rd.writes = {0};
  rd.moves = {
      {Region{2, Bytes(100), Bytes(100)}, Region{0, Bytes(0), Bytes(100)}}};  // overlaps [100, 150) of the write
  p.ops.push_back(wr);
  p.ops.push_back(rd);
  auto r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), (std::vector<std::string>{"hazard", "hazard"})) << r.violations[0].message;
  // Read after write on buffer 2, and the read-back's write of buffer 0
  // against the write's read of it (write after read).
  EXPECT_NE(r.violations[0].message.find("op 3 'read_sums' writes what op 2 'write_sums' reads in buffer 0"),
            std::string::npos)
      << r.violations[0].message;
  EXPECT_NE(r.violations[1].message.find("op 3 'read_sums' reads what op 2 'write_sums' writes in buffer 2 "
                                         "'host.sums' (cpu) [100, 150)"),
            std::string::npos)
      << r.violations[1].message;
  p.ops[3].deps = {2};
  EXPECT_TRUE(ValidatePlan(p).ok());
  // Unordered again, but on disjoint bytes: reading [150, 200) of the sums
  // into a buffer of its own.
  p.buffers.push_back({3, "host.out", Tier::kCpu, StateKind::kGrad, Bytes(50), true});
  p.ops[3].deps.clear();
  p.ops[3].writes = {3};
  p.ops[3].moves = {{Region{2, Bytes(150), Bytes(50)}, Region{3, Bytes(0), Bytes(50)}}};
  EXPECT_TRUE(ValidatePlan(p).ok()) << ValidatePlan(p).violations[0].message;
}

TEST(Validator, RegionsMustFitAndBeDeclared) {
  Plan p = TinyPlan();
  p.ops[0].moves = {{Region{0, Bytes(0), Bytes(100)}, Region{1, Bytes(0), Bytes(100)}}};
  EXPECT_TRUE(ValidatePlan(p).ok());
  p.ops[0].moves = {{Region{0, Bytes(50), Bytes(100)}, Region{1, Bytes(0), Bytes(100)}}};  // past the 100-byte source
  auto r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"layout"});
  EXPECT_NE(r.violations[0].message.find("lies outside buffer 0 'host.src'"), std::string::npos)
      << r.violations[0].message;
  p.ops[0].moves = {{Region{0, Bytes(0), Bytes(100)}, Region{1, Bytes(0), Bytes(100)}}};
  p.ops[1].grads = {Region{0, Bytes(0), Bytes(10)}};  // writes a buffer it does not list
  r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"layout"});
  EXPECT_NE(r.violations[0].message.find("without listing it in its writes"), std::string::npos);
}

// A compute op names one parameter region per group of its module (and a
// backward one gradient region each): the executor relies on it.
TEST(Validator, ComputeRegionsMatchTheModulesGroups) {
  Plan p = TinyPlan();
  p.param_groups.resize(2);
  p.modules.push_back({"fc", 0, {0, 1}, 0.0});
  p.ops[1].module = 0;
  p.ops[1].params = {Region{1, Bytes(0), Bytes(100)}, Region{1, Bytes(100), Bytes(50)}};
  p.buffers[1].cleared = true;  // the copy moves nothing: the forward reads zeros
  EXPECT_TRUE(ValidatePlan(p).ok());
  p.ops[1].params.pop_back();
  auto r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"reference"});
  EXPECT_NE(r.violations[0].message.find("1 parameter and 0 gradient regions for a module of 2"), std::string::npos)
      << r.violations[0].message;
  p.ops[1].params = {Region{1, Bytes(0), Bytes(100)}, Region{1, Bytes(100), Bytes(50)}};
  p.ops[1].grads = {Region{1, Bytes(0), Bytes(100)}};  // a forward writes no gradient
  p.ops[1].writes = {1};
  EXPECT_EQ(Kinds(ValidatePlan(p)), std::vector<std::string>{"reference"});
}

TEST(Validator, CapacityViolationNamesTierRankOpAndBytesOver) {
  Plan p = TinyPlan();
  p.capacity[0] = Bytes(300);
  const auto r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"capacity"});
  const Violation& v = r.violations[0];
  EXPECT_EQ(v.tier, Tier::kGpu);
  EXPECT_EQ(v.rank, 0);
  EXPECT_EQ(v.op, 0);
  EXPECT_EQ(v.needed.v, 400);
  EXPECT_EQ(v.capacity.v, 300);
  EXPECT_NE(v.message.find("gpu tier over capacity on rank 0"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("op 0 'copy'"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("over by 100 B (100 bytes)"), std::string::npos) << v.message;
}

TEST(Validator, GpuCapacityViolationNamesTheReservedMemory) {
  Plan p = TinyPlan();
  p.capacity[0] = Bytes(300);
  p.gpu_reserved = Bytes(700);
  const auto r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"capacity"});
  const std::string& m = r.violations[0].message;
  EXPECT_NE(m.find("over by 100 B (100 bytes); the capacity is hardware.gpu.memory " + FormatBytes(Bytes(1000)) +
                   " less " + FormatBytes(Bytes(700)) + " of hardware.gpu.reserved_memory"),
            std::string::npos)
      << m;
}

TEST(Validator, ResidentStateAloneCanOverflow) {
  Plan p = TinyPlan();
  p.capacity[1] = Bytes(50);
  const auto r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"capacity"});
  EXPECT_NE(r.violations[0].message.find("before the first op"), std::string::npos);
}

TEST(Validator, BadReferencesAndListOrder) {
  Plan p = TinyPlan();
  p.ops[1].reads = {7};
  EXPECT_EQ(Kinds(ValidatePlan(p)), std::vector<std::string>{"reference"});
  p = TinyPlan();
  std::swap(p.ops[0], p.ops[1]);
  p.ops[0].id = 0;
  p.ops[1].id = 1;
  p.ops[0].deps = {1};
  p.ops[1].deps = {};
  const auto r = ValidatePlan(p);
  EXPECT_EQ(Kinds(r), std::vector<std::string>{"order"});
}

}  // namespace
}  // namespace strata
