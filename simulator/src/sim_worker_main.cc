// strata-sim-worker: runs one simulation for a multi-threaded caller of
// sim::Simulate (see simulator.h), which spawns it with the request on
// stdin (a socket) and reads the result frames from stdout.
#include <cstdio>

#include "sim_child.h"

int main() {
  strata::Plan plan;
  strata::HardwareSpec hw;
  strata::sim::SimOptions opt;
  const strata::Status st = strata::sim::ReadSimRequest(0, &plan, &hw, &opt);
  if (!st.ok()) {
    std::fprintf(stderr, "strata-sim-worker: %s\n", st.message().c_str());
    return 2;
  }
  strata::sim::RunSimulationChild(plan, hw, opt, 1);
}
