// strata-gui: memory timelines and stream Gantt for simulated and executed
// plans.
//   strata-gui [FILE [--compare FILE2]]
//   strata-gui --screenshot OUT.png [--svg OUT.svg] [--size 1400x900] FILE [--compare FILE2]
// FILE is a timeline (.json from `strata simulate --trace` or `strata run
// --trace`) or a scenario (.yaml, builtin:NAME), which is simulated.
// Exit codes: 0 ok, 1 failure, 2 bad input.
#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "strata/gui/views.h"

int main(int argc, char** argv) {
  // Headless for a screenshot, and for --help/--version, which must work
  // without a display.
  bool headless = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--screenshot") == 0 || std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help-all") == 0 ||
        std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-v") == 0)
      headless = true;
  if (headless) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QApplication::setApplicationName("strata-gui");
  QCommandLineParser cli;
  cli.setApplicationDescription("Strata: memory timelines and stream Gantt of simulated and executed plans");
  cli.addHelpOption();
  cli.addPositionalArgument("file", "Timeline (.json) or scenario (.yaml, builtin:NAME)");
  QCommandLineOption compare("compare", "A second timeline or scenario, shown below on the same time scale", "file");
  QCommandLineOption shot("screenshot", "Render headless to a PNG and exit", "out.png");
  QCommandLineOption svg("svg", "With --screenshot: also write an SVG", "out.svg");
  QCommandLineOption size("size", "Window size for --screenshot (default 1400x900)", "WxH", "1400x900");
  cli.addOptions({compare, shot, svg, size});
  cli.process(app);
  const QStringList files = cli.positionalArguments();

  strata::gui::MainWindow window;
  if (cli.isSet(shot)) {
    // Headless: load synchronously, render, exit.
    for (const auto& [path, second] : {std::pair{files.value(0), false}, std::pair{cli.value(compare), true}}) {
      if (path.isEmpty()) continue;
      if (!window.OpenFile(path, second).ok()) {
        std::fprintf(stderr, "strata-gui: %s\n", window.last_error().toStdString().c_str());
        return 2;
      }
    }
    if (files.isEmpty()) {
      std::fprintf(stderr, "strata-gui: --screenshot needs a FILE\n");
      return 2;
    }
    const QStringList wh = cli.value(size).split('x');
    const QSize sz(wh.value(0).toInt(), wh.value(1).toInt());
    if (sz.width() < 200 || sz.height() < 200) {
      std::fprintf(stderr, "strata-gui: bad --size '%s'\n", cli.value(size).toStdString().c_str());
      return 2;
    }
    window.Render(sz);
    strata::Status st = window.ExportPng(cli.value(shot));
    if (st.ok() && cli.isSet(svg)) st = window.ExportSvg(cli.value(svg));
    if (!st.ok()) {
      std::fprintf(stderr, "strata-gui: %s\n", st.message().c_str());
      return 1;
    }
    return 0;
  }
  window.show();
  if (!files.isEmpty()) window.OpenFileAsync(files.front());
  if (cli.isSet(compare)) window.OpenFileAsync(cli.value(compare), true);
  return app.exec();
}
