#include "strata/gui/time_axis.h"

#include <algorithm>

namespace strata::gui {

void TimeAxis::SetEnd(double end) {
  end_ = end > 0 ? end : 1e-9;
  SetRange(0, end_);
}

void TimeAxis::SetRange(double t0, double t1) {
  const double min_span = end_ * 1e-9;
  if (t1 - t0 < min_span) t1 = t0 + min_span;
  const double span = std::min(t1 - t0, end_);
  t0 = std::clamp(t0, 0.0, end_ - span);
  if (t0 == t0_ && t0 + span == t1_) return;
  t0_ = t0;
  t1_ = t0 + span;
  emit Changed();
}

void TimeAxis::ZoomAt(double at, double factor) { SetRange(at - (at - t0_) * factor, at + (t1_ - at) * factor); }

void TimeAxis::Pan(double dt) { SetRange(t0_ + dt, t1_ + dt); }

}  // namespace strata::gui
