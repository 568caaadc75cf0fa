// The plan's wire codec (strata/plan/plan_wire.h): what the simulator's
// helper process receives. Every plan round-trips exactly; the encoding is
// canonical (bytes that decode re-encode to themselves), so a corrupted
// message either is refused with where it broke or is some other plan,
// which ValidatePlan then judges; it never reads past its bytes.
#include "strata/plan/plan_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "strata/plan/plan_json.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata {
namespace {

TEST(PlanWire, RoundTripsExactly) {
  for (const char* name : {"seed", "gpt-tiny", "gpt2-1.5b-v100", "llama-70b-8xa100"}) {
    SCOPED_TRACE(name);
    auto plan = BuildPlan(testing::Builtin(name));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const std::string bytes = EncodePlanWire(*plan);
    auto decoded = DecodePlanWire(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_TRUE(*decoded == *plan);
    EXPECT_EQ(EncodePlanWire(*decoded), bytes);
    EXPECT_LT(bytes.size(), EncodePlan(*plan).size());  // lighter than the JSON it replaces
  }
  // Every ZeRO stage (stages 1-2 name ranks in their moves), NVMe-homed
  // optimizer states, and tensor and pipeline groups with their stages.
  for (int stage = 0; stage <= 3; ++stage) {
    Scenario s = testing::SmallGpt(stage, 4);
    if (stage >= 1) s.zero.offload_optimizer.device = OffloadDevice::kNvme;
    if (stage == 1) s.parallelism.tensor = 2;
    if (stage == 0) s.parallelism.pipeline = 2;
    auto plan = BuildPlan(s);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    auto decoded = DecodePlanWire(EncodePlanWire(*plan));
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_TRUE(*decoded == *plan) << "stage " << stage;
  }
}

void ExpectRefused(std::string_view bytes, const std::string& needle) {
  auto p = DecodePlanWire(bytes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status().message();
}

TEST(PlanWire, RefusesWhatItCannotTrust) {
  Plan small;
  small.scenario = "x";
  const std::string good = EncodePlanWire(small);
  ASSERT_TRUE(DecodePlanWire(good).ok());
  ExpectRefused("", "no magic word");
  std::string bad = good;
  bad[0] = 'J';
  ExpectRefused(bad, "no magic word");
  ExpectRefused(good + "x", "1 bytes left over");
  ExpectRefused(good.substr(0, good.size() - 1), "cut short");
  // The scenario name's length (after the 8-byte magic word) claims 2^40
  // bytes: refused before anything is allocated.
  bad = good;
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(bad.data() + 8, &huge, sizeof huge);
  ExpectRefused(bad, "at byte 16: a count of 1099511627776 past the end");
  // A flag other than 0 or 1, and an enum out of range.
  Plan one = small;
  one.buffers.push_back(Buffer{});
  bad = EncodePlanWire(one);
  // Buffer: id(4) name(8+0) tier(4) kind(4) bytes(8) resident(1) ...,
  // after the buffer count, the first byte where the two encodings differ.
  size_t count = 0;
  while (count < good.size() && good[count] == bad[count]) ++count;
  const size_t buffer = count + 8;
  std::string flag = bad;
  flag[buffer + 4 + 8 + 4 + 4 + 8] = 2;
  ExpectRefused(flag, "a flag of 2");
  std::string tier = bad;
  const int32_t nine = 9;
  std::memcpy(tier.data() + buffer + 4 + 8, &nine, sizeof nine);
  ExpectRefused(tier, "an enum value of 9");
}

TEST(PlanWire, CorruptedBytesAreRefusedOrAnotherPlan) {
  const Plan plan = testing::MustPlanValid(testing::Builtin("seed"));
  const std::string bytes = EncodePlanWire(plan);
  // Every cut is refused.
  for (size_t n = 0; n < bytes.size(); n += 1 + n / 16) ExpectRefused(bytes.substr(0, n), "plan wire bytes");
  // Random bytes overwritten: refused, or a plan whose encoding they are.
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string b = bytes;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    auto p = DecodePlanWire(b);
    if (p.ok())
      EXPECT_EQ(EncodePlanWire(*p), b);
    else
      EXPECT_EQ(p.status().code(), Status::Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace strata
