// The host backend's Linear kernels against the peers the same machine
// offers, at the shapes the executor's workloads run: OpenBLAS (sgemm, one
// thread: the reference of every ratio) and Eigen 3 (one thread), both in
// fp32 with FMA, beside
//   strata_fp16  LinearForwardLow / LinearBackwardLow on fp16 weights, the
//                MLP workload's path, one thread;
//   strata_fp32  the same kernels on fp32 weights, the GPT workload's path;
//   strata_fp16_2t  the fp16 path on a pool of two threads (its ratio to
//                strata_fp16 is printed as the thread scaling);
//   strata_fp16_core2  strata_fp16 on the second core;
//   strata_fp16_cold, strata_fp16_2t_cold  one and two threads, each call
//                after an idle gap that puts the pool's worker to sleep,
//                as the executor's kernels find it (other streams' work in
//                between): their ratio is the scaling the pool's split
//                thresholds (host/linear_low.cc) are chosen by.
// The one-thread variants run on the first core of the process's affinity
// (pinned), strata_fp16_core2 on the second, the pool's worker wherever the
// scheduler puts it (the other core, as both are busy). The cores of a VM
// need not run alike: on this machine's 2 vCPUs the second ran the same
// kernel 1.0-1.5x slower than the first from minute to minute (another
// tenant on its physical core, presumably), and two threads cannot beat
// the sum of the two cores' own rates. So beside the thread scaling the
// bench prints the scaling the cores allowed that round ((core1 + core2) /
// core1) and the parallel efficiency (2t / (core1 + core2)): the fixed costs
// of splitting (the pool's hand-off, packing twice) show in the latter.
// Strata's kernels keep a fixed summation order (each output one chain of
// fused multiply-adds: the same bits for any thread count and target), the
// peers do not. Every buffer starts on a cache line, as the GPT workload's
// Linear outputs do (host/line_floats.h: the forward then splits its outputs
// among threads by panels).
// Rates in GFLOP/s: forward 2MNK, backward 4MNK (dW and dx). Variants are
// interleaved round by round (bench/interleave.h).
// Run: build/bench/gemm_bench [--benchmark_filter=fwd]   (STRATA_BENCH_ROUNDS, default 7)
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <pthread.h>
#include <sched.h>

#include <Eigen/Core>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "host/line_floats.h"
#include "host/linear_low.h"
#include "host/low_precision.h"
#include "host/worker_pool.h"
#include "interleave.h"

namespace {

using strata::Precision;
using strata::exec::WorkerPool;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Shape {
  const char* name;
  size_t m, n, k;  // batch rows, outputs, inputs: y[m x n] = x[m x k] W[n x k]^T
};
// The MLP workload at benchmark sizes (64x1024x1024: the smallest the pool
// splits), the seed's first layer, gpt-tiny's
// five Linear shapes (T = 4 x 32 tokens, h 64) and a GPT-2 small block's
// widest two at T = 512.
const Shape kShapes[] = {
    {"mlp 64x2048x2048", 64, 2048, 2048},       {"mlp 512x4096x1024", 512, 4096, 1024},
    {"mlp 64x1024x1024", 64, 1024, 1024},       {"seed 4x1000x1000", 4, 1000, 1000},
    {"gpt-tiny qkv 128x192x64", 128, 192, 64},  {"gpt-tiny out 128x64x64", 128, 64, 64},
    {"gpt-tiny fc1 128x256x64", 128, 256, 64},  {"gpt-tiny fc2 128x64x256", 128, 64, 256},
    {"gpt-tiny head 128x256x64", 128, 256, 64}, {"gpt2 qkv 512x2304x768", 512, 2304, 768},
    {"gpt2 fc2 512x768x3072", 512, 768, 3072},
};

struct Data {
  strata::exec::LineFloats x, w, b, y, dy, dx, dw;
  std::vector<uint16_t> w16, b16, g16;
  explicit Data(const Shape& s) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    auto fill = [&](strata::exec::LineFloats& v, size_t n) {
      v.resize(n);
      for (float& f : v) f = nd(rng);
    };
    fill(x, s.m * s.k);
    fill(w, s.n * s.k);
    fill(b, s.n);
    fill(dy, s.m * s.n);
    y.assign(s.m * s.n, 0.0f);
    dx.assign(s.m * s.k, 0.0f);
    dw.assign(s.n * s.k + s.n, 0.0f);
    w16.resize(s.n * s.k);
    b16.resize(s.n);
    g16.assign(s.n * s.k + s.n, 0);
    for (size_t i = 0; i < w.size(); ++i) w16[i] = strata::exec::FloatToHalf(w[i]);
    for (size_t i = 0; i < b.size(); ++i) b16[i] = strata::exec::FloatToHalf(b[i]);
  }
};

// fn's rate when each call finds the pool's worker asleep, as the
// executor's kernels do (other streams' work between them, longer than the
// pool's spin): an idle gap before each call, its time not counted.
double ColdRate(double flops, const std::function<void()>& fn, double seconds = 0.15) {
  using Clock = std::chrono::steady_clock;
  fn();
  double busy = 0;
  int calls = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds * 3);
  do {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const auto t0 = Clock::now();
    fn();
    busy += std::chrono::duration<double>(Clock::now() - t0).count();
    ++calls;
  } while (busy < seconds && Clock::now() < end);
  return flops * calls / busy / 1e9;
}

// Calls fn until at least `seconds` have passed; returns flops/s in GFLOP/s.
double Rate(double flops, const std::function<void()>& fn, double seconds = 0.15) {
  using Clock = std::chrono::steady_clock;
  fn();  // warm: caches, pool threads
  const auto t0 = Clock::now();
  int calls = 0;
  double el = 0;
  do {
    fn();
    ++calls;
    el = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (el < seconds);
  return flops * calls / el / 1e9;
}

// The first two CPUs of the process's affinity (-1 where it has one), and
// the whole mask, taken before anything pins the main thread.
struct Cores {
  cpu_set_t all;
  int first = -1, second = -1;
  Cores() {
    CPU_ZERO(&all);
    if (sched_getaffinity(0, sizeof all, &all) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &all)) continue;
      if (first < 0)
        first = c;
      else if (second < 0)
        second = c;
    }
  }
};
const Cores& TheCores() {
  static const Cores c;
  return c;
}
// fn's rate with the calling thread on `cpu` (as it is with cpu < 0), the
// whole mask restored after (the pools' workers, started unpinned, stay
// free to run on the other core).
double OnCore(int cpu, const std::function<double()>& fn) {
  if (cpu < 0) return fn();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  const double r = fn();
  pthread_setaffinity_np(pthread_self(), sizeof TheCores().all, &TheCores().all);
  return r;
}

void Run(benchmark::State& state, bool backward) {
  const Shape& s = kShapes[state.range(0)];
  Data d(s);
  WorkerPool one(1), two(2);  // started with the whole mask: the worker is not pinned
  const int c1 = TheCores().first, c2 = TheCores().second;
  const double flops = (backward ? 4.0 : 2.0) * double(s.m) * double(s.n) * double(s.k);
  Eigen::Map<const RowMajor> X(d.x.data(), long(s.m), long(s.k)), W(d.w.data(), long(s.n), long(s.k)),
      DY(d.dy.data(), long(s.m), long(s.n));
  Eigen::Map<RowMajor> Y(d.y.data(), long(s.m), long(s.n)), DX(d.dx.data(), long(s.m), long(s.k)),
      DW(d.dw.data(), long(s.n), long(s.k));
  const int M = int(s.m), N = int(s.n), K = int(s.k);
  auto ours = [&](Precision p, WorkerPool* pool) {
    const void* w = p == Precision::kFp32 ? static_cast<const void*>(d.w.data()) : d.w16.data();
    const void* b = p == Precision::kFp32 ? static_cast<const void*>(d.b.data()) : d.b16.data();
    void* g = p == Precision::kFp32 ? static_cast<void*>(d.dw.data()) : d.g16.data();
    void* gb = p == Precision::kFp32 ? static_cast<void*>(d.dw.data() + s.n * s.k)
                                     : static_cast<void*>(d.g16.data() + s.n * s.k);
    return [=, &d] {
      if (backward)
        strata::exec::LinearBackwardLow(d.x.data(), w, d.dy.data(), d.dx.data(), g, gb, s.m, s.k, s.n, p, true, pool);
      else
        strata::exec::LinearForwardLow(d.x.data(), w, b, d.y.data(), s.m, s.k, s.n, p, pool);
    };
  };
  // The variants in this order (their indices below; the reference first).
  enum { kOpenblas, kEigen, kFp16, kFp32, kFp16TwoThreads, kFp16Cold, kFp16TwoThreadsCold, kFp16Core2 };
  std::vector<strata::bench::Variant> v = {
      {"openblas",
       [&] {
         return OnCore(c1, [&] {
           return Rate(flops, [&] {
             if (backward) {
               cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, d.dy.data(), N, d.x.data(), K, 0.0f,
                           d.dw.data(), K);
               cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, d.dy.data(), N, d.w.data(), K,
                           0.0f, d.dx.data(), K);
             } else {
               cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, d.x.data(), K, d.w.data(), K, 0.0f,
                           d.y.data(), N);
             }
           });
         });
       }},
      {"eigen",
       [&] {
         return OnCore(c1, [&] {
           return Rate(flops, [&] {
             if (backward) {
               DW.noalias() = DY.transpose() * X;
               DX.noalias() = DY * W;
             } else {
               Y.noalias() = X * W.transpose();
             }
           });
         });
       }},
      {"strata_fp16", [&, f = ours(Precision::kFp16, &one)] { return OnCore(c1, [&] { return Rate(flops, f); }); }},
      {"strata_fp32", [&, f = ours(Precision::kFp32, &one)] { return OnCore(c1, [&] { return Rate(flops, f); }); }},
      {"strata_fp16_2t", [&, f = ours(Precision::kFp16, &two)] { return OnCore(c1, [&] { return Rate(flops, f); }); }},
      {"strata_fp16_cold",
       [&, f = ours(Precision::kFp16, &one)] { return OnCore(c1, [&] { return ColdRate(flops, f); }); }},
      {"strata_fp16_2t_cold",
       [&, f = ours(Precision::kFp16, &two)] { return OnCore(c1, [&] { return ColdRate(flops, f); }); }},
  };
  if (c2 >= 0)
    v.push_back({"strata_fp16_core2",
                 [&, f = ours(Precision::kFp16, &one)] { return OnCore(c2, [&] { return Rate(flops, f); }); }});
  for (auto _ : state) {
    const strata::bench::Interleaved r = strata::bench::Interleave(v, strata::bench::Rounds(), kOpenblas, "GFLOP/s");
    strata::bench::Report(state, std::string(backward ? "backward " : "forward ") + s.name, r);
    const strata::bench::Spread t = r.RatioOf(kFp16TwoThreads, kFp16);
    std::printf("  thread scaling strata_fp16_2t / strata_fp16: min %.3f median %.3f max %.3f\n", t.min, t.median,
                t.max);
    state.counters["scaling_2t"] = t.median;
    const strata::bench::Spread cold = r.RatioOf(kFp16TwoThreadsCold, kFp16Cold);
    std::printf(
        "  thread scaling from an idle pool strata_fp16_2t_cold / strata_fp16_cold: min %.3f median %.3f max %.3f\n",
        cold.min, cold.median, cold.max);
    state.counters["scaling_2t_cold"] = cold.median;
    if (r.rates.size() > kFp16Core2) {  // the second core measured
      const std::vector<double>& one = r.rates[kFp16];
      const std::vector<double>& two = r.rates[kFp16TwoThreads];
      const std::vector<double>& core2 = r.rates[kFp16Core2];
      std::vector<double> allowed, efficiency;
      for (size_t k = 0; k < one.size(); ++k) {
        allowed.push_back((one[k] + core2[k]) / one[k]);
        efficiency.push_back(two[k] / (one[k] + core2[k]));
      }
      const strata::bench::Spread a = strata::bench::SpreadOf(allowed), e = strata::bench::SpreadOf(efficiency);
      std::printf("  the cores allowed (core1 + core2) / core1: min %.3f median %.3f max %.3f\n", a.min, a.median,
                  a.max);
      std::printf("  parallel efficiency strata_fp16_2t / (core1 + core2): min %.3f median %.3f max %.3f\n", e.min,
                  e.median, e.max);
      state.counters["cores_allowed"] = a.median;
      state.counters["efficiency_2t"] = e.median;
    }
  }
  state.SetLabel(s.name);
}

void BM_Forward(benchmark::State& state) { Run(state, false); }
void BM_Backward(benchmark::State& state) { Run(state, true); }

}  // namespace

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  Eigen::setNbThreads(1);
  // The peer's kernel: an OpenBLAS that does not know the CPU (Debian's
  // 0.3.21 on Sapphire Rapids, CPU model 207) falls back to its generic SSE3
  // "Prescott" kernel at a fifth of its speed, and every ratio to it says
  // little. OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) picks a
  // tuned kernel; it is read when the library loads, so before this runs.
  const std::string core = openblas_get_corename();
  std::printf("OpenBLAS kernel: %s (%s)\n", core.c_str(), openblas_get_config());
  if (core == "Prescott")
    std::printf(
        "  the generic kernel: this OpenBLAS does not know this CPU; for a tuned peer run with "
        "OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2)\n");
  const long shapes = long(sizeof(kShapes) / sizeof(kShapes[0]));
  benchmark::RegisterBenchmark("fwd", BM_Forward)->DenseRange(0, shapes - 1)->Iterations(1)->Unit(benchmark::kSecond);
  benchmark::RegisterBenchmark("bwd", BM_Backward)->DenseRange(0, shapes - 1)->Iterations(1)->Unit(benchmark::kSecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
