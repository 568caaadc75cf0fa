// Env and NVMe engines: round trips of random data at unaligned sizes through
// every engine and knob setting, and the error paths through fault injection.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "strata/executor/env.h"
#include "test_paths.h"

namespace strata::exec {
namespace {

class TempDir {
 public:
  TempDir() {
    // In the build tree: a real disk file system (tmpfs has no O_DIRECT).
    path_ = std::filesystem::path(testing::BinaryDir()) / "tmp" /
            ("io_" + std::to_string(getpid()) + "_" + std::to_string(n_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int n_ = 0;
  std::filesystem::path path_;
};

std::vector<std::byte> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

struct Case {
  IoEngineKind kind;
  AioConfig cfg;
  std::string what;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (IoEngineKind k : {IoEngineKind::kLibaio, IoEngineKind::kIoUring, IoEngineKind::kSync}) {
    AioConfig base;
    out.push_back({k, base, "default"});
    AioConfig small = base;
    small.block_size = Bytes(4096);
    small.queue_depth = 1;
    out.push_back({k, small, "block 4K depth 1"});
    AioConfig par = base;
    par.block_size = Bytes(65536);
    par.queue_depth = 4;
    par.intra_op_parallelism = 3;
    par.single_submit = true;
    par.overlap_events = false;
    out.push_back({k, par, "3 threads, single submit, no overlap"});
  }
  return out;
}

// Writes random data at awkward offsets, lengths and buffer addresses, reads
// it back with the same engine and with plain reads.
void RoundTrip(Env* env, const std::string& path, const Case& c) {
  auto f = env->OpenFile(path, true);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_TRUE((*f)->Allocate(4 << 20).ok());
  auto engine = env->NewIoEngine(c.kind, c.cfg);
  ASSERT_TRUE(engine.ok());
  const std::vector<std::pair<uint64_t, size_t>> pieces = {
      {0, 4096},      {4096, 1 << 20}, {(1 << 20) + 8192, 1}, {(2 << 20) + 17, 100'003}, {(3 << 20) + 4000, 200},
      {3 << 20, 3000}};
  std::vector<std::vector<std::byte>> data;
  std::vector<IoRequest> writes;
  for (size_t i = 0; i < pieces.size(); ++i) {
    data.push_back(Random(pieces[i].second + 1, static_cast<uint32_t>(i + 1)));
    // Buffers start one byte in: never page-aligned.
    writes.push_back({IoRequest::Op::kWrite, f->get(), pieces[i].first, data.back().data() + 1, pieces[i].second});
  }
  // Overlapping pieces (the last two) are written in order by separate runs.
  ASSERT_TRUE((*engine)->Run(std::span(writes).first(5)).ok());
  ASSERT_TRUE((*engine)->Run(std::span(writes).subspan(5)).ok());
  std::vector<std::vector<std::byte>> back(pieces.size());
  std::vector<IoRequest> reads;
  for (size_t i = 0; i < pieces.size(); ++i) {
    back[i].resize(pieces[i].second + 3);
    reads.push_back({IoRequest::Op::kRead, f->get(), pieces[i].first, back[i].data() + 3, pieces[i].second});
  }
  Status st = (*engine)->Run(reads);
  ASSERT_TRUE(st.ok()) << st.message();
  for (size_t i = 0; i + 2 < pieces.size(); ++i)
    EXPECT_TRUE(std::equal(data[i].begin() + 1, data[i].end(), back[i].begin() + 3))
        << IoEngineName(c.kind) << " " << c.what << " piece " << i;
  // The overlap: piece 5 ([3M, 3M+3000)) was written after piece 4 ([3M+4000, +200)); both intact.
  EXPECT_TRUE(std::equal(data[5].begin() + 1, data[5].end(), back[5].begin() + 3)) << c.what;
  EXPECT_TRUE(std::equal(data[4].begin() + 1, data[4].end(), back[4].begin() + 3)) << c.what;
  // Plain reads agree with what the engine wrote.
  std::vector<std::byte> plain(pieces[3].second);
  ASSERT_TRUE((*f)->Read(pieces[3].first, plain).ok());
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), data[3].begin() + 1));
}

TEST(Io, EveryEngineRoundTripsUnalignedData) {
  TempDir dir;
  int i = 0;
  for (const Case& c : Cases()) RoundTrip(PosixEnv(), dir.File("f" + std::to_string(i++)), c);
}

TEST(Io, MemEnvRoundTrips) {
  auto env = NewMemEnv();
  for (const Case& c : Cases()) RoundTrip(env.get(), "/mem/f", c);
}

TEST(Io, PosixFilesGetDirectDescriptors) {
  TempDir dir;
  auto f = PosixEnv()->OpenFile(dir.File("d"), true);
  ASSERT_TRUE(f.ok());
  // The work tree and /tmp are ext4 here: O_DIRECT must be available, or the
  // engines silently fall back to buffered I/O.
  EXPECT_GE((*f)->direct_fd(), 0);
}

TEST(Io, MissingDirectoryNamesPathAndErrno) {
  auto f = PosixEnv()->OpenFile("/nonexistent/strata/nvme/params.swp", true);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("/nonexistent/strata/nvme/params.swp"), std::string::npos);
  EXPECT_NE(f.status().message().find("ENOENT"), std::string::npos) << f.status().message();
  auto env = NewMemEnv();
  EXPECT_FALSE(env->OpenFile("/mem/none", false).ok());
}

TEST(Io, ShortReadPastEndIsAnError) {
  TempDir dir;
  auto f = PosixEnv()->OpenFile(dir.File("s"), true);
  ASSERT_TRUE(f.ok());
  std::vector<std::byte> buf(100);
  ASSERT_TRUE((*f)->Write(0, std::span(buf).first(10)).ok());
  Status st = (*f)->Read(0, buf);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("short read"), std::string::npos);
  EXPECT_NE(st.message().find(dir.File("s")), std::string::npos);
}

TEST(Io, InjectedFaultsStopWithErrnoAndPath) {
  auto mem = NewMemEnv();
  FaultInjectionEnv env(mem.get());
  auto f = env.OpenFile("/nvme/optim.swp", true);
  ASSERT_TRUE(f.ok());
  auto engine = env.NewIoEngine(IoEngineKind::kLibaio, AioConfig{});
  ASSERT_TRUE(engine.ok());
  std::vector<std::byte> buf(8192);
  IoRequest w{IoRequest::Op::kWrite, f->get(), 0, buf.data(), buf.size()};
  IoRequest r{IoRequest::Op::kRead, f->get(), 0, buf.data(), buf.size()};

  env.Inject({FaultSpec::Kind::kNoSpace, 1});
  EXPECT_TRUE((*engine)->Run({&w, 1}).ok());
  Status st = (*engine)->Run({&w, 1});
  EXPECT_NE(st.message().find("ENOSPC"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("/nvme/optim.swp"), std::string::npos);
  EXPECT_NE((*f)->Allocate(1 << 20).message().find("ENOSPC"), std::string::npos);
  EXPECT_TRUE((*engine)->Run({&r, 1}).ok());  // reads still work

  env.Inject({FaultSpec::Kind::kIoError, 0});
  st = (*engine)->Run({&r, 1});
  EXPECT_NE(st.message().find("EIO"), std::string::npos) << st.message();

  env.Inject({FaultSpec::Kind::kShortRead, 0});
  st = (*engine)->Run({&r, 1});
  EXPECT_NE(st.message().find("short read"), std::string::npos) << st.message();
  EXPECT_TRUE((*engine)->Run({&w, 1}).ok());  // writes unaffected

  env.Inject({FaultSpec::Kind::kNone, 0});
  EXPECT_TRUE((*engine)->Run({&r, 1}).ok());
}

// The lock file sits where others may write (the default nvme_path is
// under /tmp): a symbolic link, a FIFO, or a file that is not a lock file
// at its path is refused and left as it was; a lock file of an earlier run
// is taken again.
TEST(Io, LockFileRefusesWhatIsNotItsOwn) {
  TempDir dir;
  Env* env = PosixEnv();
  auto text = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string victim = dir.File("victim");
  { std::ofstream(victim) << "root:secret\n"; }
  std::filesystem::create_symlink(victim, dir.File("link.lock"));
  auto r = env->LockFile(dir.File("link.lock"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a symbolic link"), std::string::npos) << r.status().message();
  EXPECT_EQ(text(victim), "root:secret\n");
  ASSERT_EQ(::mkfifo(dir.File("fifo.lock").c_str(), 0600), 0);
  r = env->LockFile(dir.File("fifo.lock"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos) << r.status().message();
  { std::ofstream(dir.File("data.lock")) << "years of work\n"; }
  r = env->LockFile(dir.File("data.lock"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a lock file"), std::string::npos) << r.status().message();
  EXPECT_EQ(text(dir.File("data.lock")), "years of work\n");
  ASSERT_EQ(::link(victim.c_str(), dir.File("hard.lock").c_str()), 0);
  r = env->LockFile(dir.File("hard.lock"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("other hard links"), std::string::npos) << r.status().message();
  // Its own: created, then taken again by a later run.
  {
    auto first = env->LockFile(dir.File("own.lock"));
    ASSERT_TRUE(first.ok()) << first.status().message();
  }
  EXPECT_EQ(text(dir.File("own.lock")), std::to_string(::getpid()) + "\n");
  auto again = env->LockFile(dir.File("own.lock"));
  ASSERT_TRUE(again.ok()) << again.status().message();
}

TEST(Io, EngineNamesParseBack) {
  for (IoEngineKind k : {IoEngineKind::kLibaio, IoEngineKind::kIoUring, IoEngineKind::kSync}) {
    auto parsed = ParseIoEngineKind(IoEngineName(k));
    ASSERT_TRUE(parsed.ok()) << IoEngineName(k);
    EXPECT_EQ(*parsed, k);
  }
  auto bad = ParseIoEngineKind("spdk");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("spdk"), std::string::npos);
}

}  // namespace
}  // namespace strata::exec
