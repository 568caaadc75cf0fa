// FaultInjectionEnv: after `after` successful reads, writes or allocations,
// the chosen fault hits every later one (after LevelDB's SpecialEnv).
#include <cerrno>
#include <cstring>
#include <vector>

#include "strata/executor/env.h"

namespace strata::exec {

Status FaultInjectionEnv::Next(bool is_read, bool is_allocate, const std::string& path) {
  using K = FaultSpec::Kind;
  if (spec_.kind == K::kNone || spec_.kind == K::kFlipByte) return Status::Ok();
  if (spec_.kind == K::kShortRead && !is_read) return Status::Ok();
  if (count_++ < spec_.after) return Status::Ok();
  switch (spec_.kind) {
    case K::kNoSpace:
      if (is_read) return Status::Ok();
      return Status::IOError(std::string(is_allocate ? "allocate" : "write") + " '" + path +
                             "': " + std::strerror(ENOSPC) + " (ENOSPC)");
    case K::kIoError:
      return Status::IOError(std::string(is_read ? "read" : "write") + " '" + path + "': " + std::strerror(EIO) +
                             " (EIO)");
    case K::kShortRead:
      return Status::IOError("short read on '" + path + "' (injected)");
    case K::kNone:
    case K::kFlipByte:
      break;
  }
  return Status::Ok();
}

bool FaultInjectionEnv::FlipThisWrite() { return spec_.kind == FaultSpec::Kind::kFlipByte && count_++ == spec_.after; }

namespace {

class FaultFile : public File {
 public:
  FaultFile(std::unique_ptr<File> base, FaultInjectionEnv* env) : base_(std::move(base)), env_(env) {}
  Status Read(uint64_t offset, std::span<std::byte> out) override {
    STRATA_RETURN_IF_ERROR(env_->Next(true, false, path()));
    return base_->Read(offset, out);
  }
  Status Write(uint64_t offset, std::span<const std::byte> in) override {
    STRATA_RETURN_IF_ERROR(env_->Next(false, false, path()));
    if (!in.empty() && env_->FlipThisWrite()) {
      std::vector<std::byte> bad(in.begin(), in.end());
      bad[bad.size() / 2] = ~bad[bad.size() / 2];
      return base_->Write(offset, bad);
    }
    return base_->Write(offset, in);
  }
  Status Allocate(uint64_t size) override {
    STRATA_RETURN_IF_ERROR(env_->Next(false, true, path()));
    return base_->Allocate(size);
  }
  Status Sync() override { return base_->Sync(); }
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }
  // No direct descriptor: engines go through Read/Write, where faults hit.

 private:
  std::unique_ptr<File> base_;
  FaultInjectionEnv* env_;
};

}  // namespace

Result<std::unique_ptr<File>> FaultInjectionEnv::OpenFile(const std::string& path, bool create) {
  STRATA_ASSIGN_OR_RETURN(auto f, base_->OpenFile(path, create));
  return std::unique_ptr<File>(std::make_unique<FaultFile>(std::move(f), this));
}

Result<std::unique_ptr<File>> FaultInjectionEnv::CreateNewFile(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto f, base_->CreateNewFile(path));
  return std::unique_ptr<File>(std::make_unique<FaultFile>(std::move(f), this));
}

// Requests go one by one through the faulty files' Read and Write.
Result<std::unique_ptr<IoEngine>> FaultInjectionEnv::NewIoEngine(IoEngineKind, const AioConfig&) {
  return NewSyncEngine();
}

}  // namespace strata::exec
