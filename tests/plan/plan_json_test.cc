#include "strata/plan/plan_json.h"

#include <gtest/gtest.h>

#include <tuple>

#include "strata/plan/plan_wire.h"
#include "strata/planner/planner.h"
#include "strata/report/line_plot.h"
#include "test_util.h"

namespace strata {
namespace {

// `plan` back from its JSON `text` and from its wire encoding, equal.
void ExpectBothCodecsRoundTrip(const Plan& plan, const std::string& text) {
  auto decoded = DecodePlan(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(*decoded == plan);
  auto wired = DecodePlanWire(EncodePlanWire(plan));
  ASSERT_TRUE(wired.ok()) << wired.status().message();
  EXPECT_TRUE(*wired == plan);
}

TEST(PlanJson, RoundTripIsByteIdentical) {
  for (const char* name : {"seed", "gpt2-1.5b-v100", "llama-70b-8xa100", "gpt-1t-dgx2"}) {
    SCOPED_TRACE(name);
    auto plan = BuildPlan(testing::Builtin(name));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const std::string a = EncodePlan(*plan);
    auto decoded = DecodePlan(a);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_TRUE(*decoded == *plan);
    EXPECT_EQ(EncodePlan(*decoded), a);
    // Pretty output decodes to the same plan.
    auto pretty = DecodePlan(EncodePlan(*plan, /*pretty=*/true));
    ASSERT_TRUE(pretty.ok());
    EXPECT_EQ(EncodePlan(*pretty), a);
  }
}

TEST(PlanJson, StageMatrixRoundTrips) {
  for (int stage = 0; stage <= 3; ++stage) {
    Scenario s = testing::SmallGpt(stage, 2);
    if (stage >= 1) s.zero.offload_optimizer.device = OffloadDevice::kCpu;
    auto plan = BuildPlan(s);
    ASSERT_TRUE(plan.ok());
    const std::string a = EncodePlan(*plan);
    EXPECT_EQ(EncodePlan(*DecodePlan(a)), a);
  }
}

// Hooks (host_seconds) and ZeRO++'s quantized collectives (quant_bits)
// round-trip, in JSON and on the wire; bad values are refused by name.
TEST(PlanJson, HooksAndQuantizedCollectivesRoundTrip) {
  Scenario s = testing::SmallGpt(3, 4);
  s.hardware.nodes = 2;
  s.hardware.gpus_per_node = 2;
  s.zero.zero_hpz_partition_size = 2;
  s.zero.zero_quantized_weights = true;
  s.zero.zero_quantized_gradients = true;
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::string a = EncodePlan(*plan);
  ASSERT_NE(a.find("\"quant_bits\":8"), std::string::npos);
  ASSERT_NE(a.find("\"quant_bits\":4"), std::string::npos);
  ASSERT_NE(a.find("\"host_seconds\":"), std::string::npos);
  ExpectBothCodecsRoundTrip(*plan, a);
  // A field's first value replaced whole.
  for (const auto& [key, to, needle] : {std::tuple{"\"quant_bits\":", "3", "quant_bits: 4 or 8"},
                                        std::tuple{"\"host_seconds\":", "-1", "host_seconds: seconds, >= 0"},
                                        std::tuple{"\"host_seconds\":", "\"x\"", "host_seconds: seconds, >= 0"}}) {
    std::string bad = a;
    const size_t at = bad.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    const size_t value = at + std::string(key).size();
    bad.replace(value, bad.find_first_of(",}", value) - value, to);
    auto r = DecodePlan(bad);
    ASSERT_FALSE(r.ok()) << to;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  }
}

// Compression (policy.compression): the run record's codec and each NVMe
// op's stored ratio survive both codecs; a ratio outside (0, 1] is refused.
TEST(PlanJson, CompressionRoundTrips) {
  Scenario s = testing::Builtin("seed");
  s.policy.compression = {CodecKind::kZstd, 3, 0.5, 4};
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::string a = EncodePlan(*plan);
  ASSERT_NE(a.find("\"stored\":0.5"), std::string::npos);
  ASSERT_NE(a.find("\"codec\":\"zstd\""), std::string::npos);
  ExpectBothCodecsRoundTrip(*plan, a);
  for (const auto& [from, to, needle] :
       {std::tuple{"\"stored\":0.5", "\"stored\":1.5", "stored: a ratio in (0, 1]"},
        std::tuple{"\"codec\":\"zstd\"", "\"codec\":\"gzip\"", "compression.codec: unknown codec 'gzip'"}}) {
    std::string bad = a;
    bad.replace(bad.find(from), std::string(from).size(), to);
    auto r = DecodePlan(bad);
    ASSERT_FALSE(r.ok()) << to;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  }
}

TEST(PlanJson, DeterministicAcrossRuns) {
  const Scenario s = testing::Builtin("seed");
  EXPECT_EQ(EncodePlan(*BuildPlan(s)), EncodePlan(*BuildPlan(s)));
}

TEST(PlanJson, DecodeErrorsNameTheField) {
  auto plan = BuildPlan(testing::Builtin("seed"));
  ASSERT_TRUE(plan.ok());
  std::string text = EncodePlan(*plan);
  EXPECT_FALSE(DecodePlan("{not json").ok());
  EXPECT_NE(DecodePlan("{}").status().message().find("missing field 'format'"), std::string::npos);

  std::string bad = text;
  bad.replace(bad.find("\"kind\":\"forward\""), 16, "\"kind\":\"sideways\"");
  auto r = DecodePlan(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kind: unknown value 'sideways'"), std::string::npos) << r.status().message();

  bad = text;
  bad.replace(bad.find("\"world_size\":1"), 14, "\"world_size\":\"1\"");
  r = DecodePlan(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("plan.world_size: expected an integer"), std::string::npos);

  // An older plan (version 1: one parameter group per module; version 2: no
  // moment regions per group) is refused by name.
  // Version 5 had no operand on tensor-parallel collectives, version 6 no
  // copy_bytes on collectives, version 7 no backed flag on buffers (an
  // older reader would allocate what is only counted), version 8 no run
  // record (an executor could not run it alone), version 9 no host stream,
  // version 10 no cleared buffers or stored gradients (its executor zeroed
  // every buffer an op does not overwrite), version 11 no framework (an
  // FSDP plan's narrowing allgathers would read as plain ones), version
  // 12 no coalesced writes (their runs would be written a move at a time),
  // version 13 no compression (its compressed frames would read as raw),
  // version 14 no striping (its parts would be read as one file), version
  // 15 no delayed update (its step would run before the gradients).
  for (const char* old : {"1", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15"}) {
    bad = text;
    bad.replace(bad.find("\"version\":16"), 12, std::string("\"version\":") + old);
    r = DecodePlan(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(std::string("unsupported version ") + old), std::string::npos)
        << r.status().message();
  }
  // A collective's copy kernels' bytes: carried, and never negative.
  {
    auto two = BuildPlan(testing::SmallGpt(3, 2));
    ASSERT_TRUE(two.ok());
    const std::string t = EncodePlan(*two);
    const size_t at = t.find("\"copy_bytes\":");
    ASSERT_NE(at, std::string::npos);
    std::string neg = t;
    neg.insert(at + 13, "-");
    r = DecodePlan(neg);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("copy_bytes: bytes, >= 0"), std::string::npos) << r.status().message();
  }
  // A compute op's region list must be a list.
  bad = text;
  bad.replace(bad.find("\"params\":["), 10, "\"params\":7,\"x\":[");
  r = DecodePlan(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("params: expected a list"), std::string::npos) << r.status().message();
  // The run record: an unknown precision, a layer width that cannot be, a
  // swap directory index past the list.
  bad = text;
  bad.replace(bad.find("\"precision\":\"fp16\""), 18, "\"precision\":\"fp8\"");
  r = DecodePlan(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("plan.run.precision: unknown value 'fp8'"), std::string::npos)
      << r.status().message();
  bad = text;
  bad.replace(bad.find("\"sizes\":[1000"), 13, "\"sizes\":[-1");
  r = DecodePlan(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("plan.run.model.sizes: expected positive integers"), std::string::npos)
      << r.status().message();
  {
    Scenario s = testing::Builtin("seed");
    s.zero.offload_param.device = OffloadDevice::kNvme;
    auto nvme = BuildPlan(s);
    ASSERT_TRUE(nvme.ok());
    std::string t = EncodePlan(*nvme);
    const size_t at = t.find("\"nvme_dir\":0");
    ASSERT_NE(at, std::string::npos);
    t.replace(at, 12, "\"nvme_dir\":5");
    r = DecodePlan(t);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("nvme_dir: not an index of plan.run.nvme_dirs"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace strata

// The sweep plot's data (written by `strata sweep --plot`, drawn by
// strata-plot) round-trips, a point without y included; bad input is named.
namespace strata {
namespace {
TEST(LinePlotJson, RoundTripsAndRefusesBadInput) {
  LinePlot p;
  p.title = "seed: iteration time";
  p.x_label = "hardware.gpu.memory";
  p.y_label = "iteration time";
  p.y_unit = "s";
  p.x_log = true;
  p.series.push_back(
      {"hardware.pcie.bandwidth=1GB/s", {{2097152, "2MiB", false, 0}, {1073741824, "1GiB", true, 0.25}}});
  p.series.push_back({"hardware.pcie.bandwidth=4GB/s", {{1073741824, "1GiB", true, 0.125}}});
  p.series.push_back({"front", {{1e9, "", true, 2.5}}, 1, 0, false, 7.0});  // a scatter
  p.x_numeric = true;
  p.x_unit = "B";
  auto back = ParseLinePlotJson(LinePlotJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(back->series[0].points[0].has_y);
  auto bad = ParseLinePlotJson("{\"series\": [{\"points\": [{\"label\": \"a\"}]}]}", "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("p.json"), std::string::npos);
  EXPECT_FALSE(ParseLinePlotJson("[1, 2", "p.json").ok());
  EXPECT_FALSE(ParseLinePlotJson("{\"title\": \"x\"}", "p.json").ok());  // no series
  EXPECT_FALSE(ParseLinePlotJson("{\"series\": [{\"dot\": -1, \"points\": []}]}", "p.json").ok());
  EXPECT_FALSE(ParseLinePlotJson("{\"x_log\": true, \"series\": [{\"points\": [{\"x\": 0}]}]}", "p.json").ok());
}
}  // namespace
}  // namespace strata
