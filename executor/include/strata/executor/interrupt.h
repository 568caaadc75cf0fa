// Stopping a run cleanly on SIGINT and SIGTERM.
//
// The first signal asks the run to stop: StopSignal() returns it, the
// runner starts no further op, waits for what is in flight (I/O drained)
// and returns a kCancelled status; the run's swap directory is removed as
// its BufferStore goes, and `strata run` exits 128 + the signal (130, 143).
// A watcher thread gives that `grace_s` seconds: past it (a rank blocked in
// a collective whose peers already stopped), or on a second signal, it
// removes the registered swap directories itself and ends the process with
// the same code.
#pragma once

#include <string>

namespace strata::exec {

// Idempotent; call before the run starts its threads. Also ignores
// SIGXFSZ, so a swap file past the file-size limit is an EFBIG error the
// run reports and cleans up after.
void InstallStopHandlers(double grace_s = 10);
// The signal that asked to stop, or 0.
int StopSignal();
// Directories the watcher removes if it has to end the process.
void RegisterStopCleanup(const std::string& dir);
void UnregisterStopCleanup(const std::string& dir);

}  // namespace strata::exec
