// Which transient bytes a reader can find unwritten (fresh_bytes.h): the
// planner's marks (Op::grads_store, Buffer::cleared) and the validator's
// "unwritten_read".
#include "strata/plan/fresh_bytes.h"

#include <gtest/gtest.h>

#include "strata/plan/op_regions.h"
#include "strata/plan/plan_json.h"
#include "strata/plan/validator.h"
#include "test_util.h"

namespace strata {
namespace {

Op NewOp(OpId id, const char* name, OpKind kind, Stream stream) {
  Op op;
  op.id = id;
  op.name = name;
  op.kind = kind;
  op.stream = stream;
  if (id > 0) op.deps = {id - 1};
  return op;
}

// A CPU source copied in two halves into a fresh GPU buffer, then reduced
// by an allreduce that reads [0, read_bytes) of it.
Plan Halves(int64_t read_bytes, int first_half_rank) {
  Plan p;
  p.scenario = "halves";
  for (Bytes& c : p.capacity) c = Bytes(1 << 20);
  p.world_size = 2;
  p.gpus_per_node = 2;
  p.groups.push_back({"dp", {0, 1}});
  p.buffers = {{0, "src", Tier::kCpu, StateKind::kParam16, Bytes(200), true},
               {1, "fresh", Tier::kGpu, StateKind::kCommBuffer, Bytes(200), false}};
  Op a = NewOp(0, "first", OpKind::kCopyH2D, Stream::kH2D);
  a.allocs = {1};
  a.reads = {0};
  a.writes = {1};
  a.moves = {{Region{0, Bytes(0), Bytes(100)}, Region{1, Bytes(0), Bytes(100)}, false, false, first_half_rank}};
  Op b = NewOp(1, "second", OpKind::kCopyH2D, Stream::kH2D);
  b.reads = {0};
  b.writes = {1};
  b.moves = {{Region{0, Bytes(100), Bytes(100)}, Region{1, Bytes(100), Bytes(100)}}};
  Op r = NewOp(2, "reduce", OpKind::kAllReduce, Stream::kComm);
  r.group = 0;
  r.reads = {1};
  r.writes = {1};
  r.frees = {1};
  r.moves = {{Region{1, Bytes(0), Bytes(read_bytes)}, Region{1, Bytes(0), Bytes(read_bytes)}}};
  p.ops = {a, b, r};
  return p;
}

std::vector<std::string> Kinds(const ValidationReport& r) {
  std::vector<std::string> k;
  for (const auto& v : r.violations) k.push_back(v.kind);
  return k;
}

TEST(FreshBytes, ReadingWhatTheCopiesWroteNeedsNoClearing) {
  const Plan p = Halves(200, -1);
  EXPECT_TRUE(FindUnwrittenReads(p).empty());
  EXPECT_TRUE(ValidatePlan(p).ok());
}

// A read past what was written: the validator names the op, the region and
// the buffer until the buffer is cleared, which is what the planner's marks
// do.
TEST(FreshBytes, AReadPastTheWrittenBytesNeedsTheBufferCleared) {
  Plan p = Halves(200, -1);
  p.ops[1].moves[0].dst.bytes = Bytes(50);  // [150, 200) stays unwritten
  p.ops[1].moves[0].src.bytes = Bytes(50);
  const auto u = FindUnwrittenReads(p);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].op, 2);
  EXPECT_EQ(u[0].buffer, 1);
  auto r = ValidatePlan(p);
  ASSERT_EQ(Kinds(r), std::vector<std::string>{"unwritten_read"});
  EXPECT_NE(r.violations[0].message.find("op 2 'reduce' reads its move source [0, +200) in buffer 1 'fresh' (gpu)"),
            std::string::npos)
      << r.violations[0].message;
  MarkFreshBytes(p);
  EXPECT_TRUE(p.buffers[1].cleared);
  EXPECT_TRUE(ValidatePlan(p).ok());
}

// A move naming a rank writes that rank's memory only: a read on every rank
// (an allreduce's source) finds the other rank's half unwritten.
TEST(FreshBytes, ARankOwnWriteCoversThatRankOnly) {
  Plan p = Halves(200, 0);
  ASSERT_EQ(FindUnwrittenReads(p).size(), 1u);
  MarkFreshBytes(p);
  EXPECT_TRUE(p.buffers[1].cleared);
  // An allgather's destination is written on every rank, whatever its moves name.
  p = Halves(200, 0);
  p.ops[0].kind = OpKind::kAllGather;
  p.ops[0].stream = Stream::kComm;
  p.ops[0].group = 0;
  p.ops[0].moves.push_back(p.ops[0].moves[0]);
  p.ops[0].moves[1].rank = 1;
  EXPECT_TRUE(FindUnwrittenReads(p).empty());
}

// Backward gradients: the first into a fresh slot is stored, a second into
// the same bytes adds to it; an accumulating move into a fresh buffer needs
// it cleared.
TEST(FreshBytes, TheFirstGradientIntoFreshBytesIsStored) {
  Plan p = Halves(200, -1);
  p.modules.push_back({"m", 0, {0}, 0.0});
  p.param_groups.resize(1);
  Op b1 = NewOp(2, "bwd1", OpKind::kBackward, Stream::kCompute);
  b1.module = 0;
  b1.reads = {1};
  b1.writes = {1};
  b1.params = {Region{1, Bytes(0), Bytes(50)}};
  Op b2 = b1;
  b1.allocs = {};
  p.buffers.push_back({2, "grad", Tier::kGpu, StateKind::kCommBuffer, Bytes(64), false});
  b1.allocs = {2};
  b1.writes.push_back(2);
  b1.grads = {Region{2, Bytes(0), Bytes(64)}};
  b2.id = 3;
  b2.name = "bwd2";
  b2.deps = {2};
  b2.writes.push_back(2);
  b2.grads = {Region{2, Bytes(0), Bytes(64)}};
  Op r = p.ops[2];
  r.id = 4;
  r.deps = {3};
  r.frees = {1, 2};
  p.ops = {p.ops[0], p.ops[1], b1, b2, r};
  MarkFreshBytes(p);
  EXPECT_TRUE(StoresGrad(p.ops[2], 0));
  EXPECT_FALSE(StoresGrad(p.ops[3], 0));
  EXPECT_FALSE(p.buffers[2].cleared);
  EXPECT_TRUE(ValidatePlan(p).ok());
  // Without the store, the first backward adds to bytes nobody wrote.
  p.ops[2].grads_store = 0;
  EXPECT_EQ(Kinds(ValidatePlan(p)), std::vector<std::string>{"unwritten_read"});
  // A store the op cannot make (it names one gradient) is a layout error.
  p.ops[2].grads_store = 2;
  EXPECT_EQ(Kinds(ValidatePlan(p))[0], "layout");
}

// The planner's plans: ZeRO-3's IPG bucket is neither cleared nor added
// to (each gradient is stored into its padded slot), on two and four ranks
// and on one with the optimizer offloaded, and the marks survive the JSON
// codec.
TEST(FreshBytes, TheIpgBucketIsNotCleared) {
  Scenario offload = testing::SmallGpt(3, 1);
  offload.zero.offload_optimizer.device = OffloadDevice::kCpu;
  for (const Scenario& s : {testing::SmallGpt(3, 2), testing::SmallGpt(3, 4), offload}) {
    const Plan p = testing::MustPlanValid(s);
    int buckets = 0, stored = 0;
    for (const Buffer& b : p.buffers)
      if (b.name.find("ipg_bucket") != std::string::npos) {
        ++buckets;
        EXPECT_FALSE(b.cleared) << b.name;
      }
    for (const Op& op : p.ops)
      for (size_t k = 0; k < op.grads.size(); ++k) stored += StoresGrad(op, k);
    EXPECT_GT(buckets, 0);
    EXPECT_GT(stored, 0);
    auto back = DecodePlan(EncodePlan(p));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, p);
  }
}

}  // namespace
}  // namespace strata
