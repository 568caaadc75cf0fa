// NVMe engines against fio on the same file system, block size and queue
// depth, on the same 512 MiB file. The variants are interleaved round by
// round, the order rotating (bench/interleave.h), each after the same idle
// gap (fio starts as a new process: without the gap, whichever ran right
// after another found the disk busier): the disk's drift (1-5 GB/s here)
// hits all alike. Rates in GB/s; ratios to fio's rate in the same round.
// Run: build/bench/nvme_bench   (STRATA_BENCH_ROUNDS, default 7)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "interleave.h"
#include "io/swap_checksums.h"  // executor/io: the runner's checksums
#include "strata/core/huge_pages.h"
#include "strata/executor/backend.h"
#include "strata/executor/env.h"

namespace {

constexpr size_t kBytes = size_t{512} << 20;
constexpr size_t kBlock = size_t{1} << 20;
constexpr int kDepth = 8;

std::string Dir() {
  static const std::string d = [] {
    const std::string p = std::string(STRATA_BINARY_DIR) + "/nvme_bench";
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

// fio's bandwidth in bytes/s for a sequential read or write of the file.
double Fio(bool read, const std::string& file) {
  const std::string cmd = "fio --name=b --filename=" + file + " --rw=" + (read ? "read" : "write") +
                          " --bs=" + std::to_string(kBlock) + " --iodepth=" + std::to_string(kDepth) +
                          " --size=" + std::to_string(kBytes) +
                          " --direct=1 --ioengine=libaio --output-format=json 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return 0;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  pclose(f);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded()) return 0;
  return j["jobs"][0][read ? "read" : "write"]["bw_bytes"].get<double>();
}

// The test file, written once for real (reads of allocated-but-unwritten
// extents return zeros without touching the disk), and a pinned-style
// buffer: page aligned, touched once.
struct TestFile {
  std::unique_ptr<strata::exec::File> file;
  std::unique_ptr<void, decltype(&std::free)> mem{nullptr, &std::free};
  strata::AioConfig cfg;
  strata::exec::IoRequest Request(bool read) const {
    return {read ? strata::exec::IoRequest::Op::kRead : strata::exec::IoRequest::Op::kWrite, file.get(), 0, mem.get(),
            kBytes};
  }
};
bool Prepare(benchmark::State& state, TestFile* t) {
  using namespace strata::exec;
  auto file = PosixEnv()->OpenFile(Dir() + "/data", true);
  if (!file.ok() || !(*file)->Allocate(kBytes).ok()) {
    state.SkipWithError("cannot create the test file");
    return false;
  }
  t->file = std::move(*file);
  t->cfg.block_size = strata::Bytes(kBlock);
  t->cfg.queue_depth = kDepth;
  t->mem.reset(std::aligned_alloc(4096, kBytes));
  std::memset(t->mem.get(), 7, kBytes);
  auto engine = PosixEnv()->NewIoEngine(IoEngineKind::kLibaio, t->cfg);
  const IoRequest fill = t->Request(false);
  if (!engine.ok() || !(*engine)->Run({&fill, 1}).ok()) {
    state.SkipWithError("cannot write the test file");
    return false;
  }
  return true;
}

// The idle gap before every measurement.
void Gap() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

// One run of an engine over the file; GB/s (0 and an error on failure).
double EngineRate(strata::exec::IoEngine& e, const strata::exec::IoRequest& req, std::string* error) {
  const double t0 = strata::exec::PosixEnv()->NowSeconds();
  const strata::Status st = e.Run({&req, 1});
  const double t1 = strata::exec::PosixEnv()->NowSeconds();
  if (!st.ok()) {
    *error = st.message();
    return 0;
  }
  return static_cast<double>(kBytes) / (t1 - t0) / 1e9;
}

// fio, libaio and io_uring, interleaved: each engine's ratio to fio, and
// io_uring's to libaio.
void BM_Nvme(benchmark::State& state, bool read) {
  using namespace strata::exec;
  TestFile t;
  if (!Prepare(state, &t)) return;
  const std::string path = t.file->path();
  auto aio = PosixEnv()->NewIoEngine(IoEngineKind::kLibaio, t.cfg);
  auto uring = PosixEnv()->NewIoEngine(IoEngineKind::kIoUring, t.cfg);
  if (!aio.ok() || !uring.ok()) {
    state.SkipWithError("cannot set up the engines");
    return;
  }
  const IoRequest req = t.Request(read);
  // fio moves the file through iodepth x bs of buffers it reuses; the same
  // from our engine: 1 MiB requests cycling over an 8 MiB buffer.
  std::vector<IoRequest> ring;
  for (size_t off = 0; off < kBytes; off += kBlock)
    ring.push_back({req.op, req.file, off, static_cast<std::byte*>(t.mem.get()) + off % (kDepth * kBlock), kBlock});
  std::string error;
  // The executor's own buffers: CPU blocks of the host backend (512 MiB, a
  // lazily zeroed mapping, as the plan's large buffers are), kept for the
  // run. Before each write an op fills the block (untimed: the write finds
  // its pages present, as after the op that produced them). "_huge": the
  // same mapping advised onto transparent huge pages before its first
  // touch, so that pinning it for direct I/O walks 2 MiB pages.
  auto backend = NewHostBackend({});
  auto block = backend->Allocate(strata::Tier::kCpu, kBytes, false);
  auto huge = backend->Allocate(strata::Tier::kCpu, kBytes, false);
  if (!block.ok() || !huge.ok()) {
    state.SkipWithError("cannot allocate the executor's blocks");
    return;
  }
  strata::AdviseHugePages(huge->data(), kBytes);
  std::memset(block->data(), 7, kBytes);
  std::memset(huge->data(), 7, kBytes);
  auto from_block = [&](const strata::exec::Memory& m) {
    if (!read) std::memset(m.data(), 9, kBytes);
    IoRequest r = req;
    r.buffer = m.data();
    return EngineRate(**aio, r, &error);
  };
  const std::vector<strata::bench::Variant> v = {
      {"fio", [&] { return Fio(read, path) / 1e9; }},
      {"libaio", [&] { return EngineRate(**aio, req, &error); }},
      {"io_uring", [&] { return EngineRate(**uring, req, &error); }},
      {"libaio_fio_buffers",
       [&] {
         const double t0 = PosixEnv()->NowSeconds();
         const strata::Status st = (*aio)->Run(ring);
         if (!st.ok()) error = st.message();
         return st.ok() ? static_cast<double>(kBytes) / (PosixEnv()->NowSeconds() - t0) / 1e9 : 0.0;
       }},
      {"libaio_executor_block", [&] { return from_block(*block); }},
      {"libaio_executor_block_huge", [&] { return from_block(*huge); }},
  };
  for (auto _ : state) {
    const auto r = strata::bench::Interleave(v, strata::bench::Rounds(), 0, "GB/s", Gap);
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      return;
    }
    strata::bench::Report(state, std::string(read ? "read" : "write") + ", 512 MiB, 1 MiB blocks, depth 8", r);
    const strata::bench::Spread u = r.RatioOf(2, 1);
    std::printf("  io_uring / libaio per round: min %.3f median %.3f max %.3f\n", u.min, u.median, u.max);
    state.counters["uring_vs_libaio"] = u.median;
  }
  state.SetLabel(read ? "read" : "write");
}

// The swap checksums' cost (swap_checksums.h, as the runner pays it): the
// engine alone against the engine with XXH3 of every write before it is
// issued and the check of every read after it, interleaved.
void BM_Checksummed(benchmark::State& state, bool read) {
  using namespace strata::exec;
  TestFile t;
  if (!Prepare(state, &t)) return;
  auto engine = PosixEnv()->NewIoEngine(IoEngineKind::kLibaio, t.cfg);
  if (!engine.ok()) {
    state.SkipWithError("cannot set up the engine");
    return;
  }
  const IoRequest req = t.Request(read);
  const std::span<const std::byte> bytes{static_cast<const std::byte*>(t.mem.get()), kBytes};
  SwapChecksums sums;
  sums.Wrote(t.file.get(), 0, kBytes, SwapChecksums::Hash(bytes));
  std::string error;
  const std::vector<strata::bench::Variant> v = {
      {"plain", [&] { return EngineRate(**engine, req, &error); }},
      {"checked",
       [&] {
         const double t0 = PosixEnv()->NowSeconds();
         uint64_t h = 0;
         if (!read) h = SwapChecksums::Hash(bytes);
         strata::Status st = (*engine)->Run({&req, 1});
         if (st.ok()) {
           if (read)
             st = sums.Verify(t.file.get(), 0, bytes);
           else
             sums.Wrote(t.file.get(), 0, kBytes, h);
         }
         if (!st.ok()) {
           error = st.message();
           return 0.0;
         }
         return static_cast<double>(kBytes) / (PosixEnv()->NowSeconds() - t0) / 1e9;
       }},
  };
  for (auto _ : state) {
    const auto r = strata::bench::Interleave(v, strata::bench::Rounds(), 0, "GB/s", Gap);
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      return;
    }
    strata::bench::Report(state, std::string("libaio ") + (read ? "read, XXH3 check after" : "write, XXH3 hash before"),
                          r);
  }
  state.SetLabel(read ? "read" : "write");
}

BENCHMARK_CAPTURE(BM_Nvme, read, true)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Nvme, write, false)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Checksummed, read, true)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Checksummed, write, false)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
