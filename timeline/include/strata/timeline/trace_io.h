// Timeline exports: Chrome Trace Event JSON (opens in Perfetto and
// chrome://tracing) and CSV. Output is deterministic: the same timeline gives
// the same bytes.
//
// Chrome trace layout: one process per rank ("rank R (node N)") with one
// thread per stream (compute, h2d, d2h, nvme_read, nvme_write, comm,
// cpu_optim, host); ops are complete events ("ph":"X", microseconds) with args op,
// layer, bytes, flops; GPU memory is a counter track per rank ("gpu memory",
// one series per state kind) and CPU/NVMe memory counter tracks live in one
// process per node (pid 1000000 + node). "otherData" carries format
// "strata.trace" version 1, source, scenario, world size, iteration time and
// capacities.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "strata/core/status.h"
#include "strata/timeline/timeline.h"

namespace strata {

inline constexpr int kNodePidBase = 1000000;

void WriteChromeTrace(const Timeline& t, std::ostream& out);
// Op spans: rank,op,name,kind,stream,layer,start_s,end_s,bytes,flops
void WriteOpsCsv(const Timeline& t, std::ostream& out);
// Memory samples: tier,owner,t_s,total_bytes,<one column per state kind>
void WriteMemoryCsv(const Timeline& t, std::ostream& out);

// File helpers: IOError with errno and path on failure. WriteCsvFiles writes
// ops to `path` and memory to `path` with ".csv" replaced by ".memory.csv".
Status WriteChromeTraceFile(const Timeline& t, const std::string& path);
Status WriteCsvFiles(const Timeline& t, const std::string& path);

// Reads a trace written by WriteChromeTrace back into a timeline (the GUI's
// loader). Any malformed, truncated or foreign input gives InvalidArgument
// naming `source` and the problem ("trace.json:3:17: expected ':'", "not a
// Strata trace: otherData.format is missing"); it never crashes. Linear in
// the file size, with a hand-written parser (a 1M-op trace is ~200 MB).
Result<Timeline> ReadChromeTrace(std::string_view text, const std::string& source);
Result<Timeline> ReadChromeTraceFile(const std::string& path);

}  // namespace strata
