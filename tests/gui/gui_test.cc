// The GUI under QTest on the offscreen platform: loaded series values, zoom
// synchronisation, rendering, exports and bad files.
#include <QApplication>
#include <QFile>
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>
#include <QWheelEvent>

#include "strata/gui/plot_chart.h"
#include "strata/gui/views.h"
#include "test_paths.h"

using namespace strata;
using namespace strata::gui;

namespace {
QString Golden(const char* name) { return QString(strata::testing::SourceDir()) + "/tests/golden/" + name; }

// The step function of a memory series, evaluated directly.
Bytes ValueAt(const MemorySeries& s, double t) {
  Bytes v = s.points.front().total();
  for (const auto& p : s.points)
    if (p.t <= t) v = p.total();
  return v;
}
}  // namespace

// Within antialiasing's reach of colour c (a 2-pixel diagonal has few
// pixels of exactly its colour).
bool Near(QRgb p, QRgb c) {
  return std::abs(qRed(p) - qRed(c)) + std::abs(qGreen(p) - qGreen(c)) + std::abs(qBlue(p) - qBlue(c)) < 40;
}

class GuiTest : public QObject {
  Q_OBJECT
 private slots:
  void LoadsTheSeedTraceSeries() {
    MainWindow w;
    QVERIFY(w.OpenFile(Golden("seed.trace.json")).ok());
    const TimelineModel& m = w.primary()->model();
    QCOMPARE(m.timeline().ops.size(), size_t{28});
    // Streams with ops on rank 0: compute, h2d, d2h, nvme_read, nvme_write,
    // cpu_optim, host (ZeRO-3's hooks).
    QCOMPARE(m.rows().size(), size_t{7});
    QCOMPARE(m.rows()[3].stream, Stream::kNvmeRead);
    QCOMPARE(m.rows()[3].ops.size(), size_t{4});  // fc0 twice, its states, its gradient
    w.Render(QSize(1200, 800));
    // Per-pixel aggregation keeps the peak: the GPU's 5,021,888 bytes, at
    // fc0's backward: activations 16,000, fc0.weight gathered 2,002,944,
    // the IPG bucket (reduce_bucket_size 5e5 fp16: 1,000,000) holding
    // fc1's gradients and fc0.bias's, fc0.weight's own gradient (larger
    // than the bucket) 2,002,944, and the persistent biases (1,000 and 10
    // elements, each padded to 4 KiB of fp16) 8,192.
    const auto& gpu = w.primary()->memory(Tier::kGpu)->columns();
    QVERIFY(!gpu.empty());
    int64_t peak = 0;
    for (const auto& c : gpu) peak = std::max(peak, c.total.v);
    QCOMPARE(peak, int64_t{5'030'080});
    // The NVMe tier holds fc0.weight's 1,000,000 parameters (padded to whole 4 KiB
    // blocks of fp16: 1,001,472) throughout: fp16 partition, fp32 master,
    // moments and gradient. fc1 is under DeepSpeed's 1 MiB swap threshold.
    for (const auto& c : w.primary()->memory(Tier::kNvme)->columns())
      if (c.valid) QCOMPARE(c.total.v, int64_t{1'001'472} * 18);
  }

  void AggregationMatchesTheStepFunction() {
    auto t = LoadTimeline((Golden("small-gpt-2gpu.trace.json")).toStdString());
    QVERIFY(t.ok());
    TimelineModel m(std::make_shared<Timeline>(std::move(*t)));
    const auto series = m.SeriesOf(Tier::kGpu);
    QCOMPARE(series.size(), size_t{2});
    const MemorySeries& s = m.timeline().memory[static_cast<size_t>(series[0])];
    const double end = m.end_s();
    for (int columns : {7, 100, 1000}) {
      const auto cols = m.AggregateMemory(series[0], 0, end, columns);
      for (int c = 0; c < columns; ++c) {
        // The column's value is the largest in effect during it: at least the
        // value at its start, and never above the series' peak.
        const double a = end * c / columns;
        QVERIFY(cols[static_cast<size_t>(c)].valid);
        QVERIFY(cols[static_cast<size_t>(c)].total >= ValueAt(s, a));
        QVERIFY(cols[static_cast<size_t>(c)].total <= s.peak);
      }
    }
    // Gantt: with one column per op-length, each column shows an op of its row.
    for (const auto& row : m.rows()) {
      const auto cols = m.AggregateGantt(row, 0, end, 500);
      for (const GanttColumn& c : cols)
        if (c.op >= 0) QCOMPARE(m.timeline().ops[static_cast<size_t>(c.op)].stream(), row.stream);
    }
  }

  void ZoomKeepsBothViewsInSync() {
    MainWindow w;
    QVERIFY(w.OpenFile(Golden("small-gpt-2gpu.trace.json")).ok());
    QVERIFY(w.OpenFile(Golden("seed.trace.json"), /*compare=*/true).ok());
    w.Render(QSize(1200, 1000));
    QVERIFY(w.comparison() != nullptr);
    // One time scale for both: the longer of the two iterations.
    QCOMPARE(w.axis()->end(), std::max(w.primary()->model().end_s(), w.comparison()->model().end_s()));
    MemoryChart* a = w.primary()->memory(Tier::kGpu);
    GanttChart* b = w.comparison()->gantt();
    const QPointF at(a->plot_left() + a->plot_width() / 4.0, 50);
    QWheelEvent wheel(at, a->mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase,
                      false);
    QApplication::sendEvent(a, &wheel);
    QVERIFY(w.axis()->t1() - w.axis()->t0() < w.axis()->end() * 0.7);
    QCOMPARE(a->axis(), b->axis());
    // The same time maps to the same pixel in every chart of both views.
    const double t = (w.axis()->t0() + w.axis()->t1()) / 2;
    QCOMPARE(a->plot_width(), b->plot_width());
    QCOMPARE(a->mapTo(&w, QPoint(a->XAtTime(t), 0)).x(), b->mapTo(&w, QPoint(b->XAtTime(t), 0)).x());
    QCOMPARE(a->mapTo(&w, QPoint(a->XAtTime(t), 0)).x(),
             w.primary()->gantt()->mapTo(&w, QPoint(w.primary()->gantt()->XAtTime(t), 0)).x());
    const double t0 = w.axis()->t0();
    w.axis()->Pan((w.axis()->t1() - w.axis()->t0()) / 2);
    QVERIFY(w.axis()->t0() > t0);
    w.axis()->Reset();
    QCOMPARE(w.axis()->t0(), 0.0);
  }

  void HoverNamesTheOp() {
    MainWindow w;
    QVERIFY(w.OpenFile(Golden("seed.trace.json")).ok());
    w.Render(QSize(1200, 800));
    GanttChart* g = w.primary()->gantt();
    // Row 3 is nvme_read; its first op runs from 0 to 2.003 ms.
    const int x = g->XAtTime(0.001);
    const int y = GanttChart::kTop + 3 * GanttChart::kRowHeight + GanttChart::kRowHeight / 2;
    const QString tip = g->TipAt(QPoint(x, y));
    QVERIFY2(tip.contains("m0.fwd.fetch_nvme.fc0.weight"), qPrintable(tip));
    QVERIFY2(tip.contains("2.003 ms"), qPrintable(tip));
    QVERIFY(g->TipAt(QPoint(5, 5)).isEmpty());
  }

  void RendersAndExports() {
    MainWindow w;
    QVERIFY(w.OpenFile(Golden("seed.trace.json")).ok());
    const QImage img = w.Render(QSize(1200, 800));
    QVERIFY(img.width() > 1000 && img.height() > 600);
    // The CPU chart is drawn in the swap-buffer colour (the seed's CPU memory).
    const QRgb swap = KindColor(StateKind::kSwapBuffer).rgb();
    int swap_pixels = 0;
    for (int y = 0; y < img.height(); ++y)
      for (int x = 0; x < img.width(); ++x) swap_pixels += img.pixel(x, y) == swap;
    QVERIFY2(swap_pixels > 20000, qPrintable(QString::number(swap_pixels)));
    QTemporaryDir dir;
    QVERIFY(w.ExportPng(dir.filePath("a.png")).ok());
    QVERIFY(w.ExportSvg(dir.filePath("a.svg")).ok());
    QFile svg(dir.filePath("a.svg"));
    QVERIFY(svg.open(QIODevice::ReadOnly));
    QVERIFY(svg.readAll().contains("<svg"));
    QVERIFY(!w.ExportPng("/nonexistent/dir/a.png").ok());
  }

  void BadFilesGiveAClearErrorAndLoseNothing() {
    MainWindow w;
    QVERIFY(w.OpenFile(Golden("seed.trace.json")).ok());
    QTemporaryDir dir;
    QFile golden(Golden("seed.trace.json"));
    QVERIFY(golden.open(QIODevice::ReadOnly));
    const QByteArray text = golden.readAll();
    const struct {
      const char* name;
      QByteArray body;
      const char* needle;
    } cases[] = {
        {"truncated.json", text.left(text.size() / 3), "truncated"},
        {"foreign.json", "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"x\"}]}", "not a Strata trace"},
        {"garbage.json", "\x89PNG\r\n", "not a Strata trace"},
        {"malformed.json", QByteArray(text).replace("\"ph\":\"X\"", "\"ph\" \"X\""), "expected ':'"},
    };
    for (const auto& c : cases) {
      QFile f(dir.filePath(c.name));
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(c.body);
      f.close();
      const Status st = w.OpenFile(dir.filePath(c.name));
      QVERIFY2(!st.ok(), c.name);
      QVERIFY2(w.last_error().contains(c.name), qPrintable(w.last_error()));
      QVERIFY2(w.last_error().contains(c.needle), qPrintable(w.last_error()));
      QCOMPARE(w.primary()->model().timeline().scenario, std::string("seed"));  // still shown
    }
    QVERIFY(!w.OpenFile("/nonexistent/trace.json").ok());
    QVERIFY(w.last_error().contains("/nonexistent/trace.json"));
  }

  void LoadsInTheBackgroundAndCancels() {
    MainWindow w;
    w.show();
    w.OpenFileAsync("builtin:gpt2-1.5b-v100");
    QVERIFY(w.loading());
    QTRY_VERIFY_WITH_TIMEOUT(!w.loading(), 20000);
    QVERIFY(w.primary() != nullptr);
    QCOMPARE(w.primary()->model().timeline().scenario, std::string("gpt2-1.5b-v100"));
    // Cancelled: nothing replaces what is shown, no error.
    w.OpenFileAsync("builtin:gpt-1t-dgx2");
    w.CancelLoad();
    QTRY_VERIFY_WITH_TIMEOUT(!w.loading(), 20000);
    QCOMPARE(w.primary()->model().timeline().scenario, std::string("gpt2-1.5b-v100"));
    QVERIFY(w.last_error().isEmpty());
  }

  // Hovering a memory chart names the time, the total and each kind's bytes
  // of the column under the cursor; nothing left of the plot.
  void MemoryChartsHover() {
    MainWindow w;
    QVERIFY(w.OpenFile(Golden("seed.trace.json")).ok());
    w.Render(QSize(1200, 800));
    MemoryChart* cpu = w.primary()->memory(Tier::kCpu);
    const int x = cpu->XAtTime(0.001), y = cpu->height() / 2;
    const QString tip = cpu->TipAt(QPoint(x, y));
    QVERIFY2(tip.contains("total <b>34.63 MiB</b>"), qPrintable(tip));  // 36,311,040 bytes of CPU state at 1 ms
    QVERIFY2(tip.contains("swap_buffer: "), qPrintable(tip));
    QVERIFY(cpu->TipAt(QPoint(cpu->plot_left() - 5, y)).isEmpty());
  }

  // A tier with nothing in it is collapsed (gpt-tiny keeps nothing on NVMe);
  // the others keep their charts.
  void EmptyTiersAreCollapsed() {
    MainWindow w;
    QVERIFY(w.OpenFile("builtin:gpt-tiny").ok());
    QVERIFY(w.primary()->memory(Tier::kNvme)->isHidden());
    QVERIFY(!w.primary()->memory(Tier::kGpu)->isHidden());
    QVERIFY(w.OpenFile("builtin:seed").ok());
    QVERIFY(!w.primary()->memory(Tier::kNvme)->isHidden());
  }

  // `strata-gui A --compare B`: both loads start at once (main.cc) and both
  // are shown; the comparison no longer cancels the primary.
  void CompareFromTheCommandLineShowsBoth() {
    MainWindow w;
    w.OpenFileAsync("builtin:seed");
    w.OpenFileAsync("builtin:gpt-tiny", true);
    QTRY_VERIFY_WITH_TIMEOUT(!w.loading(), 20000);
    QVERIFY(w.primary() != nullptr);
    QVERIFY(w.comparison() != nullptr);
    QCOMPARE(w.primary()->model().timeline().scenario, std::string("seed"));
    QCOMPARE(w.comparison()->model().timeline().scenario, std::string("gpt-tiny"));
  }

  // An infeasible scenario opens with a red banner naming the tier and the
  // bytes over; a feasible one shows none.
  void InfeasibleScenarioShowsABanner() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("big.yaml");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(
        "model: {kind: mlp, sizes: [20000, 20000, 10]}\nhardware:\n  gpu: {memory: 1GiB, peak_flops: 1TFLOPS}\n"
        "  cpu: {memory: 64GiB}\n");
    f.close();
    MainWindow w;
    QVERIFY(w.OpenFile(path).ok());
    QVERIFY2(w.banner().startsWith("DOES NOT FIT (big.yaml): gpu (per GPU): peak"), qPrintable(w.banner()));
    QVERIFY2(w.banner().contains("exceeds the 1.00 GiB capacity"), qPrintable(w.banner()));
    QVERIFY(w.OpenFile("builtin:seed").ok());
    QVERIFY(w.banner().isEmpty());
  }

  // Zoomed out, each Gantt column's height is the share of its time the
  // stream runs an op (checked against the ops themselves), so a compute
  // row with exposed communication is not drawn solid.
  void GanttColumnsShowTheBusyFraction() {
    auto t = LoadTimeline((Golden("small-gpt-2gpu.trace.json")).toStdString());
    QVERIFY(t.ok());
    TimelineModel m(std::make_shared<Timeline>(std::move(*t)));
    const double end = m.end_s();
    for (const auto& row : m.rows())
      for (int columns : {1, 7, 300}) {
        const auto cols = m.AggregateGantt(row, 0, end, columns);
        const double w = end / columns;
        for (int c = 0; c < columns; ++c) {
          double busy = 0;
          for (int op : row.ops) {
            const TimelineOp& o = m.timeline().ops[static_cast<size_t>(op)];
            busy += std::max(0.0, std::min(o.end_s, (c + 1) * w) - std::max(o.start_s, c * w));
          }
          if (cols[static_cast<size_t>(c)].op >= 0)
            QVERIFY2(std::abs(cols[static_cast<size_t>(c)].busy - busy / w) < 1e-9,
                     qPrintable(QString("%1 columns, column %2: %3 vs %4")
                                    .arg(columns)
                                    .arg(c)
                                    .arg(cols[static_cast<size_t>(c)].busy)
                                    .arg(busy / w)));
        }
      }
    // Rank 0's compute row over the whole iteration: busy, but not all of it
    // (a small model under ZeRO-3 waits mostly for its hooks' host time).
    const double whole = m.AggregateGantt(m.rows()[0], 0, end, 1)[0].busy;
    QCOMPARE(m.rows()[0].stream, Stream::kCompute);
    QVERIFY2(whole > 0 && whole < 0.95, qPrintable(QString::number(whole)));
    // Painted: 1000 ops of 0.6 us every 1 us, several per pixel. Each column
    // is 60% busy, and its bar is 60% of the row's height; drawing each
    // column's main op solid (as before) would fill the whole row.
    Timeline dense;
    dense.world_size = 1;
    dense.iteration_s = 1e-3;
    for (int i = 0; i < 1000; ++i) {
      TimelineOp o;
      o.op = i;
      o.info = dense.Intern({.name = "op" + std::to_string(i)});
      o.start_s = i * 1e-6;
      o.end_s = o.start_s + 0.6e-6;
      dense.ops.push_back(o);
    }
    MainWindow win;
    win.SetTimeline(dense, "dense");
    win.Render(QSize(900, 600));
    GanttChart* g = win.primary()->gantt();
    QVERIFY(g->plot_width() < 1000 / 2);
    const QImage img = g->grab().toImage();
    const QRgb bg = QColor(Qt::white).rgb();
    const int bar = GanttChart::kRowHeight - 4;
    int coloured = 0;
    for (int y = GanttChart::kTop + 2; y < GanttChart::kTop + 2 + bar; ++y)
      for (int x = g->plot_left(); x < g->plot_left() + g->plot_width(); ++x) coloured += img.pixel(x, y) != bg;
    const double share = static_cast<double>(coloured) / (bar * g->plot_width());
    QVERIFY2(std::abs(share - 0.6) < 0.1, qPrintable(QString("%1 of the row painted, 60% busy").arg(share)));
    const QString tip =
        g->TipAt(QPoint(g->plot_left() + g->plot_width() / 2, GanttChart::kTop + GanttChart::kRowHeight / 2));
    QVERIFY2(tip.contains("% busy"), qPrintable(tip));
  }

  // A timeline of one node of many says so; many ranks start collapsed to
  // the critical rank, and the choice shows all of them again.
  void RanksAreGroupedAndCollapsible() {
    auto t = LoadTimeline((Golden("small-gpt-2gpu.trace.json")).toStdString());
    QVERIFY(t.ok());
    Timeline one_node = *t;
    one_node.world_size = 8;
    one_node.nodes = 4;
    one_node.gpus_per_node = 2;
    MainWindow w;
    w.SetTimeline(one_node, "a");
    const std::string note = w.primary()->model().RanksNote();
    QCOMPARE(note, std::string("node 0 simulated (ranks 0-1 of 8); 3 identical nodes not drawn (SPMD symmetry: the "
                               "same schedule)"));
    bool shown = false;
    for (QLabel* l : w.primary()->findChildren<QLabel*>()) shown |= l->text() == QString::fromStdString(note);
    QVERIFY(shown);
    QCOMPARE(w.primary()->gantt()->shown_rank(), -1);  // two ranks: all rows
    // Eight ranks, all present: no note; the Gantt shows the critical rank.
    Timeline eight = *t;
    const size_t n = eight.ops.size();
    for (int r = 2; r < 8; ++r)
      for (size_t i = 0; i < n; ++i)
        if (eight.ops[i].rank == 0) {
          TimelineOp o = eight.ops[i];
          o.rank = r;
          eight.ops.push_back(o);
        }
    eight.world_size = 8;
    eight.gpus_per_node = 8;
    eight.critical_rank = 3;
    w.SetTimeline(eight, "b");
    QVERIFY(w.primary()->model().RanksNote().empty());
    GanttChart* g = w.primary()->gantt();
    QCOMPARE(g->shown_rank(), 3);
    QVERIFY(!g->visible_rows().empty());
    for (size_t r : g->visible_rows()) QCOMPARE(w.primary()->model().rows()[r].rank, 3);
    g->ShowRank(-1);
    QCOMPARE(g->visible_rows().size(), w.primary()->model().rows().size());
    QCOMPARE(g->sizeHint().height(), GanttChart::kTop + GanttChart::kBottom +
                                         GanttChart::kRowHeight * static_cast<int>(g->visible_rows().size()));
  }

  // The sweep plot: each series in its colour, a point that does not fit as
  // a cross in its series' colour (each series' cross apart from the
  // others'), a second key as a line style, PNG at twice the size and SVG;
  // an unwritable path is named.
  void LinePlotDrawsSeriesAndInfeasiblePoints() {
    LinePlot p;
    p.title = "seed: iteration time";
    p.x_label = "GPU memory";
    p.y_label = "iteration time";
    p.y_unit = "s";
    p.series.push_back({"a", {{1, "1GiB", false, 0}, {2, "2GiB", true, 0.5}, {3, "3GiB", true, 0.25}}});
    p.series.push_back({"b", {{1, "1GiB", false, 0}, {2, "2GiB", true, 0.375}, {3, "3GiB", true, 0.125}}});
    const QImage img = RenderLinePlot(p, QSize(600, 400), 1.0);
    QCOMPARE(img.size(), QSize(600, 400));
    // Per series: its pixels, and where its pixels in the band just above the
    // x axis at x = 1 (its cross) are.
    auto colour_pixels = [](const QImage& im, int i, int y_from, int y_to, int x_to, double* mean_x) {
      int n = 0;
      double sum = 0;
      for (int y = y_from; y < y_to; ++y)
        for (int x = 0; x < x_to; ++x)
          if (Near(im.pixel(x, y), SeriesColor(i).rgb())) ++n, sum += x;
      if (mean_x != nullptr) *mean_x = n > 0 ? sum / n : -1;
      return n;
    };
    QVERIFY(colour_pixels(img, 0, 0, 400, 600, nullptr) > 200);
    QVERIFY(colour_pixels(img, 1, 0, 400, 600, nullptr) > 200);
    // The data rectangle's bottom: the row of the x axis, the most black.
    int axis = 0, most = 0;
    for (int y = 0; y < img.height(); ++y) {
      int black = 0;
      for (int x = 0; x < img.width(); ++x) black += qGray(img.pixel(x, y)) < 160;  // antialiased
      if (black > most) most = black, axis = y;
    }
    double xa = -1, xb = -1;
    const int a = colour_pixels(img, 0, axis - 14, axis, 200, &xa),
              b = colour_pixels(img, 1, axis - 14, axis, 200, &xb);
    QVERIFY2(a > 6 && b > 6, qPrintable(QString("%1 %2").arg(a).arg(b)));            // both crosses drawn
    QVERIFY2(std::abs(xa - xb) >= 6, qPrintable(QString("%1 %2").arg(xa).arg(xb)));  // apart
    // Nothing runs off the picture: the legend is kept inside it.
    for (int y = 0; y < img.height(); ++y) QCOMPARE(qGray(img.pixel(img.width() - 1, y)), 255);
    // Dashed: fewer of its pixels than the same line solid.
    LinePlot one;
    one.series.push_back({"", {{1, "1", true, 1.0}, {2, "2", true, 2.0}, {3, "3", true, 1.0}}});
    const int solid = colour_pixels(RenderLinePlot(one, QSize(600, 400), 1.0), 0, 0, 400, 600, nullptr);
    one.series[0].dash = 1;
    const int dashed = colour_pixels(RenderLinePlot(one, QSize(600, 400), 1.0), 0, 0, 400, 600, nullptr);
    QVERIFY2(dashed < solid * 0.85, qPrintable(QString("%1 %2").arg(dashed).arg(solid)));
    // Colour by Series::color, not the index.
    one.series[0].color = 3;
    QVERIFY(colour_pixels(RenderLinePlot(one, QSize(600, 400), 1.0), 3, 0, 400, 600, nullptr) > 100);
    QCOMPARE(RenderLinePlot(p, QSize(600, 400)).size(), QSize(1200, 800));
    QTemporaryDir dir;
    QVERIFY(SaveLinePlot(p, dir.filePath("p.png").toStdString(), QSize(600, 400)).ok());
    QVERIFY(SaveLinePlot(p, dir.filePath("p.svg").toStdString(), QSize(600, 400)).ok());
    QFile svg(dir.filePath("p.svg"));
    QVERIFY(svg.open(QIODevice::ReadOnly));
    QVERIFY(svg.readAll().contains("<svg"));
    const Status st = SaveLinePlot(p, "/nonexistent/p.png", QSize(600, 400));
    QVERIFY(!st.ok());
    QVERIFY(QString::fromStdString(st.message()).contains("/nonexistent/p.png"));
  }

  // Memory axes: round ticks in one unit.
  void MemoryAxisTicksAreRoundInOneUnit() {
    const double GiB = 1024.0 * 1024 * 1024, MiB = 1024.0 * 1024;
    ByteScale s = ScaleFor(3.5 * GiB);  // 3.04 GiB peak x 1.15
    QCOMPARE(QString(s.name), QString("GiB"));
    QCOMPARE(s.step, GiB);
    QCOMPARE(s.top, 4 * GiB);
    QCOMPARE(s.Label(2 * GiB), QString("2 GiB"));
    s = ScaleFor(700 * MiB);
    QCOMPARE(QString(s.name), QString("MiB"));
    QCOMPARE(s.step, 200 * MiB);
    QCOMPARE(s.top, 800 * MiB);
    s = ScaleFor(29.9 * GiB);
    QCOMPARE(s.step, 10 * GiB);
    QCOMPARE(s.top, 30 * GiB);
  }

  // A capacity on the scale is a dashed line with its label above it at
  // the right, clear of the tick labels at the left.
  void CapacityOnTheScaleIsLabelled() {
    MainWindow w;
    QVERIFY(w.OpenFile("builtin:gpt-tiny").ok());  // 954 MiB of a 1 GiB GPU
    MemoryChart* gpu = w.primary()->memory(Tier::kGpu);
    gpu->resize(900, 240);
    const QImage img = gpu->grab().toImage();
    const QRgb red = qRgb(0xc0, 0x00, 0x00);
    auto reds = [&](int y, int x0, int x1) {
      int n = 0;
      for (int x = x0; x < x1; ++x) n += Near(img.pixel(x, y), red);
      return n;
    };
    int line = -1, most = 0;
    for (int y = 0; y < img.height(); ++y)
      if (const int n = reds(y, 0, img.width()); n > most) most = n, line = y;
    QVERIFY2(most > img.width() / 4, qPrintable(QString::number(most)));
    int right = 0, left = 0;
    for (int y = std::max(0, line - 14); y < line - 1; ++y) {
      right += reds(y, img.width() / 2, img.width());
      left += reds(y, 0, img.width() / 4);
    }
    QVERIFY2(right > 20, qPrintable(QString::number(right)));
    QCOMPARE(left, 0);
  }

  void SimulatesAScenarioFile() {
    MainWindow w;
    QVERIFY(w.OpenFile("builtin:seed").ok());
    // --size is the picture's size, exactly (the window's bars are not in it).
    QCOMPARE(w.Render(QSize(1000, 700)).size(), QSize(1000, 700));
    QCOMPARE(w.Render(QSize(1400, 900)).size(), QSize(1400, 900));
    QVERIFY(w.banner().isEmpty());
    QCOMPARE(w.primary()->model().timeline().ops.size(), size_t{28});
    QVERIFY(!w.OpenFile("builtin:nope").ok());
    QVERIFY(w.last_error().contains("no built-in scenario"));
  }
};

QTEST_MAIN(GuiTest)
#include "gui_test.moc"
