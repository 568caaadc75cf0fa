// An Env with files in memory: fast, deterministic tests of everything above
// the I/O layer. Engines of every kind run requests synchronously.
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "strata/executor/env.h"

namespace strata::exec {

namespace {

struct MemData {
  std::mutex mu;
  std::vector<std::byte> bytes;
};

class MemFile : public File {
 public:
  MemFile(std::string path, std::shared_ptr<MemData> d) : path_(std::move(path)), d_(std::move(d)) {}
  Status Read(uint64_t offset, std::span<std::byte> out) override {
    std::lock_guard<std::mutex> l(d_->mu);
    if (offset + out.size() > d_->bytes.size())
      return Status::IOError("short read on '" + path_ + "': " +
                             std::to_string(d_->bytes.size() > offset ? d_->bytes.size() - offset : 0) + " of " +
                             std::to_string(out.size()) + " bytes at offset " + std::to_string(offset));
    std::memcpy(out.data(), d_->bytes.data() + offset, out.size());
    return Status::Ok();
  }
  Status Write(uint64_t offset, std::span<const std::byte> in) override {
    std::lock_guard<std::mutex> l(d_->mu);
    if (offset + in.size() > d_->bytes.size()) d_->bytes.resize(offset + in.size());
    std::memcpy(d_->bytes.data() + offset, in.data(), in.size());
    return Status::Ok();
  }
  Status Allocate(uint64_t size) override {
    std::lock_guard<std::mutex> l(d_->mu);
    if (size > d_->bytes.size()) d_->bytes.resize(size);
    return Status::Ok();
  }
  uint64_t size() const override {
    std::lock_guard<std::mutex> l(d_->mu);
    return d_->bytes.size();
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::shared_ptr<MemData> d_;
};

class MemEnv : public Env {
 public:
  Result<std::unique_ptr<File>> OpenFile(const std::string& path, bool create) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) {
      if (!create) return Status::IOError("open '" + path + "': No such file or directory (ENOENT)");
      it = files_.emplace(path, std::make_shared<MemData>()).first;
    }
    return std::unique_ptr<File>(std::make_unique<MemFile>(path, it->second));
  }
  Status CreateDir(const std::string&) override { return Status::Ok(); }
  Status RemoveFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    files_.erase(path);
    return Status::Ok();
  }
  Result<std::unique_ptr<IoEngine>> NewIoEngine(IoEngineKind, const AioConfig&) override { return NewSyncEngine(); }
  double NowSeconds() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<MemData>> files_;
};

}  // namespace

std::unique_ptr<Env> NewMemEnv() { return std::make_unique<MemEnv>(); }

}  // namespace strata::exec
