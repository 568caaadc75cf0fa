// The trace reader (timeline/src/trace_reader.cc, hand-written) against
// nlohmann-json on the same ~100 MB Chrome trace, interleaved round by round
// (bench/interleave.h): its SAX interface with a handler that only collects
// each event's fields (no validation, no timeline: a lower bound on what a
// SAX-based reader would cost), and its DOM parse. The rate is the trace's
// MB per second; the ratio is each variant's over the hand-written
// reader's, which builds the whole timeline and validates it.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "interleave.h"
#include "strata/timeline/trace_io.h"

namespace {

using Json = nlohmann::json;

// A timeline shaped like a simulated one: RANKS ranks of OPS op spans each
// over the seven streams, and a GPU memory series per rank.
strata::Timeline SyntheticTimeline(int ranks, int ops) {
  strata::Timeline t;
  t.source = "simulate";
  t.scenario = "trace-bench";
  t.world_size = ranks;
  t.gpus_per_node = ranks;
  t.iteration_s = 1.0;
  for (int r = 0; r < ranks; ++r) {
    double now = 0;
    for (int i = 0; i < ops; ++i) {
      strata::OpInfo info;
      info.kind = i % 3 == 0 ? strata::OpKind::kAllGather : strata::OpKind::kForward;
      info.stream = static_cast<strata::Stream>(i % 7);
      info.layer = i / 16;
      info.flops = 1e9 * (i % 5);
      info.name = "layer" + std::to_string(i / 16) + ".fwd.module" + std::to_string(i % 16);
      info.bytes = strata::Bytes(int64_t{1} << (10 + i % 16));
      const double dur = 1e-5 * (1 + i % 9);
      t.ops.push_back({r, i, now, now + dur, t.Intern(std::move(info))});
      now += dur / 2;
    }
  }
  return t;
}

const std::string& TraceText() {
  static const std::string text = [] {
    std::ostringstream out;
    strata::WriteChromeTrace(SyntheticTimeline(8, 70000), out);
    return out.str();
  }();
  return text;
}

// Collects each event's fields as a SAX reader would before building ops.
struct Event {
  std::string name;
  int64_t pid = 0, tid = 0;
  double ts = 0, dur = 0;
  char ph = 0;
};

class Collect : public nlohmann::json_sax<Json> {
 public:
  std::vector<Event> events;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override { return Number(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Number(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Number(v); }
  bool string(string_t& v) override {
    if (in_event() && key_ == "name") events.back().name = v;
    if (in_event() && key_ == "ph" && !v.empty()) events.back().ph = v[0];
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 2 && in_events_) events.emplace_back();
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 1 && key_ == "traceEvents") in_events_ = true;
    return true;
  }
  bool end_array() override {
    if (depth_ == 1) in_events_ = false;
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool in_event() const { return in_events_ && depth_ == 2 && !events.empty(); }
  bool Number(double v) {
    if (!in_event()) return true;
    Event& e = events.back();
    if (key_ == "pid")
      e.pid = static_cast<int64_t>(v);
    else if (key_ == "tid")
      e.tid = static_cast<int64_t>(v);
    else if (key_ == "ts")
      e.ts = v;
    else if (key_ == "dur")
      e.dur = v;
    return true;
  }
  int depth_ = 0;
  bool in_events_ = false;
  std::string key_;
};

template <typename F>
double MBps(size_t bytes, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(bytes) / 1e6 / s;
}

void BM_ReadTrace(benchmark::State& state) {
  const std::string& text = TraceText();
  std::fprintf(stderr, "trace: %.1f MB\n", static_cast<double>(text.size()) / 1e6);
  for (auto _ : state) {
    auto r = strata::bench::Interleave({{"hand_reader",
                                         [&] {
                                           return MBps(text.size(), [&] {
                                             auto t = strata::ReadChromeTrace(text, "bench");
                                             if (!t.ok()) std::abort();
                                             benchmark::DoNotOptimize(t->ops.size());
                                           });
                                         }},
                                        {"nlohmann_sax",
                                         [&] {
                                           return MBps(text.size(), [&] {
                                             Collect c;
                                             if (!Json::sax_parse(text, &c)) std::abort();
                                             benchmark::DoNotOptimize(c.events.size());
                                           });
                                         }},
                                        {"nlohmann_dom",
                                         [&] {
                                           return MBps(text.size(), [&] {
                                             Json j = Json::parse(text);
                                             benchmark::DoNotOptimize(j.size());
                                           });
                                         }}},
                                       strata::bench::Rounds(), 0, "MB/s");
    strata::bench::Report(state, "Chrome trace read", r);
  }
}
BENCHMARK(BM_ReadTrace)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
