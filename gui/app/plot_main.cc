// strata-plot: draws a line plot written by `strata sweep --plot` (JSON, see
// report/line_plot.h) to PNG or SVG, offscreen.
//   strata-plot PLOT.json OUT.png|OUT.svg [--size 800x500]
// Exit codes: 0 ok, 1 failure (cannot write), 2 bad input.
#include <QGuiApplication>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "strata/core/file_input.h"
#include "strata/gui/plot_chart.h"

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");  // a file, never a window
  // Qt's notes about the runtime directory and the like are not the user's
  // business here; real failures are reported by Status below.
  qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& msg) {
    if (type == QtCriticalMsg || type == QtFatalMsg) std::fprintf(stderr, "strata-plot: %s\n", qPrintable(msg));
  });
  std::string in, out, size = "800x500";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
      size = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(
          "usage: strata-plot PLOT.json OUT.png|OUT.svg [--size WxH]\n"
          "Draws a line plot written by `strata sweep --plot` (which runs this itself).\n");
      return 0;
    } else if (in.empty()) {
      in = argv[i];
    } else if (out.empty()) {
      out = argv[i];
    } else {
      std::fprintf(stderr, "strata-plot: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (in.empty() || out.empty()) {
    std::fprintf(stderr, "usage: strata-plot PLOT.json OUT.png|OUT.svg [--size WxH]\n");
    return 2;
  }
  int w = 0, h = 0;
  if (std::sscanf(size.c_str(), "%dx%d", &w, &h) != 2 || w < 200 || h < 150) {
    std::fprintf(stderr, "strata-plot: bad --size '%s' (WxH, at least 200x150)\n", size.c_str());
    return 2;
  }
  auto text = strata::ReadInputFile(in, strata::kTextFileLimit, "the plot");
  if (!text.ok()) {
    std::fprintf(stderr, "strata-plot: %s\n", text.status().message().c_str());
    return 2;
  }
  auto plot = strata::ParseLinePlotJson(*text, in);
  if (!plot.ok()) {
    std::fprintf(stderr, "strata-plot: %s\n", plot.status().message().c_str());
    return 2;
  }
  QGuiApplication app(argc, argv);
  const strata::Status st = strata::gui::SaveLinePlot(*plot, out, QSize(w, h));
  if (!st.ok()) {
    std::fprintf(stderr, "strata-plot: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
