// The visible time range shared by every chart of a window: zoom and pan in
// one chart move all of them (and both timelines when comparing).
#pragma once

#include <QObject>

namespace strata::gui {

class TimeAxis : public QObject {
  Q_OBJECT
 public:
  explicit TimeAxis(QObject* parent = nullptr) : QObject(parent) {}

  double t0() const { return t0_; }
  double t1() const { return t1_; }
  double end() const { return end_; }
  // Sets the full extent and shows all of it.
  void SetEnd(double end);
  void SetRange(double t0, double t1);
  // Zooms by `factor` (< 1 zooms in) keeping time `at` fixed on screen.
  void ZoomAt(double at, double factor);
  void Pan(double dt);
  void Reset() { SetRange(0, end_); }

 signals:
  void Changed();

 private:
  double t0_ = 0, t1_ = 1, end_ = 1;
};

}  // namespace strata::gui
