// Env: every side effect of the executor (files, NVMe I/O, clock) goes
// through this interface (after LevelDB's Env), with a real POSIX
// implementation, an in-memory one, and a fault-injecting wrapper, so every
// failure path can be tested.
//
// Thread safety: File::Read/Write and IoEngine::Run may be called from
// several threads on disjoint byte ranges.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/core/status.h"

namespace strata::exec {

// A file of fixed-offset records. Errors name the path and errno.
class File {
 public:
  virtual ~File() = default;
  // Reads exactly out.size() bytes at `offset`; a short read is an error.
  virtual Status Read(uint64_t offset, std::span<std::byte> out) = 0;
  virtual Status Write(uint64_t offset, std::span<const std::byte> in) = 0;
  // Reserves space up to `size` bytes (posix_fallocate): O_DIRECT writes
  // into unallocated space stall in io_submit, and ENOSPC shows up here.
  virtual Status Allocate(uint64_t size) = 0;
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
  // The descriptor for O_DIRECT asynchronous I/O, or -1 when there is none.
  virtual int direct_fd() const { return -1; }
  // Makes what was written durable (fsync).
  virtual Status Sync() = 0;
};

// An exclusive lock held on a file while this object lives (after LevelDB's
// Env::LockFile).
class FileLock {
 public:
  virtual ~FileLock() = default;
};

struct IoRequest {
  enum class Op { kRead, kWrite };
  Op op = Op::kRead;
  File* file = nullptr;
  uint64_t offset = 0;
  void* buffer = nullptr;  // any alignment; engines bounce what O_DIRECT cannot take
  size_t length = 0;       // any length
  // One request, not cut into aio.block_size pieces (write buffering's
  // last request of a run, which takes the run's remainder: below two
  // blocks; write_requests.h).
  bool whole = false;
};

// Moves batches of requests between memory and files, honouring DeepSpeed's
// aio knobs: block_size (requests are split into blocks), queue_depth (blocks
// in flight per thread), intra_op_parallelism (threads), single_submit (one
// block per submit call) and overlap_events (refill as completions arrive,
// rather than draining the queue first).
class IoEngine {
 public:
  virtual ~IoEngine() = default;
  // Completes every request. On failure, waits for what is in flight and
  // returns the first error (errno and path); the destination bytes of a
  // failed read are unspecified and must not be used.
  virtual Status Run(std::span<const IoRequest> requests) = 0;
  virtual std::string_view name() const = 0;
};

// The engine of kind kSync, for any Env: runs each request in turn through
// File::Read/Write on the calling thread.
std::unique_ptr<IoEngine> NewSyncEngine();

enum class IoEngineKind { kLibaio, kIoUring, kSync };
std::string_view IoEngineName(IoEngineKind k);
// The inverse of IoEngineName; an unknown name is InvalidArgument.
Result<IoEngineKind> ParseIoEngineKind(std::string_view name);

class Env {
 public:
  virtual ~Env() = default;
  // Opens (and with `create`, creates) a file for reading and writing.
  virtual Result<std::unique_ptr<File>> OpenFile(const std::string& path, bool create) = 0;
  virtual Status CreateDir(const std::string& path) = 0;  // and parents; ok if it exists
  virtual Status RemoveFile(const std::string& path) = 0;
  // A file that must not exist yet (O_EXCL): a run never opens another's.
  virtual Result<std::unique_ptr<File>> CreateNewFile(const std::string& path) = 0;
  // One directory that must not exist yet (its parent must).
  virtual Status CreateNewDir(const std::string& path) = 0;
  // A directory and everything under it; ok if it does not exist.
  virtual Status RemoveTree(const std::string& path) = 0;
  // Atomically replaces `to` (rename(2)).
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Makes a directory's entries (creations, renames) durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // The names in a directory, sorted; NotFound if it does not exist.
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  // An exclusive lock on `path` (created if missing; it then holds this
  // process's pid). If another process holds it, the error names that
  // process. Released when the FileLock is destroyed or the process ends.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) = 0;
  virtual Result<std::unique_ptr<IoEngine>> NewIoEngine(IoEngineKind kind, const AioConfig& config) = 0;
  virtual double NowSeconds() = 0;  // monotonic
};

// The real environment: POSIX files (O_DIRECT where the file system allows),
// libaio and io_uring engines, the monotonic clock. Never destroyed.
Env* PosixEnv();
// Files in memory; every engine kind is served synchronously.
std::unique_ptr<Env> NewMemEnv();

// Wraps an Env and makes chosen operations fail, for tests of error paths.
// kFlipByte is silent corruption: the write after `after` writes stores its
// bytes with the middle one inverted and reports success (once).
struct FaultSpec {
  enum class Kind { kNone, kNoSpace, kIoError, kShortRead, kFlipByte };
  Kind kind = Kind::kNone;
  int64_t after = 0;  // let this many reads/writes/allocations succeed first
};
class FaultInjectionEnv : public Env {
 public:
  explicit FaultInjectionEnv(Env* base) : base_(base) {}
  // Not thread safe with respect to running operations: inject between runs.
  void Inject(FaultSpec spec) {
    spec_ = spec;
    count_ = 0;
  }
  // Returns the error to report for the next operation, or Ok.
  Status Next(bool is_read, bool is_allocate, const std::string& path);
  // For a write: whether to corrupt this one (kFlipByte).
  bool FlipThisWrite();

  Result<std::unique_ptr<File>> OpenFile(const std::string& path, bool create) override;
  Status CreateDir(const std::string& path) override { return base_->CreateDir(path); }
  Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }
  Result<std::unique_ptr<File>> CreateNewFile(const std::string& path) override;
  Status CreateNewDir(const std::string& path) override { return base_->CreateNewDir(path); }
  Status RemoveTree(const std::string& path) override { return base_->RemoveTree(path); }
  Status RenameFile(const std::string& from, const std::string& to) override { return base_->RenameFile(from, to); }
  Status SyncDir(const std::string& path) override { return base_->SyncDir(path); }
  Result<std::vector<std::string>> ListDir(const std::string& path) override { return base_->ListDir(path); }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override { return base_->LockFile(path); }
  Result<std::unique_ptr<IoEngine>> NewIoEngine(IoEngineKind kind, const AioConfig& config) override;
  double NowSeconds() override { return base_->NowSeconds(); }

 private:
  Env* base_;
  FaultSpec spec_;
  std::atomic<int64_t> count_{0};
};

}  // namespace strata::exec
