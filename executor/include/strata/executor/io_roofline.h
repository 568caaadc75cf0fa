// The NVMe roofline of a plan: how fast this device moves exactly one
// iteration's NVMe traffic, with nothing else running. It is the physical
// limit of the NVMe link for the plan's access shape (its ops' requests,
// sizes, offsets, engine and aio knobs), as a pure memory kernel with the
// same access shape is for the optimizer: the iteration over it says how
// much of the device's time the schedule loses to dependencies, compute and
// the rest, rather than how this disk's rate drifted since a calibration.
//
// Each op's requests go to the engine as one batch, as the executor issues
// them, against shadow files laid out like the plan's NVMe buffers (written
// through once: reads of never-written extents return zeros without touching
// the disk), from and into scratch memory, so the run's own files and
// weights are never touched. Three ways, each timed:
//  - concurrent: the read ops in plan order on one engine and thread, the
//    write ops on another, both at once (the executor's two NVMe streams
//    without their dependencies);
//  - ordered: the same, each op once the NVMe ops it depends on (through
//    any others) are done: the executor with everything but NVMe free. A
//    read that follows the write of the same bytes may then hit a cache
//    below the file system (a virtual disk's host), as it does in the run;
//  - turns: all reads, then all writes, one at a time.
// The roofline is the best of the three.
#pragma once

#include <algorithm>
#include <memory>
#include <string>

#include "strata/core/status.h"
#include "strata/executor/env.h"
#include "strata/plan/plan.h"

namespace strata::exec {

struct IoRooflineOptions {
  std::string nvme_dir;  // default: each buffer's swap directory (Plan::run)
  int rank = 0;          // names the shadow files (ranks sharing a directory)
  IoEngineKind engine = IoEngineKind::kLibaio;
  Env* env = nullptr;  // default: PosixEnv()
};

struct IoRoofline {
  double concurrent_s = 0;
  double ordered_s = 0;
  double turns_s = 0;
  int64_t read_bytes = 0, write_bytes = 0;  // one iteration's, this rank's
  double seconds() const { return std::min({concurrent_s, ordered_s, turns_s}); }
};

// Lays out the shadow files once (Open), then measures passes on demand;
// the files are removed when it goes. Move-only.
class IoRooflineProbe {
 public:
  static Result<IoRooflineProbe> Open(const Plan& plan, const IoRooflineOptions& o);
  IoRooflineProbe(IoRooflineProbe&&) noexcept;
  IoRooflineProbe& operator=(IoRooflineProbe&&) noexcept;
  ~IoRooflineProbe();

  // One pass of each way. An I/O failure returns its error (errno, path).
  Result<IoRoofline> Measure();

 private:
  struct Impl;
  explicit IoRooflineProbe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::exec
