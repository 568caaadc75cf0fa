// An Env with files in memory: fast, deterministic tests of everything above
// the I/O layer. Engines of every kind run requests synchronously.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

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
      return Status::IOError("short read on '" + path_ +
                             "': " + std::to_string(d_->bytes.size() > offset ? d_->bytes.size() - offset : 0) +
                             " of " + std::to_string(out.size()) + " bytes at offset " + std::to_string(offset));
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
  Status Sync() override { return Status::Ok(); }
  uint64_t size() const override {
    std::lock_guard<std::mutex> l(d_->mu);
    return d_->bytes.size();
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::shared_ptr<MemData> d_;
};

// Held lock paths, shared with the lock objects (which may outlive the Env).
struct LockSet {
  std::mutex mu;
  std::set<std::string> held;
};

class MemLock : public FileLock {
 public:
  MemLock(std::shared_ptr<LockSet> set, std::string path) : set_(std::move(set)), path_(std::move(path)) {}
  ~MemLock() override {
    std::lock_guard<std::mutex> l(set_->mu);
    set_->held.erase(path_);
  }

 private:
  std::shared_ptr<LockSet> set_;
  std::string path_;
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
  Status CreateDir(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    dirs_.insert(path);
    return Status::Ok();
  }
  Status RemoveFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    files_.erase(path);
    return Status::Ok();
  }
  Result<std::unique_ptr<File>> CreateNewFile(const std::string& path) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (files_.count(path) != 0) return Status::IOError("open '" + path + "': File exists (EEXIST)");
    }
    return OpenFile(path, true);
  }
  Status CreateNewDir(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    if (!dirs_.insert(path).second) return Status::IOError("create directory '" + path + "': File exists (EEXIST)");
    return Status::Ok();
  }
  Status RemoveTree(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    const std::string prefix = path + "/";
    std::erase_if(files_, [&](const auto& kv) { return kv.first == path || kv.first.rfind(prefix, 0) == 0; });
    std::erase_if(dirs_, [&](const std::string& d) { return d == path || d.rfind(prefix, 0) == 0; });
    return Status::Ok();
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = files_.find(from); it != files_.end()) {
      auto d = it->second;
      files_.erase(it);
      files_[to] = std::move(d);
      return Status::Ok();
    }
    if (dirs_.count(from) == 0) return Status::IOError("rename '" + from + "': No such file or directory (ENOENT)");
    // A directory: everything under it moves.
    const std::string prefix = from + "/";
    std::map<std::string, std::shared_ptr<MemData>> moved;
    std::erase_if(files_, [&](const auto& kv) {
      if (kv.first.rfind(prefix, 0) != 0) return false;
      moved[to + "/" + kv.first.substr(prefix.size())] = kv.second;
      return true;
    });
    files_.merge(moved);
    std::set<std::string> dirs;
    for (const std::string& d : dirs_)
      dirs.insert(d == from ? to : d.rfind(prefix, 0) == 0 ? to + "/" + d.substr(prefix.size()) : d);
    dirs_ = std::move(dirs);
    return Status::Ok();
  }
  Status SyncDir(const std::string&) override { return Status::Ok(); }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    const std::string prefix = path + "/";
    std::set<std::string> names;
    auto add = [&](const std::string& p) {
      if (p.rfind(prefix, 0) != 0) return;
      const std::string rest = p.substr(prefix.size());
      names.insert(rest.substr(0, rest.find('/')));
    };
    for (const auto& kv : files_) add(kv.first);
    for (const std::string& d : dirs_) add(d);
    if (names.empty() && dirs_.count(path) == 0) return Status::NotFound("no directory '" + path + "'");
    return std::vector<std::string>(names.begin(), names.end());
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(locks_->mu);
    if (!locks_->held.insert(path).second)
      return Status::IOError("'" + path + "' is locked by another run (process " + std::to_string(::getpid()) +
                             "): its files are in use; give this run another directory (nvme_path, --nvme-dir "
                             "or --checkpoint-dir)");
    {
      std::lock_guard<std::mutex> fl(mu_);
      if (files_.count(path) == 0) files_.emplace(path, std::make_shared<MemData>());  // as the real one creates it
    }
    return std::unique_ptr<FileLock>(std::make_unique<MemLock>(locks_, path));
  }
  Result<std::unique_ptr<IoEngine>> NewIoEngine(IoEngineKind, const AioConfig&) override { return NewSyncEngine(); }
  double NowSeconds() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<MemData>> files_;
  std::set<std::string> dirs_;
  std::shared_ptr<LockSet> locks_ = std::make_shared<LockSet>();
};

}  // namespace

std::unique_ptr<Env> NewMemEnv() { return std::make_unique<MemEnv>(); }

}  // namespace strata::exec
