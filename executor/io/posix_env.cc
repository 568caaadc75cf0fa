// The real Env: POSIX files (a buffered descriptor for plain reads and
// writes, an O_DIRECT one for the engines), libaio and io_uring engines.
#include <fcntl.h>
#include <libaio.h>
#include <liburing.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "io/direct_io.h"

namespace strata::exec {

std::string_view IoEngineName(IoEngineKind k) {
  switch (k) {
    case IoEngineKind::kLibaio:
      return "libaio";
    case IoEngineKind::kIoUring:
      return "io_uring";
    case IoEngineKind::kSync:
      return "sync";
  }
  return "?";
}

Result<IoEngineKind> ParseIoEngineKind(std::string_view name) {
  for (IoEngineKind k : {IoEngineKind::kLibaio, IoEngineKind::kIoUring, IoEngineKind::kSync})
    if (IoEngineName(k) == name) return k;
  return Status::InvalidArgument("unknown NVMe engine '" + std::string(name) + "' (libaio, io_uring or sync)");
}

namespace {

class PosixFile : public File {
 public:
  PosixFile(std::string path, int fd, int dfd) : path_(std::move(path)), fd_(fd), dfd_(dfd) {}
  ~PosixFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (dfd_ >= 0) ::close(dfd_);
  }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  Status Read(uint64_t offset, std::span<std::byte> out) override {
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("read", path_, errno);
      if (n == 0)
        return Status::IOError("short read on '" + path_ + "': " + std::to_string(done) + " of " +
                               std::to_string(out.size()) + " bytes at offset " + std::to_string(offset));
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  Status Write(uint64_t offset, std::span<const std::byte> in) override {
    size_t done = 0;
    while (done < in.size()) {
      const ssize_t n = ::pwrite(fd_, in.data() + done, in.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("write", path_, errno);
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  Status Allocate(uint64_t size) override {
    const uint64_t rounded = (size + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    const int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(rounded));
    if (err != 0) return ErrnoStatus("allocate " + std::to_string(rounded) + " bytes for", path_, err);
    return Status::Ok();
  }
  Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
    return Status::Ok();
  }
  uint64_t size() const override {
    struct stat st {};
    return ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  }
  const std::string& path() const override { return path_; }
  int direct_fd() const override { return dfd_; }

 private:
  std::string path_;
  int fd_, dfd_;
};

class AioQueue : public AsyncQueue {
 public:
  ~AioQueue() override {
    if (ctx_ != nullptr) io_destroy(ctx_);
  }
  Status Init(unsigned depth) override {
    const int r = io_setup(static_cast<int>(depth), &ctx_);
    if (r < 0) return ErrnoStatus("io_setup(" + std::to_string(depth) + ") for", "libaio", -r);
    iocbs_.resize(depth);
    free_.clear();
    for (unsigned i = 0; i < depth; ++i) free_.push_back(i);
    return Status::Ok();
  }
  void Prepare(const DirectOp& op, size_t tag) override {
    const unsigned slot = free_.back();
    free_.pop_back();
    iocb& cb = iocbs_[slot];
    if (op.op == IoRequest::Op::kRead)
      io_prep_pread(&cb, op.fd, op.buf, op.len, static_cast<long long>(op.offset));
    else
      io_prep_pwrite(&cb, op.fd, op.buf, op.len, static_cast<long long>(op.offset));
    cb.data = reinterpret_cast<void*>(tag);
    slot_of_.emplace_back(&cb, slot);
    pending_.push_back(&cb);
  }
  Status Submit(bool single) override {
    size_t done = 0;
    while (done < pending_.size()) {
      const long n = single ? 1 : static_cast<long>(pending_.size() - done);
      const int r = io_submit(ctx_, n, pending_.data() + done);
      if (r == -EAGAIN || r == -EINTR) continue;
      if (r < 0) return ErrnoStatus("io_submit", "libaio", -r);
      done += static_cast<size_t>(r);
    }
    pending_.clear();
    return Status::Ok();
  }
  Status Reap(unsigned min, std::vector<std::pair<size_t, long>>& out) override {
    io_event events[64];
    int r;
    do r = io_getevents(ctx_, static_cast<long>(min), 64, events, nullptr);
    while (r == -EINTR);
    if (r < 0) return ErrnoStatus("io_getevents", "libaio", -r);
    for (int i = 0; i < r; ++i) {
      // io_event.res is unsigned: a failure is -errno read as long.
      out.emplace_back(reinterpret_cast<size_t>(events[i].data), static_cast<long>(events[i].res));
      for (size_t k = 0; k < slot_of_.size(); ++k)
        if (slot_of_[k].first == events[i].obj) {
          free_.push_back(slot_of_[k].second);
          slot_of_[k] = slot_of_.back();
          slot_of_.pop_back();
          break;
        }
    }
    return Status::Ok();
  }

 private:
  io_context_t ctx_ = nullptr;
  std::vector<iocb> iocbs_;
  std::vector<unsigned> free_;
  std::vector<std::pair<iocb*, unsigned>> slot_of_;
  std::vector<iocb*> pending_;
};

class UringQueue : public AsyncQueue {
 public:
  ~UringQueue() override {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  Status Init(unsigned depth) override {
    // COOP_TASKRUN: completions are run when this thread enters the kernel
    // anyway, not by interrupting it (kernels before 5.19 reject the flag).
    int r = io_uring_queue_init(depth, &ring_, IORING_SETUP_COOP_TASKRUN);
    if (r == -EINVAL) r = io_uring_queue_init(depth, &ring_, 0);
    if (r < 0) return ErrnoStatus("io_uring_queue_init(" + std::to_string(depth) + ") for", "io_uring", -r);
    ready_ = true;
    return Status::Ok();
  }
  void Prepare(const DirectOp& op, size_t tag) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // never null: at most depth prepared
    if (op.op == IoRequest::Op::kRead)
      io_uring_prep_read(sqe, op.fd, op.buf, static_cast<unsigned>(op.len), op.offset);
    else
      io_uring_prep_write(sqe, op.fd, op.buf, static_cast<unsigned>(op.len), op.offset);
    io_uring_sqe_set_data64(sqe, tag);
    ++pending_;
  }
  Status Submit(bool single) override {
    (void)single;  // io_uring submits the whole ring in one system call
    while (pending_ > 0) {
      const int r = io_uring_submit(&ring_);
      if (r == -EINTR || r == -EAGAIN) continue;
      if (r < 0) return ErrnoStatus("io_uring_submit", "io_uring", -r);
      pending_ -= static_cast<unsigned>(r);
    }
    return Status::Ok();
  }
  Status Reap(unsigned min, std::vector<std::pair<size_t, long>>& out) override {
    io_uring_cqe* cqe = nullptr;
    int r;
    do r = io_uring_wait_cqe_nr(&ring_, &cqe, min);
    while (r == -EINTR);
    if (r < 0) return ErrnoStatus("io_uring_wait_cqe", "io_uring", -r);
    unsigned head, n = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      out.emplace_back(static_cast<size_t>(io_uring_cqe_get_data64(cqe)), static_cast<long>(cqe->res));
      ++n;
    }
    io_uring_cq_advance(&ring_, n);
    return Status::Ok();
  }

 private:
  io_uring ring_{};
  bool ready_ = false;
  unsigned pending_ = 0;
};

// Requests on files without an O_DIRECT descriptor run synchronously.
class SyncEngine : public IoEngine {
 public:
  Status Run(std::span<const IoRequest> reqs) override {
    for (const IoRequest& r : reqs) {
      auto* p = static_cast<std::byte*>(r.buffer);
      Status st =
          r.op == IoRequest::Op::kRead ? r.file->Read(r.offset, {p, r.length}) : r.file->Write(r.offset, {p, r.length});
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  std::string_view name() const override { return "sync"; }
};

class DirectEngine : public IoEngine {
 public:
  DirectEngine(IoEngineKind kind, const AioConfig& cfg) : kind_(kind), cfg_(cfg) {}
  Status Run(std::span<const IoRequest> reqs) override {
    for (const IoRequest& r : reqs)
      if (r.file->direct_fd() < 0) return SyncEngine().Run(reqs);
    STRATA_RETURN_IF_ERROR(SetUp());
    DirectPlan plan = PlanDirect(reqs, static_cast<size_t>(cfg_.block_size.v));
    STRATA_RETURN_IF_ERROR(RunQueued(plan.pre_reads, cfg_, raw_));
    for (const CopyOut& c : plan.copy_ins) std::memcpy(c.from, c.to, c.len);
    STRATA_RETURN_IF_ERROR(RunQueued(plan.ops, cfg_, raw_));
    for (const CopyOut& c : plan.copy_outs) std::memcpy(c.to, c.from, c.len);
    return Status::Ok();
  }
  std::string_view name() const override { return IoEngineName(kind_); }

 private:
  // One queue per thread, set up on first use and kept.
  Status SetUp() {
    if (!queues_.empty()) return Status::Ok();
    const int threads = std::max(1, cfg_.intra_op_parallelism);
    for (int t = 0; t < threads; ++t) {
      std::unique_ptr<AsyncQueue> q;
      if (kind_ == IoEngineKind::kIoUring)
        q = std::make_unique<UringQueue>();
      else
        q = std::make_unique<AioQueue>();
      Status st = q->Init(static_cast<unsigned>(std::max(1, cfg_.queue_depth)));
      if (!st.ok()) {
        queues_.clear();
        raw_.clear();
        return st;
      }
      raw_.push_back(q.get());
      queues_.push_back(std::move(q));
    }
    return Status::Ok();
  }

  IoEngineKind kind_;
  AioConfig cfg_;
  std::vector<std::unique_ptr<AsyncQueue>> queues_;
  std::vector<AsyncQueue*> raw_;
};

class PosixLock : public FileLock {
 public:
  explicit PosixLock(int fd) : fd_(fd) {}
  ~PosixLock() override { ::close(fd_); }  // releases the flock
  PosixLock(const PosixLock&) = delete;
  PosixLock& operator=(const PosixLock&) = delete;

 private:
  int fd_;
};

// The process id a lock file holds, or "" (trailing blanks dropped).
std::string ReadPid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid;
}

// Ok when fd is what an earlier run of this user leaves as a lock file: a
// regular file with one link, owned by this effective uid, holding nothing
// or a process id.
Status CheckOwnLockFile(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus("stat lock file", path, errno);
  const char* why = !S_ISREG(st.st_mode)       ? "not a regular file"
                    : st.st_nlink != 1         ? "a file with other hard links"
                    : st.st_uid != ::geteuid() ? "owned by another user"
                    : st.st_size > 24          ? "not a lock file (longer than a process id)"
                                               : nullptr;
  if (why == nullptr && ReadPid(fd).find_first_not_of("0123456789") != std::string::npos)
    why = "not a lock file (it holds something other than a process id)";
  if (why == nullptr) return Status::Ok();
  return Status::IOError("'" + path + "' exists and is " + why +
                         ": refused as a lock file (remove it, or give this run another directory)");
}

class RealEnv : public Env {
 public:
  Result<std::unique_ptr<File>> OpenFile(const std::string& path, bool create) override {
    return Open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0));
  }
  Result<std::unique_ptr<File>> CreateNewFile(const std::string& path) override {
    return Open(path, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL);
  }
  Status CreateNewDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) != 0) return ErrnoStatus("create directory", path, errno);
    return Status::Ok();
  }
  Status RemoveTree(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return ErrnoStatus("remove", path, ec.value());
    return Status::Ok();
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename to '" + to + "'", from, errno);
    return Status::Ok();
  }
  Status SyncDir(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open directory", path, errno);
    const int r = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (r != 0) return ErrnoStatus("fsync directory", path, err);
    return Status::Ok();
  }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    std::error_code ec;
    std::vector<std::string> names;
    for (auto it = std::filesystem::directory_iterator(path, ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec))
      names.push_back(it->path().filename().string());
    if (ec == std::errc::no_such_file_or_directory) return Status::NotFound("no directory '" + path + "'");
    if (ec) return ErrnoStatus("list directory", path, ec.value());
    std::sort(names.begin(), names.end());
    return names;
  }
  // The lock file may sit in a directory others can write (the default
  // nvme_path is under /tmp): it is never reached through a symbolic link,
  // and an existing file is used only if it is a lock file of this user
  // (regular, one link, this uid, at most a pid in it); nothing else is
  // truncated or written.
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return ErrnoStatus("create lock file", path, errno);
    if (fd < 0) {
      fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0 && errno == ELOOP)
        return Status::IOError("lock file '" + path +
                               "' is a symbolic link: refused (remove it, or give this run "
                               "another directory)");
      if (fd < 0) return ErrnoStatus("open lock file", path, errno);
      if (Status st = CheckOwnLockFile(fd, path); !st.ok()) {
        ::close(fd);
        return st;
      }
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string pid = ReadPid(fd);
      ::close(fd);
      if (err != EWOULDBLOCK) return ErrnoStatus("lock", path, err);
      return Status::IOError("'" + path + "' is locked by another run (process " + (pid.empty() ? "unknown" : pid) +
                             "): its files are in use; give this run another directory (nvme_path, --nvme-dir "
                             "or --checkpoint-dir)");
    }
    const std::string me = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus("write lock file", path, err);
    }
    return std::unique_ptr<FileLock>(std::make_unique<PosixLock>(fd));
  }
  Status CreateDir(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return ErrnoStatus("create directory", path, ec.value());
    return Status::Ok();
  }
  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove", path, errno);
    return Status::Ok();
  }
  Result<std::unique_ptr<IoEngine>> NewIoEngine(IoEngineKind kind, const AioConfig& cfg) override {
    if (kind == IoEngineKind::kSync) return std::unique_ptr<IoEngine>(std::make_unique<SyncEngine>());
    return std::unique_ptr<IoEngine>(std::make_unique<DirectEngine>(kind, cfg));
  }
  double NowSeconds() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

 private:
  // The O_DIRECT descriptor is opened through the first one's
  // /proc/self/fd entry: the same file whatever happens to the path
  // meanwhile (file systems without O_DIRECT, such as tmpfs, get none).
  static Result<std::unique_ptr<File>> Open(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    const int dfd = ::open(self.c_str(), O_RDWR | O_CLOEXEC | O_DIRECT);
    return std::unique_ptr<File>(std::make_unique<PosixFile>(path, fd, dfd));
  }
};

}  // namespace

Env* PosixEnv() {
  static RealEnv* env = new RealEnv();
  return env;
}

std::unique_ptr<IoEngine> NewSyncEngine() { return std::make_unique<SyncEngine>(); }

}  // namespace strata::exec
