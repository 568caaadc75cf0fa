#include "strata/gui/views.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QStyle>
#include <QVBoxLayout>
#include <algorithm>

#include "strata/core/units.h"

namespace strata::gui {

TimelineView::TimelineView(std::shared_ptr<const TimelineModel> model, TimeAxis* axis, const QString& title,
                           QWidget* parent)
    : QWidget(parent), model_(std::move(model)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->setSpacing(2);
  auto* head = new QHBoxLayout;
  auto* label = new QLabel("<b>" + title.toHtmlEscaped() + "</b>", this);
  head->addWidget(label);
  head->addStretch(1);
  layout->addLayout(head);
  for (Tier t : kAllTiers) {
    auto* chart = new MemoryChart(model_, axis, t, this);
    memory_[static_cast<int>(t)] = chart;
    // Choose the rank (GPU) or the node (CPU, NVMe).
    const auto series = model_->SeriesOf(t);
    if (series.size() > 1) {
      auto* pick = new QComboBox(this);
      for (int s : series)
        pick->addItem(QString("%1 %2 %3")
                          .arg(QString(TierName(t).data()).toUpper(), t == Tier::kGpu ? "rank" : "node")
                          .arg(model_->timeline().memory[static_cast<size_t>(s)].owner),
                      s);
      connect(pick, &QComboBox::currentIndexChanged, chart,
              [chart, pick](int i) { chart->SetSeries(pick->itemData(i).toInt()); });
      head->addWidget(pick);
    }
    layout->addWidget(chart, 1);
    // A tier that holds nothing all iteration takes no height: its name in
    // the header says so.
    if (model_->timeline().Peak(t).v == 0) {
      chart->hide();
      head->addWidget(new QLabel(QString("%1: empty").arg(QString(TierName(t).data()).toUpper()), this));
    }
  }
  gantt_ = new GanttChart(model_, axis, this);
  auto* scroll = new QScrollArea(this);
  // The Gantt's scroll area: as tall as its rows, up to 260 pixels.
  const auto fit = [this, scroll] {
    scroll->setMinimumHeight(std::min(gantt_->sizeHint().height() + 4, 260));
    scroll->setMaximumHeight(gantt_->sizeHint().height() + 4);
  };
  // Ranks: a note when the timeline holds one node of many (the simulator's
  // symmetry reduction), and a choice between every rank's rows and one
  // rank's. Many ranks start collapsed to the critical rank.
  const std::vector<int>& ranks = model_->ranks();
  const std::string note = model_->RanksNote();
  if (!note.empty()) {
    auto* l = new QLabel(QString::fromStdString(note), this);
    l->setStyleSheet("QLabel { color: #555; }");
    layout->addWidget(l);
  }
  if (ranks.size() > 1) {
    auto* pick = new QComboBox(this);
    pick->addItem(QString("Gantt: all %1 ranks").arg(ranks.size()), -1);
    for (int r : ranks) pick->addItem(QString("Gantt: rank %1 only").arg(r), r);
    head->addWidget(pick);
    connect(pick, &QComboBox::currentIndexChanged, this, [this, pick, fit](int i) {
      gantt_->ShowRank(pick->itemData(i).toInt());
      fit();
    });
    if (ranks.size() > 4) {  // (the signal above applies it)
      const auto it = std::find(ranks.begin(), ranks.end(), model_->timeline().critical_rank);
      pick->setCurrentIndex(1 + static_cast<int>(it == ranks.end() ? 0 : it - ranks.begin()));
    }
  }
  // No frame and a permanent scroll bar whose width the memory charts leave
  // free on their right: every chart's time axis spans the same pixels.
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
  const int bar = style()->pixelMetric(QStyle::PM_ScrollBarExtent);
  for (auto* m : memory_) m->SetRightMargin(m->right_margin() + bar);
  scroll->setWidget(gantt_);
  scroll->setWidgetResizable(true);
  fit();
  layout->addWidget(scroll, 2);
}

QString SummaryHtml(const Timeline& t, const QString& title) {
  const TimeBreakdown b = AnalyzeTimeline(t, t.ops.empty() ? 0 : t.ops.front().rank);
  QString h;
  h += QString("<h3>%1</h3><p>%2: %3 · %4 GPU(s)</p>")
           .arg(title.toHtmlEscaped(), QString::fromStdString(t.scenario).toHtmlEscaped(),
                QString::fromStdString(t.source))
           .arg(t.world_size);
  const std::vector<std::string> over = Overflows(t);
  if (!over.empty()) {
    h += "<p style='color:#c62828'><b>DOES NOT FIT</b>";
    for (const std::string& o : over) h += "<br>" + QString::fromStdString(o).toHtmlEscaped();
    h += "</p>";
  }
  const QString would_not = over.empty() ? QString() : QString(" (would not run)");
  h += QString("<p>iteration <b>%1</b>%2").arg(FormatSeconds(t.iteration_s), would_not);
  if (t.iteration_s > 0) {
    h += QString("<br>%1 samples/s%2")
             .arg(static_cast<double>(t.samples_per_iteration) / t.iteration_s, 0, 'g', 4)
             .arg(would_not);
    // In the unit that suits the size (MFLOPS on a small model, not 0.0006 TFLOPS).
    h += QString("<br>%1 per GPU%2")
             .arg(QString::fromStdString(FormatFlopRate(FlopRate{t.model_flops / t.iteration_s})))
             .arg(would_not);
  }
  h += "</p><table cellspacing=0 cellpadding=2><tr><th align=left>exposed</th><th align=right>time</th><th "
       "align=right>%</th></tr>";
  for (int c = 0; c < kNumTimeClasses; ++c) {
    const double s = b.seconds[c];
    if (s <= 0) continue;
    h += QString("<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td></tr>")
             .arg(TimeClassName(static_cast<TimeClass>(c)).data(), FormatSeconds(s))
             .arg(t.iteration_s > 0 ? 100 * s / t.iteration_s : 0.0, 0, 'f', 1);
  }
  h += QString("</table><p>most exposed: <b>%1</b></p><p>peak memory</p><table cellspacing=0 cellpadding=2>")
           .arg(TimeClassName(b.bottleneck).data());
  for (Tier tier : kAllTiers)
    h += QString("<tr><td>%1</td><td align=right>%2</td><td>of %3</td></tr>")
             .arg(TierName(tier).data(), QString::fromStdString(FormatBytes(t.Peak(tier))),
                  QString::fromStdString(FormatBytes(t.capacity[static_cast<int>(tier)])));
  h += "</table>";
  for (const std::string& n : t.notes) h += "<p>" + QString::fromStdString(n).toHtmlEscaped() + "</p>";
  return h;
}

QString LegendHtml() {
  QString h = "<p>memory by state kind</p><p>";
  for (int k = 0; k < kNumStateKinds; ++k)
    h += QString("<span style='background-color:%1'>&nbsp;&nbsp;&nbsp;</span> %2<br>")
             .arg(KindColor(static_cast<StateKind>(k)).name(), StateKindName(static_cast<StateKind>(k)).data());
  h += "</p><p>ops by kind</p><p>";
  for (int k = 0; k < kNumOpKinds; ++k)
    h += QString("<span style='background-color:%1'>&nbsp;&nbsp;&nbsp;</span> %2<br>")
             .arg(OpColor(static_cast<OpKind>(k)).name(), OpKindName(static_cast<OpKind>(k)).data());
  return h + "</p>";
}

}  // namespace strata::gui
