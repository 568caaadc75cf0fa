// ReadInputFile: devices, directories and files past the bound are refused
// before they are read; a pipe is read up to the bound only.
#include "strata/core/file_input.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "test_paths.h"

namespace strata {
namespace {

std::string Expect(const Result<std::string>& r, const std::string& needle) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  return r.status().message();
}

TEST(FileInput, DevicesDirectoriesAndMissingFilesAreRefused) {
  Expect(ReadInputFile("/dev/zero", 100, "the scenario"), "the scenario '/dev/zero' is a character device");
  Expect(ReadInputFile("/", 100, "the scenario"), "the scenario '/' is a directory");
  Expect(ReadInputFile("/nonexistent/x.yaml", 100, "the scenario"),
         "cannot read the scenario '/nonexistent/x.yaml': No such file or directory");
}

TEST(FileInput, RegularFilesAreReadUpToTheBound) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::BinaryDir()) / "tmp" / ("file_input_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string at = (dir / "f").string();
  { std::ofstream(at) << std::string(100, 'x'); }
  auto whole = ReadInputFile(at, 100, "the file");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(*whole, std::string(100, 'x'));
  Expect(ReadInputFile(at, 99, "the file"), "is 100 bytes, over the limit of 99 bytes");
  { std::ofstream truncated(at); }
  auto empty = ReadInputFile(at, 99, "the file");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
  fs::remove_all(dir);
}

TEST(FileInput, APipeIsReadUpToTheBoundOnly) {
  // The writer meets a closed pipe once the reader stops: EPIPE, not death.
  const auto old = std::signal(SIGPIPE, SIG_IGN);
  for (size_t n : {size_t{1000}, size_t{300000}}) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    std::thread writer([&] {
      const std::string chunk(4096, 'y');
      for (size_t sent = 0; sent < n;) {
        const ssize_t w = ::write(p[1], chunk.data(), std::min(chunk.size(), n - sent));
        if (w <= 0) break;  // the reader stopped: EPIPE
        sent += static_cast<size_t>(w);
      }
      ::close(p[1]);
    });
    auto r = ReadInputFile("/proc/self/fd/" + std::to_string(p[0]), 200000, "the config");
    ::close(p[0]);
    writer.join();
    if (n <= 200000) {
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->size(), n);
    } else {
      Expect(r, "is over the limit of 200000 bytes");
    }
  }
  std::signal(SIGPIPE, old);
}

}  // namespace
}  // namespace strata
