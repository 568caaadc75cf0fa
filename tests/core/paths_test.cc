// CheckUserDirectory: the swap and checkpoint directories are refused in
// the system's trees, also when reached through a symbolic link.
#include "strata/core/paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "test_paths.h"

namespace strata {
namespace {

TEST(Paths, SystemTreesAreRefusedWithTheReason) {
  for (const char* p : {"/", "/etc", "/etc/", "/etc/strata", "/usr/local/scratch", "/proc/self", "/dev/null", "/sys",
                        "/boot/x", "/bin", "/lib64/x", "/sbin/.."}) {
    Status st = CheckUserDirectory("the swap directory", p);
    ASSERT_FALSE(st.ok()) << p;
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << p;
    EXPECT_NE(st.message().find("the swap directory '" + std::string(p) + "' is a system location"), std::string::npos)
        << st.message();
  }
  for (const char* p :
       {"", "/tmp/strata", "/etcetera", "/home/user/nvme", "/mnt/nvme0", "relative/dir", "/usrdata", "/dev/shm/swap"})
    EXPECT_TRUE(CheckUserDirectory("the swap directory", p).ok()) << p;
}

TEST(Paths, ALinkIntoASystemTreeIsRefused) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::BinaryDir()) / "tmp" / ("paths_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::create_directory_symlink("/etc", dir / "innocent");
  Status st = CheckUserDirectory("the checkpoint directory", (dir / "innocent" / "ckpt").string());
  fs::remove_all(dir);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("(resolves to /etc/ckpt)"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace strata
