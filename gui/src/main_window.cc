#include <QAction>
#include <QApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPainter>
#include <QProgressDialog>
#include <QSplitter>
#include <QStatusBar>
#include <QSvgGenerator>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <thread>

#include "strata/config/scenario_loader.h"
#include "strata/gui/views.h"
#include "strata/planner/planner.h"
#include "strata/simulator/simulator.h"
#include "strata/timeline/trace_io.h"

namespace strata::gui {

Result<Timeline> LoadTimeline(const std::string& path, const std::function<void(double)>& progress,
                              const std::atomic<bool>* cancel) {
  const bool trace = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (trace) return ReadChromeTraceFile(path);
  STRATA_ASSIGN_OR_RETURN(auto s, config::LoadScenarioFile(path));
  STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s));
  sim::SimOptions o;
  o.on_progress = progress;
  o.cancel = cancel;
  STRATA_ASSIGN_OR_RETURN(auto r, sim::Simulate(plan, s.hardware, o));
  return std::move(r.timeline);
}

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), axis_(new TimeAxis(this)) {
  setWindowTitle("Strata");
  content_ = new QWidget(this);
  auto* column = new QVBoxLayout(content_);
  column->setContentsMargins(4, 4, 4, 4);
  banner_ = new QLabel(content_);
  banner_->setWordWrap(true);
  banner_->setStyleSheet("QLabel { background: #c62828; color: white; font-weight: bold; padding: 6px; }");
  banner_->hide();
  column->addWidget(banner_);
  auto* row = new QHBoxLayout();
  column->addLayout(row, 1);
  splitter_ = new QSplitter(Qt::Vertical, content_);
  summary_ = new QTextBrowser(content_);
  summary_->setMinimumWidth(240);
  summary_->setMaximumWidth(320);
  row->addWidget(splitter_, 1);
  row->addWidget(summary_);
  setCentralWidget(content_);

  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("&Open scenario or timeline...", QKeySequence::Open, [this] {
    const QString p = QFileDialog::getOpenFileName(this, "Open", {}, "Timelines and scenarios (*.json *.yaml *.yml)");
    if (!p.isEmpty()) OpenFileAsync(p);
  });
  file->addAction("&Compare with...", [this] {
    const QString p =
        QFileDialog::getOpenFileName(this, "Compare with", {}, "Timelines and scenarios (*.json *.yaml *.yml)");
    if (!p.isEmpty()) OpenFileAsync(p, true);
  });
  file->addAction("Export &PNG...", [this] {
    const QString p = QFileDialog::getSaveFileName(this, "Export PNG", "strata.png", "PNG (*.png)");
    if (!p.isEmpty()) {
      Status st = ExportPng(p);
      if (!st.ok()) ShowError(QString::fromStdString(st.message()));
    }
  });
  file->addAction("Export &SVG...", [this] {
    const QString p = QFileDialog::getSaveFileName(this, "Export SVG", "strata.svg", "SVG (*.svg)");
    if (!p.isEmpty()) {
      Status st = ExportSvg(p);
      if (!st.ok()) ShowError(QString::fromStdString(st.message()));
    }
  });
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, qApp, &QApplication::quit);
  QMenu* view = menuBar()->addMenu("&View");
  view->addAction("Zoom &in", QKeySequence::ZoomIn, [this] { axis_->ZoomAt((axis_->t0() + axis_->t1()) / 2, 0.5); });
  view->addAction("Zoom &out", QKeySequence::ZoomOut, [this] { axis_->ZoomAt((axis_->t0() + axis_->t1()) / 2, 2); });
  view->addAction("&Reset zoom", [this] { axis_->Reset(); });
  statusBar()->showMessage("Open a scenario (.yaml) or a timeline (.json): wheel zooms, drag pans, right click resets");
  resize(1280, 860);
}

void MainWindow::SetTimeline(Timeline t, const QString& title) {
  models_[0] = std::make_shared<TimelineModel>(std::make_shared<Timeline>(std::move(t)));
  titles_[0] = title;
  Rebuild();
}

void MainWindow::SetComparison(Timeline t, const QString& title) {
  models_[1] = std::make_shared<TimelineModel>(std::make_shared<Timeline>(std::move(t)));
  titles_[1] = title;
  Rebuild();
}

void MainWindow::Rebuild() {
  for (auto*& v : views_) {
    delete v;
    v = nullptr;
  }
  double end = 0;
  QString html;
  for (int i = 0; i < 2; ++i) {
    if (!models_[i]) continue;
    views_[i] = new TimelineView(models_[i], axis_, titles_[i], splitter_);
    splitter_->addWidget(views_[i]);
    end = std::max(end, models_[i]->end_s());
    html += SummaryHtml(models_[i]->timeline(), titles_[i]);
  }
  summary_->setHtml(html + LegendHtml());
  axis_->SetEnd(end);  // both timelines on one time scale
  // An infeasible iteration is never shown as a result without saying so.
  QStringList lines;
  for (int i = 0; i < 2; ++i) {
    if (!models_[i]) continue;
    for (const std::string& o : Overflows(models_[i]->timeline()))
      lines
          << QString("DOES NOT FIT (%1): %2; this schedule would not run.").arg(titles_[i], QString::fromStdString(o));
  }
  banner_->setText(lines.join("\n"));
  banner_->setVisible(!lines.isEmpty());
}

QString MainWindow::banner() const { return banner_->isVisibleTo(content_) ? banner_->text() : QString(); }

Status MainWindow::OpenFile(const QString& path, bool compare) {
  auto t = LoadTimeline(path.toStdString());
  if (!t.ok()) {
    ShowError(QString::fromStdString(t.status().message()));
    return t.status();
  }
  const QString title = QFileInfo(path).fileName();
  if (compare)
    SetComparison(std::move(*t), title);
  else
    SetTimeline(std::move(*t), title);
  return Status::Ok();
}

void MainWindow::OpenFileAsync(const QString& path, bool compare) {
  auto* dialog = new QProgressDialog("Loading " + path + "...", "Cancel", 0, 1000, this);
  dialog->setWindowModality(Qt::WindowModal);
  dialog->setMinimumDuration(200);
  // One load per slot at a time: a new primary load cancels the last
  // primary one, a comparison the last comparison, so that
  // `strata-gui A --compare B` shows both.
  auto& slot = cancel_[compare ? 1 : 0];
  if (slot) *slot = true;
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  slot = cancel;
  ++loading_;
  connect(dialog, &QProgressDialog::canceled, this, [cancel] { *cancel = true; });
  std::thread([this, path, compare, dialog, cancel] {
    auto progress = [this, dialog](double f) {
      QMetaObject::invokeMethod(
          this, [dialog, f] { dialog->setValue(static_cast<int>(f * 1000)); }, Qt::QueuedConnection);
    };
    auto result = std::make_shared<Result<Timeline>>(LoadTimeline(path.toStdString(), progress, cancel.get()));
    QMetaObject::invokeMethod(
        this,
        [this, path, compare, dialog, result, cancel] {
          dialog->deleteLater();
          --loading_;
          if (*cancel) return;  // cancelled, or replaced by a newer load
          if (!result->ok()) {
            if (!*cancel) ShowError(QString::fromStdString(result->status().message()));
            return;
          }
          const QString title = QFileInfo(path).fileName();
          if (compare)
            SetComparison(std::move(result->value()), title);
          else
            SetTimeline(std::move(result->value()), title);
        },
        Qt::QueuedConnection);
  }).detach();
}

void MainWindow::CancelLoad() {
  for (auto& c : cancel_)
    if (c) *c = true;
}

void MainWindow::ShowError(const QString& msg) {
  last_error_ = msg;
  statusBar()->showMessage(msg);
  if (QGuiApplication::platformName() != "offscreen") QMessageBox::warning(this, "Strata", msg);
}

QImage MainWindow::Render(QSize size) {
  resize(size);
  if (!isVisible()) show();
  QCoreApplication::processEvents();
  // The picture is the content, without the window's menu, tool and status
  // bars: grow the window by them, so that the picture is `size` exactly.
  if (content_->size() != size) {
    resize(size + (this->size() - content_->size()));
    QCoreApplication::processEvents();
  }
  return content_->grab().toImage();
}

Status MainWindow::ExportPng(const QString& path) {
  if (!content_->grab().save(path, "PNG")) return Status::IOError("cannot write PNG '" + path.toStdString() + "'");
  return Status::Ok();
}

Status MainWindow::ExportSvg(const QString& path) {
  QSvgGenerator gen;
  gen.setFileName(path);
  gen.setSize(content_->size());
  gen.setViewBox(QRect(QPoint(0, 0), content_->size()));
  gen.setTitle("Strata timeline");
  QPainter p;
  if (!p.begin(&gen)) return Status::IOError("cannot write SVG '" + path.toStdString() + "'");
  content_->render(&p);
  p.end();
  return Status::Ok();
}

}  // namespace strata::gui
