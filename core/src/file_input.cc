#include "strata/core/file_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace strata {

namespace {

const char* KindOf(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string ByteCount(uint64_t n) { return std::to_string(n) + " bytes"; }

class Fd {  // closes on every path out
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<std::string> ReadInputFile(const std::string& path, uint64_t limit, std::string_view what) {
  const std::string head = std::string(what) + " '" + path + "'";
  // O_NONBLOCK: opening a FIFO without a writer must not hang here; it is
  // cleared below for the reads.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return Status::InvalidArgument("cannot read " + head + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::InvalidArgument("cannot read " + head + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    return Status::InvalidArgument(head + " is " + KindOf(st.st_mode) +
                                   ": inputs are read from regular files or pipes");
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit)
    return Status::InvalidArgument(head + " is " + ByteCount(static_cast<uint64_t>(st.st_size)) +
                                   ", over the limit of " + ByteCount(limit) + " for this input (docs/limits.md)");
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) (void)::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  text.resize(S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 0);
  size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (text.size() > limit)
        return Status::InvalidArgument(head + " is over the limit of " + ByteCount(limit) +
                                       " for this input (docs/limits.md)");
      // One byte past the expected end tells a file that grew, and a pipe
      // is read in growing steps, up to one byte past the limit.
      text.resize(static_cast<size_t>(std::min<uint64_t>(limit + 1, std::max<size_t>(2 * text.size(), 65536))));
    }
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::InvalidArgument("error reading " + head + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace strata
