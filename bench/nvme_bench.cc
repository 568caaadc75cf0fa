// NVMe engines against fio on the same file system, block size and queue
// depth. Each iteration runs fio and then the engine on the same 512 MiB
// file, so the disk's drift (+-30-50% here) hits both alike; counters give
// both rates and their ratio. Run: build/bench/nvme_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <algorithm>

#include "strata/executor/env.h"
#include "swap_checksums.h"  // executor/src: the runner's checksums

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

void BM_Nvme(benchmark::State& state, strata::exec::IoEngineKind kind, bool read) {
  using namespace strata::exec;
  TestFile t;
  if (!Prepare(state, &t)) return;
  const std::string path = t.file->path();
  auto engine = PosixEnv()->NewIoEngine(kind, t.cfg);
  if (!engine.ok()) {
    state.SkipWithError("cannot set up the engine");
    return;
  }
  const IoRequest req = t.Request(read);
  double fio_sum = 0, eng_sum = 0;
  std::vector<double> ratios;
  int rounds = 0;
  for (auto _ : state) {
    // Alternate which goes first, so a drifting disk favours neither.
    state.PauseTiming();
    const bool fio_first = rounds % 2 == 0;
    double fio = fio_first ? Fio(read, path) : 0;
    state.ResumeTiming();
    const double t0 = PosixEnv()->NowSeconds();
    strata::Status st = (*engine)->Run({&req, 1});
    const double t1 = PosixEnv()->NowSeconds();
    state.PauseTiming();
    if (!fio_first) fio = Fio(read, path);
    state.ResumeTiming();
    if (!st.ok()) {
      state.SkipWithError(st.message().c_str());
      break;
    }
    const double eng = static_cast<double>(kBytes) / (t1 - t0);
    fio_sum += fio;
    eng_sum += eng;
    ratios.push_back(eng / fio);
    ++rounds;
  }
  if (rounds == 0) return;
  state.counters["engine_GBps"] = eng_sum / rounds / 1e9;
  state.counters["fio_GBps"] = fio_sum / rounds / 1e9;
  state.counters["vs_fio"] = eng_sum / fio_sum;
  std::sort(ratios.begin(), ratios.end());
  state.counters["vs_fio_median"] = ratios[ratios.size() / 2];
  state.SetLabel(std::string(IoEngineName(kind)) + (read ? " read" : " write"));
}

// io_uring against libaio, interleaved round by round on the same file (the
// disk's drift hits both alike): the median of the per-round ratios.
void BM_UringVsLibaio(benchmark::State& state, bool read) {
  using namespace strata::exec;
  TestFile t;
  if (!Prepare(state, &t)) return;
  auto aio = PosixEnv()->NewIoEngine(IoEngineKind::kLibaio, t.cfg);
  auto uring = PosixEnv()->NewIoEngine(IoEngineKind::kIoUring, t.cfg);
  const IoRequest req = t.Request(read);
  if (!aio.ok() || !uring.ok()) {
    state.SkipWithError("cannot set up the engines");
    return;
  }
  std::vector<double> ratios;
  double a_sum = 0, u_sum = 0;
  int round = 0;
  for (auto _ : state) {
    double rate[2] = {0, 0};  // libaio, io_uring
    for (int k = 0; k < 2; ++k) {
      const int which = (round + k) % 2;  // alternate which goes first
      IoEngine& e = which == 0 ? **aio : **uring;
      const double t0 = PosixEnv()->NowSeconds();
      if (!e.Run({&req, 1}).ok()) {
        state.SkipWithError("I/O failed");
        return;
      }
      rate[which] = static_cast<double>(kBytes) / (PosixEnv()->NowSeconds() - t0);
    }
    a_sum += rate[0], u_sum += rate[1];
    ratios.push_back(rate[1] / rate[0]);
    ++round;
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["libaio_GBps"] = a_sum / round / 1e9;
  state.counters["uring_GBps"] = u_sum / round / 1e9;
  state.counters["uring_vs_libaio_median"] = ratios[ratios.size() / 2];
  state.SetLabel(read ? "read" : "write");
}

// The swap checksums' cost (swap_checksums.h, as the runner pays it): the
// engine alone against the engine with XXH3 of every write before it is
// issued and the check of every read after it, interleaved round by round
// on the same file. Min/median/max of each rate and of the per-round ratio.
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
  SwapChecksums sums;
  sums.Wrote(t.file.get(), 0, kBytes, SwapChecksums::Hash({static_cast<const std::byte*>(t.mem.get()), kBytes}));
  std::vector<double> plain, checked, ratio;
  int round = 0;
  for (auto _ : state) {
    double rate[2] = {0, 0};  // plain, checked
    for (int k = 0; k < 2; ++k) {
      const int which = (round + k) % 2;
      const std::span<const std::byte> bytes{static_cast<const std::byte*>(t.mem.get()), kBytes};
      const double t0 = PosixEnv()->NowSeconds();
      uint64_t h = 0;
      if (which == 1 && !read) h = SwapChecksums::Hash(bytes);
      strata::Status st = (*engine)->Run({&req, 1});
      if (st.ok() && which == 1) {
        if (read) st = sums.Verify(t.file.get(), 0, bytes);
        else sums.Wrote(t.file.get(), 0, kBytes, h);
      }
      if (!st.ok()) {
        state.SkipWithError(st.message().c_str());
        return;
      }
      rate[which] = static_cast<double>(kBytes) / (PosixEnv()->NowSeconds() - t0);
    }
    plain.push_back(rate[0] / 1e9);
    checked.push_back(rate[1] / 1e9);
    ratio.push_back(rate[1] / rate[0]);
    ++round;
  }
  auto put = [&](const char* name, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    state.counters[std::string(name) + "_min"] = v.front();
    state.counters[std::string(name) + "_med"] = v[v.size() / 2];
    state.counters[std::string(name) + "_max"] = v.back();
  };
  put("plain_GBps", plain);
  put("checked_GBps", checked);
  put("ratio", ratio);
  state.SetLabel(std::string("libaio ") + (read ? "read" : "write") + ", XXH3 " +
                 (read ? "check after" : "hash before"));
}

BENCHMARK_CAPTURE(BM_Checksummed, read, true)->Iterations(12)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Checksummed, write, false)->Iterations(12)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_UringVsLibaio, read, true)->Iterations(12)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_UringVsLibaio, write, false)->Iterations(12)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Nvme, libaio_read, strata::exec::IoEngineKind::kLibaio, true)->Iterations(8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Nvme, uring_read, strata::exec::IoEngineKind::kIoUring, true)->Iterations(8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Nvme, libaio_write, strata::exec::IoEngineKind::kLibaio, false)->Iterations(8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Nvme, uring_write, strata::exec::IoEngineKind::kIoUring, false)->Iterations(8)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
