// The CUDA backend's rates against peers measured in the same run, the
// variants interleaved round by round (bench/interleave.h), each timed by
// CUDA events around its work on one stream:
//  - Adam: the fused kernel (cuda/kernels.cu, 100M parameters, bf16
//    gradients and copy-out) against a kernel with Adam's access shape and
//    no math (AdamShapedStream, the same 4-wide access: the HBM roofline;
//    28 bytes per parameter: master, m and v read and written, 2 of
//    gradient read and 2 of copy-out written), in G parameters/s;
//  - GEMM: a Linear layer's three products (forward, dW, dx) at the
//    workloads' shapes as the device model calls them (cublasGemmEx,
//    bf16 operands, fp32 accumulation and output, the default algorithm)
//    against cuBLAS's best at the same shapes (every algorithm cublasLt's
//    heuristic offers, up to 16, each timed, the fastest per product), in
//    TFLOP/s;
//  - copies: 256 MiB host to device and back, from page-locked memory
//    against pageable memory, in GB/s.
// Without a device every benchmark is skipped with the reason.
// Run: build/bench/gpu_bench   (STRATA_BENCH_ROUNDS, default 7); also run
// by scripts/gpu-check.sh.
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/kernels.h"
#include "interleave.h"

namespace {

// The first failing call's text, or "".
std::string g_error;
bool Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess && g_error.empty()) g_error = std::string(what) + ": " + cudaGetErrorString(e);
  return e == cudaSuccess;
}
bool Check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS && g_error.empty()) g_error = std::string(what) + ": " + cublasGetStatusString(e);
  return e == CUBLAS_STATUS_SUCCESS;
}
#define CK(call) Check((call), #call)

// Why the benchmarks cannot run here ("" when they can).
std::string NoDevice() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device";
  return "";
}

// Seconds of `reps` runs of fn on stream s, by events.
template <typename F>
double Time(cudaStream_t s, int reps, F&& fn) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) fn();
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 1e3;
}

void* Device(size_t bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, bytes));
  if (p != nullptr) CK(cudaMemset(p, 0, bytes));
  return p;
}

void BM_Adam(benchmark::State& state) {
  if (const std::string why = NoDevice(); !why.empty()) return state.SkipWithError(why.c_str());
  constexpr size_t n = size_t{100} * 1000 * 1000;
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  strata::exec::cuda::AdamKernelArgs a{
      static_cast<float*>(Device(n * 4)), Device(n * 2), false,        static_cast<float*>(Device(n * 4)),
      static_cast<float*>(Device(n * 4)), Device(n * 2), 1 /* bf16 */, n};
  const auto c = strata::exec::MakeAdamStep(strata::exec::AdamConfig{}, 10);
  auto rate = [&](auto launch) {
    return [&, launch] { return static_cast<double>(n) * 5 / Time(s, 5, [&] { CK(launch()); }) / 1e9; };
  };
  const std::vector<strata::bench::Variant> v = {
      {"stream (roofline)", rate([&] { return strata::exec::cuda::AdamShapedStream(a, s); })},
      {"fused adam", rate([&] { return strata::exec::cuda::Adam(a, c, s); })},
  };
  for (auto _ : state) {
    auto r = strata::bench::Interleave(v, strata::bench::Rounds(), 0, "Gparam/s");
    strata::bench::Report(state, "Adam, 100M parameters, bf16 gradient and copy-out (28 B/param)", r);
    const strata::bench::Spread st = r.Rate(0);
    std::printf("  the roofline's median moves %.0f GB/s\n", st.median * 28);
  }
  for (void* p : {static_cast<void*>(a.master), const_cast<void*>(a.grad), static_cast<void*>(a.exp_avg),
                  static_cast<void*>(a.exp_avg_sq), a.out})
    cudaFree(p);
  cudaStreamDestroy(s);
  if (!g_error.empty()) state.SkipWithError(g_error.c_str());
}

// One column-major product C [m x n] = op(A) op(B), as the device model
// issues it (devmodel/device_mlp.cc's three calls per Linear layer).
struct Product {
  bool ta, tb;
  int m, n, k, lda, ldb, ldc;
};
// Forward, dW, dx of a Linear layer with batch M, out N, in K (row-major
// y [M x N] = x [M x K] W^T).
std::vector<Product> LayerProducts(int M, int N, int K) {
  return {{true, false, N, M, K, K, K, N}, {false, true, K, N, M, K, N, K}, {false, false, K, M, N, K, N, K}};
}

struct GemmBuffers {
  void *a, *b;
  float* c;
  void* workspace;
  size_t ws_bytes = size_t{32} << 20;
};

double GemmEx(cublasHandle_t h, cudaStream_t s, const Product& p, const GemmBuffers& g) {
  const float alpha = 1, beta = 0;
  CK(cublasGemmEx(h, p.ta ? CUBLAS_OP_T : CUBLAS_OP_N, p.tb ? CUBLAS_OP_T : CUBLAS_OP_N, p.m, p.n, p.k, &alpha, g.a,
                  CUDA_R_16BF, p.lda, g.b, CUDA_R_16BF, p.ldb, &beta, g.c, CUDA_R_32F, p.ldc, CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT));  // warm-up, as each cublasLt algorithm gets
  return Time(s, 10,
              [&] {
                CK(cublasGemmEx(h, p.ta ? CUBLAS_OP_T : CUBLAS_OP_N, p.tb ? CUBLAS_OP_T : CUBLAS_OP_N, p.m, p.n, p.k,
                                &alpha, g.a, CUDA_R_16BF, p.lda, g.b, CUDA_R_16BF, p.ldb, &beta, g.c, CUDA_R_32F, p.ldc,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
              }) /
         10;
}

// The fastest of cublasLt's heuristic algorithms for p.
double LtBest(cublasLtHandle_t lt, cudaStream_t s, const Product& p, const GemmBuffers& g) {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  const cublasOperation_t ta = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  double best = 0;
  if (CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
      CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, p.ta ? p.k : p.m, p.ta ? p.m : p.k, p.lda)) &&
      CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, p.tb ? p.n : p.k, p.tb ? p.k : p.n, p.ldb)) &&
      CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, p.m, p.n, p.ldc)) && CK(cublasLtMatmulPreferenceCreate(&pref)) &&
      CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g.ws_bytes,
                                              sizeof g.ws_bytes))) {
    cublasLtMatmulHeuristicResult_t res[16];
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, res, &found));
    const float alpha = 1, beta = 0;
    for (int i = 0; i < found; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
      // A warm-up call; an algorithm that fails it is skipped (its time
      // would be near zero, a false best).
      if (cublasLtMatmul(lt, op, &alpha, g.a, la, g.b, lb, &beta, g.c, lc, g.c, lc, &res[i].algo, g.workspace,
                         g.ws_bytes, s) != CUBLAS_STATUS_SUCCESS)
        continue;
      const double t = Time(s, 10,
                            [&] {
                              CK(cublasLtMatmul(lt, op, &alpha, g.a, la, g.b, lb, &beta, g.c, lc, g.c, lc, &res[i].algo,
                                                g.workspace, g.ws_bytes, s));
                            }) /
                       10;
      if (t > 0 && (best == 0 || t < best)) best = t;
    }
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  return best;
}

void BM_Gemm(benchmark::State& state) {
  if (const std::string why = NoDevice(); !why.empty()) return state.SkipWithError(why.c_str());
  const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
            K = static_cast<int>(state.range(2));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasHandle_t h;
  cublasLtHandle_t lt;
  CK(cublasCreate(&h));
  CK(cublasSetStream(h, s));
  CK(cublasLtCreate(&lt));
  const size_t most = static_cast<size_t>(std::max({M * K, N * K, M * N}));
  GemmBuffers g{Device(most * 2), Device(most * 2), static_cast<float*>(Device(most * 4)), nullptr};
  g.workspace = Device(g.ws_bytes);
  const std::vector<Product> ps = LayerProducts(M, N, K);
  const double flops = 3.0 * 2.0 * M * N * K;
  const std::vector<strata::bench::Variant> v = {
      {"cublasLt best",
       [&] {
         double t = 0;
         for (const Product& p : ps) t += LtBest(lt, s, p, g);
         return t > 0 ? flops / t / 1e12 : 0.0;
       }},
      {"strata (GemmEx)",
       [&] {
         double t = 0;
         for (const Product& p : ps) t += GemmEx(h, s, p, g);
         return t > 0 ? flops / t / 1e12 : 0.0;
       }},
  };
  for (auto _ : state) {
    auto r = strata::bench::Interleave(v, strata::bench::Rounds(), 0, "TFLOP/s");
    strata::bench::Report(state,
                          "Linear " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                              " (forward, dW, dx; bf16, fp32 accumulation)",
                          r);
  }
  cudaFree(g.a);
  cudaFree(g.b);
  cudaFree(g.c);
  cudaFree(g.workspace);
  cublasLtDestroy(lt);
  cublasDestroy(h);
  cudaStreamDestroy(s);
  if (!g_error.empty()) state.SkipWithError(g_error.c_str());
}

void BM_Copies(benchmark::State& state) {
  if (const std::string why = NoDevice(); !why.empty()) return state.SkipWithError(why.c_str());
  constexpr size_t bytes = size_t{256} << 20;
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  void* dev = Device(bytes);
  void* pinned = nullptr;
  CK(cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable));
  void* pageable = std::aligned_alloc(4096, bytes);
  if (pinned != nullptr) std::memset(pinned, 1, bytes);
  std::memset(pageable, 1, bytes);
  auto copy = [&](void* dst, const void* src) {
    return [&, dst, src] {
      return static_cast<double>(bytes) * 3 /
             Time(s, 3, [&] { CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s)); }) / 1e9;
    };
  };
  const std::vector<strata::bench::Variant> v = {
      {"H2D pinned", copy(dev, pinned)},
      {"H2D pageable", copy(dev, pageable)},
      {"D2H pinned", copy(pinned, dev)},
      {"D2H pageable", copy(pageable, dev)},
  };
  for (auto _ : state) {
    auto r = strata::bench::Interleave(v, strata::bench::Rounds(), 0, "GB/s");
    strata::bench::Report(state, "copies of 256 MiB (ratios to H2D pinned)", r);
    const strata::bench::Spread d = r.RatioOf(3, 2);
    std::printf("  D2H pageable / D2H pinned: min %.3f median %.3f max %.3f\n", d.min, d.median, d.max);
  }
  cudaFree(dev);
  cudaFreeHost(pinned);
  std::free(pageable);
  cudaStreamDestroy(s);
  if (!g_error.empty()) state.SkipWithError(g_error.c_str());
}

BENCHMARK(BM_Adam)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
// The workloads' Linear shapes (M batch tokens, N out, K in): the seed's
// MLP, the mlp scenarios', GPT-2's QKV and fc2 at 512 tokens.
BENCHMARK(BM_Gemm)
    ->Args({4, 1000, 1000})
    ->Args({64, 2048, 2048})
    ->Args({512, 4096, 1024})
    ->Args({512, 2304, 768})
    ->Args({512, 768, 3072})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();
BENCHMARK(BM_Copies)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
