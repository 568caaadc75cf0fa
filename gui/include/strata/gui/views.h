// A timeline's view (memory per tier + stream Gantt), its summary, the main
// window, and loading files in the background.
#pragma once

#include <QMainWindow>
#include <QWidget>
#include <atomic>
#include <functional>
#include <memory>

#include "strata/core/status.h"
#include "strata/gui/charts.h"

class QComboBox;
class QLabel;
class QSplitter;
class QTextBrowser;

namespace strata::gui {

// Loads a timeline: a trace written by `strata simulate --trace` or `strata
// run --trace` (.json), or a scenario (YAML file or builtin:NAME), which is
// planned and simulated. `progress` gets fractions done; `cancel` stops it.
Result<Timeline> LoadTimeline(const std::string& path, const std::function<void(double)>& progress = {},
                              const std::atomic<bool>* cancel = nullptr);

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  TimelineView(std::shared_ptr<const TimelineModel> model, TimeAxis* axis, const QString& title,
               QWidget* parent = nullptr);
  MemoryChart* memory(Tier t) const { return memory_[static_cast<int>(t)]; }
  GanttChart* gantt() const { return gantt_; }
  const TimelineModel& model() const { return *model_; }

 private:
  std::shared_ptr<const TimelineModel> model_;
  MemoryChart* memory_[kNumTiers] = {};
  GanttChart* gantt_ = nullptr;
};

// Iteration time, exposed time per class, bottleneck, peak memory per tier.
QString SummaryHtml(const Timeline& t, const QString& title);
// The colours of state kinds and op kinds: once, after the summaries (a
// comparison's second summary is not pushed below the panel by a repeat).
QString LegendHtml();

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Replace the primary (or add the comparison) timeline.
  void SetTimeline(Timeline t, const QString& title);
  void SetComparison(Timeline t, const QString& title);
  // Loads synchronously; on failure shows nothing new and returns the error.
  Status OpenFile(const QString& path, bool compare = false);
  // Loads in the background with a progress dialog and a Cancel button; the
  // window stays responsive. One load per slot at a time: a new primary load
  // cancels the last primary one, a comparison the last comparison.
  void OpenFileAsync(const QString& path, bool compare = false);
  void CancelLoad();
  bool loading() const { return loading_ > 0; }

  TimeAxis* axis() const { return axis_; }
  TimelineView* primary() const { return views_[0]; }
  TimelineView* comparison() const { return views_[1]; }
  QString last_error() const { return last_error_; }
  // The red "DOES NOT FIT" banner over the timelines (empty and hidden when
  // every shown timeline fits its tiers' capacities).
  QString banner() const;
  // Renders the window's content.
  QImage Render(QSize size);
  Status ExportPng(const QString& path);
  Status ExportSvg(const QString& path);

 private:
  void Rebuild();
  void ShowError(const QString& msg);

  TimeAxis* axis_;
  QSplitter* splitter_;
  QTextBrowser* summary_;
  QLabel* banner_;
  QWidget* content_;
  std::shared_ptr<const TimelineModel> models_[2];
  QString titles_[2];
  TimelineView* views_[2] = {nullptr, nullptr};
  QString last_error_;
  std::shared_ptr<std::atomic<bool>> cancel_[2];  // the primary and the comparison load
  int loading_ = 0;
};

}  // namespace strata::gui
