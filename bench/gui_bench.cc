// GUI load and redraw with a million ops: the 1T-parameter GPT on one DGX-2
// at 1000 layers (~967k op instances) simulated once, its trace written to a
// temporary file, then: parse the trace, build the model, first render of
// the window, and redraws while zooming and panning. Offscreen platform.
// Run: build/bench/gui_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <QApplication>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "strata/config/scenario_loader.h"
#include "strata/gui/views.h"
#include "strata/planner/planner.h"
#include "strata/simulator/simulator.h"
#include "strata/timeline/trace_io.h"

namespace {

std::string TracePath() {
  static const std::string path = [] {
    std::string p = "/tmp/strata_gui_bench_" + std::to_string(getpid()) + ".trace.json";
    auto s = strata::config::LoadScenarioFile("builtin:gpt-1t-dgx2");
    s->model.layers = 1000;
    auto plan = strata::BuildPlan(*s);
    auto r = strata::sim::Simulate(*plan, s->hardware);
    if (!r.ok() || !strata::WriteChromeTraceFile(r->timeline, p).ok()) std::abort();
    std::fprintf(stderr, "trace: %zu ops, %ld bytes\n", r->timeline.ops.size(),
                 static_cast<long>(std::filesystem::file_size(p)));
    return p;
  }();
  return path;
}

void BM_LoadTrace(benchmark::State& state) {
  const std::string path = TracePath();
  size_t ops = 0;
  for (auto _ : state) {
    auto t = strata::ReadChromeTraceFile(path);
    ops = t->ops.size();
    benchmark::DoNotOptimize(t);
  }
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_LoadTrace)->Unit(benchmark::kMillisecond)->Iterations(3);

// Open = load + model + first paint: what the user waits for.
void BM_OpenAndFirstRender(benchmark::State& state) {
  const std::string path = TracePath();
  for (auto _ : state) {
    strata::gui::MainWindow w;
    if (!w.OpenFile(QString::fromStdString(path)).ok()) state.SkipWithError("open failed");
    QImage img = w.Render(QSize(1400, 900));
    benchmark::DoNotOptimize(img);
  }
}
BENCHMARK(BM_OpenAndFirstRender)->Unit(benchmark::kMillisecond)->Iterations(3);

// One redraw after a zoom or pan step, from fully zoomed out to 1/1000.
void BM_ZoomPanRedraw(benchmark::State& state) {
  strata::gui::MainWindow w;
  if (!w.OpenFile(QString::fromStdString(TracePath())).ok()) state.SkipWithError("open failed");
  w.Render(QSize(1400, 900));
  int step = 0;
  for (auto _ : state) {
    auto* axis = w.axis();
    if (step % 20 == 0) axis->Reset();
    if (step % 2 == 0)
      axis->ZoomAt(axis->end() * 0.37, 0.7);
    else
      axis->Pan((axis->t1() - axis->t0()) * 0.1);
    QImage img = w.Render(QSize(1400, 900));
    benchmark::DoNotOptimize(img);
    ++step;
  }
  state.counters["frames_per_s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ZoomPanRedraw)->Unit(benchmark::kMillisecond)->Iterations(40);

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::remove(TracePath().c_str());
  return 0;
}
