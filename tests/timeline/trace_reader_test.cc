// The trace loader: round trips, and every kind of bad file gives a clear
// error instead of a crash (a small fuzzer over the shipped golden traces).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "strata/timeline/trace_io.h"
#include "test_paths.h"

namespace strata {
namespace {

std::string Golden(const char* name) {
  std::ifstream in(std::string(testing::SourceDir()) + "/tests/golden/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Write(const Timeline& t) {
  std::ostringstream o;
  WriteChromeTrace(t, o);
  return o.str();
}

TEST(TraceReader, RoundTripsTheGoldenTraces) {
  for (const char* name : {"seed.trace.json", "small-gpt-2gpu.trace.json"}) {
    const std::string text = Golden(name);
    ASSERT_FALSE(text.empty()) << name;
    auto t = ReadChromeTrace(text, name);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(Write(*t), text) << name;
  }
}

TEST(TraceReader, ReadsTheSeedTimeline) {
  auto t = ReadChromeTrace(Golden("seed.trace.json"), "seed");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->scenario, "seed");
  EXPECT_EQ(t->source, "simulate");
  // fc1.weight copied up for both uses (reuse distance 0); the CPU step of
  // the persistent biases copies them up (step.sub_group1.param_out.gpu);
  // four module uses, each with its hooks (ZeRO-3's, 100 + 40 us).
  EXPECT_EQ(t->ops.size(), 28u);
  EXPECT_EQ(t->ops[0].name(), "m0.fwd.hook.fc0");
  EXPECT_EQ(t->ops[0].stream(), Stream::kHost);
  EXPECT_DOUBLE_EQ(t->ops[0].end_s, 140e-6);
  EXPECT_EQ(t->ops[1].name(), "m0.fwd.fetch_nvme.fc0.weight");
  EXPECT_EQ(t->ops[1].stream(), Stream::kNvmeRead);
  EXPECT_DOUBLE_EQ(t->ops[1].end_s, 0.002002944);  // fc0's 4 KiB-padded fp16 partition at 1 GB/s
  ASSERT_EQ(t->memory.size(), 3u);
  EXPECT_EQ(t->memory[0].tier, Tier::kGpu);
  // fc0's fp16 partition, fp32 master, moments and gradient (fc1's are in
  // CPU memory, under DeepSpeed's 1 MiB swap threshold).
  EXPECT_EQ(t->Peak(Tier::kNvme).v, 1'001'472LL * (2 + 4 + 8 + 4));
  EXPECT_EQ(t->capacity[0].v, 1LL << 30);
}

void ExpectError(const std::string& text, const std::string& needle) {
  auto r = ReadChromeTrace(text, "bad.json");
  ASSERT_FALSE(r.ok()) << text.substr(0, 80);
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("bad.json"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(TraceReader, ClearErrors) {
  ExpectError("", "empty file");
  ExpectError("[1, 2]", "not a Strata trace");
  ExpectError("{\"traceEvents\": []}", "not a Strata trace");
  ExpectError("{\"otherData\": {\"format\": \"perfetto\"}, \"traceEvents\": []}",
              "otherData.format is not 'strata.trace'");
  ExpectError("{\"otherData\": {\"format\": \"strata.trace\", \"version\": 1}, \"traceEvents\": [{\"ph\": \"X\"}]}",
              "op event without");
  const std::string seed = Golden("seed.trace.json");
  ExpectError(seed.substr(0, seed.size() / 2), "truncated");
  std::string bad = seed;
  bad.replace(bad.find("\"cat\":\"forward\""), 15, "\"cat\":\"sidewise\"");
  ExpectError(bad, "unknown cat 'sidewise'");
  bad = seed;
  bad[bad.find("\"ts\":") + 5] = 'x';
  ExpectError(bad, "expected a number");
  ExpectError(seed + "junk", "unexpected data after");
  // NaN and infinite times (from_chars reads them; JSON has neither) are
  // refused, not looped over or dropped.
  for (const char* v : {"nan", "NaN", "inf", "-inf", "infinity", "1e999"}) {
    bad = seed;
    const size_t at = bad.find("\"ts\":") + 5;
    bad.replace(at, bad.find(',', at) - at, v);
    ExpectError(bad, std::string(v) == "1e999" ? "expected a number" : "not a finite number");
  }
  // Values a timeline cannot hold or draw: an op at 1e308 us, a rank
  // outside the world, a world size past 32 bits (it would wrap), a
  // negative iteration time.
  auto replace_value = [&](const std::string& key, const std::string& v) {  // in otherData or the first op
    std::string out = seed;
    const size_t from = key == "ts" || key == "dur" || key == "pid" ? out.find("\"ph\":\"X\"") : 0;
    const size_t at = out.find("\"" + key + "\":", from) + key.size() + 3;
    out.replace(at, out.find_first_of(",}", at) - at, v);
    return out;
  };
  ExpectError(replace_value("ts", "1e308"), "op event past the longest time a trace holds");
  ExpectError(replace_value("dur", "2e13"), "op event past the longest time a trace holds");
  ExpectError(replace_value("pid", "4096"), "op event of rank (pid) 4096 or layer");
  ExpectError(replace_value("world_size", "4294967297"), "expected an integer of at most 32 bits");
  ExpectError(replace_value("iteration_s", "-1"),
              "otherData.iteration_s, model_flops or samples_per_iteration is negative");
}

// Truncations at many points and random byte mutations: the loader returns
// a timeline or an error, and never crashes or hangs.
TEST(TraceReader, FuzzTruncatedAndMutated) {
  for (const char* name : {"seed.trace.json", "small-gpt-2gpu.trace.json"}) {
    const std::string text = Golden(name);
    for (size_t cut = 0; cut < text.size(); cut += 1 + text.size() / 600) {
      auto r = ReadChromeTrace(std::string_view(text).substr(0, cut), name);
      EXPECT_FALSE(r.ok()) << "cut at " << cut;
    }
    std::mt19937 rng(1234);
    const char alphabet[] = "{}[]\":,-+.eE0123456789 \\untrafsxX\n\x01\xff";
    int accepted = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::string m = text;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % m.size();
        switch (rng() % 3) {
          case 0:
            m[at] = alphabet[rng() % (sizeof alphabet - 1)];
            break;
          case 1:
            m.erase(at, 1 + rng() % 8);
            break;
          default:
            m.insert(at, 1, alphabet[rng() % (sizeof alphabet - 1)]);
            break;
        }
      }
      auto r = ReadChromeTrace(m, name);
      if (r.ok())
        ++accepted;
      else
        EXPECT_NE(r.status().message().find(name), std::string::npos);
    }
    EXPECT_LT(accepted, 3000);
  }
}

TEST(TraceReader, MissingFile) {
  auto r = ReadChromeTraceFile("/nonexistent/trace.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/trace.json"), std::string::npos);
}

}  // namespace
}  // namespace strata
