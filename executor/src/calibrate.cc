#include "strata/executor/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <vector>

#include "aligned.h"
#include "strata/core/model.h"
#include "strata/executor/comm.h"
#include "strata/executor/copy_engine.h"
#include "strata/executor/cpu_adam.h"
#include "strata/executor/mlp_kernels.h"

namespace strata::exec {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Best rate of `work` units over `repeats` runs of fn.
template <typename F>
double BestRate(int repeats, double work, F&& fn) {
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = Now();
    fn();
    const double t = Now() - t0;
    if (t > 0) best = std::max(best, work / t);
  }
  return best;
}

}  // namespace

Result<HardwareSpec> Calibrate(const Scenario& s, const CalibrateOptions& o) {
  HardwareSpec hw = s.hardware;
  auto step = [&](const char* what, double f) {
    if (o.progress) o.progress(what, f);
  };
  // GEMM at the largest module of the workload.
  step("gemm", 0.0);
  const ModelGraph g = BuildModelGraph(s.model, s.training);
  size_t in = 1024, out = 1024, rows = static_cast<size_t>(g.tokens_per_micro_batch);
  if (s.model.kind == ModelKind::kMlp) {
    for (size_t i = 0; i + 1 < s.model.sizes.size(); ++i)
      if (static_cast<size_t>(s.model.sizes[i] * s.model.sizes[i + 1]) > in * out)
        in = static_cast<size_t>(s.model.sizes[i]), out = static_cast<size_t>(s.model.sizes[i + 1]);
  } else {
    in = static_cast<size_t>(s.model.hidden_size);
    out = static_cast<size_t>(s.model.ffn());
  }
  rows = std::clamp<size_t>(rows, 1, 512);
  {
    std::vector<float> x(rows * in, 0.5f), w(out * in, 0.25f), b(out, 0.0f), y(rows * out);
    hw.gpu.peak_flops = FlopRate{BestRate(o.repeats, 2.0 * rows * in * out,
                                          [&] { LinearForward(x.data(), w.data(), b.data(), y.data(), rows, in, out); })};
    hw.gpu.efficiency = 1.0;
  }
  // Optimizer: the fused Adam's bytes per second (28 + low-precision bytes per parameter).
  step("adam", 0.2);
  {
    const size_t n = size_t{8} << 20;
    std::vector<float> p(n, 0.1f), gr(n, 0.01f), m(n, 0.0f), v(n, 0.0f);
    std::vector<uint16_t> out16(n);
    const AdamTile tile{p.data(), gr.data(), m.data(), v.data(), out16.data(), s.training.precision == Precision::kBf16 ? Precision::kBf16 : Precision::kFp16, n};
    const auto c = MakeAdamStep(AdamConfig{}, 1);
    const double rate = BestRate(o.repeats, static_cast<double>(n) * (28 + BytesPerElement(s.training.precision)),
                                 [&] { CpuAdamStep(tile, c, 1); });
    hw.cpu.memory_bandwidth = Bandwidth{rate};
    hw.gpu.hbm_bandwidth = Bandwidth{rate};
  }
  // Copies (H2D, D2H and peer copies on the host backend).
  step("copy", 0.4);
  {
    const size_t n = size_t{64} << 20;
    AlignedBuffer a(n), b(n);
    std::memset(a.data(), 1, n);
    std::memset(b.data(), 2, n);
    const double rate = BestRate(o.repeats, static_cast<double>(n), [&] { CopyBytes(b.data(), a.data(), n, 2); });
    hw.pcie.bandwidth = Bandwidth{rate};
    if (hw.nvlink.bandwidth.bytes_per_s > 0) hw.nvlink.bandwidth = Bandwidth{rate};
  }
  // NVMe through the configured engine and knobs.
  step("nvme", 0.6);
  {
    Env* env = PosixEnv();
    STRATA_RETURN_IF_ERROR(env->CreateDir(o.nvme_dir));
    const std::string path = o.nvme_dir + "/strata-calibrate.swp";
    STRATA_RETURN_IF_ERROR(env->RemoveFile(path));
    auto f = env->OpenFile(path, true);
    if (!f.ok()) return f.status();
    STRATA_RETURN_IF_ERROR((*f)->Allocate(o.nvme_bytes));
    auto engine = env->NewIoEngine(o.engine, s.aio);
    if (!engine.ok()) return engine.status();
    AlignedBuffer buf(o.nvme_bytes);
    std::memset(buf.data(), 3, o.nvme_bytes);
    const IoRequest w{IoRequest::Op::kWrite, f->get(), 0, buf.data(), o.nvme_bytes};
    const IoRequest r{IoRequest::Op::kRead, f->get(), 0, buf.data(), o.nvme_bytes};
    Status st;
    const double wr = BestRate(o.repeats, static_cast<double>(o.nvme_bytes), [&] { st = (*engine)->Run({&w, 1}); });
    STRATA_RETURN_IF_ERROR(st);
    const double rd = BestRate(o.repeats, static_cast<double>(o.nvme_bytes), [&] { st = (*engine)->Run({&r, 1}); });
    STRATA_RETURN_IF_ERROR(st);
    STRATA_RETURN_IF_ERROR(env->RemoveFile(path));
    hw.nvme.write_bandwidth = Bandwidth{wr};
    hw.nvme.read_bandwidth = Bandwidth{rd};
  }
  // Collectives: MPI allgather between the running ranks.
  step("collective", 0.8);
  Comm& comm = Comm::World();
  if (comm.size() > 1) {
    const size_t n = size_t{16} << 20;
    std::vector<char> src(n, 1), dst(n * static_cast<size_t>(comm.size()));
    // A ring moves (size-1)/size of the gathered bytes through each link.
    const double moved = static_cast<double>(n) * (comm.size() - 1);
    const double rate = BestRate(o.repeats, moved, [&] { comm.Allgather(src.data(), dst.data(), n); });
    hw.network.bandwidth = Bandwidth{rate};
    if (hw.nvlink.bandwidth.bytes_per_s > 0) hw.nvlink.bandwidth = Bandwidth{rate};
  }
  step("done", 1.0);
  return hw;
}

std::string HardwareYaml(const HardwareSpec& hw, const std::string& comment) {
  std::ostringstream o;
  o.precision(6);
  auto rate = [](double v) {
    std::ostringstream s;
    s.precision(4);
    s << v / 1e9 << "GB/s";
    return s.str();
  };
  o << "# " << comment << "\n";
  o << "hardware:\n";
  o << "  nodes: " << hw.nodes << "\n  gpus_per_node: " << hw.gpus_per_node << "\n";
  o << "  gpu:     {memory: " << hw.gpu.memory.v << ", peak_flops: " << hw.gpu.peak_flops.flops_per_s / 1e9
    << "GFLOPS, hbm_bandwidth: " << rate(hw.gpu.hbm_bandwidth.bytes_per_s) << ", efficiency: " << hw.gpu.efficiency << "}\n";
  o << "  cpu:     {memory: " << hw.cpu.memory.v << ", memory_bandwidth: " << rate(hw.cpu.memory_bandwidth.bytes_per_s)
    << ", cores: " << hw.cpu.cores << "}\n";
  o << "  pcie:    {bandwidth: " << rate(hw.pcie.bandwidth.bytes_per_s) << "}\n";
  if (hw.nvlink.bandwidth.bytes_per_s > 0) o << "  nvlink:  {bandwidth: " << rate(hw.nvlink.bandwidth.bytes_per_s) << "}\n";
  o << "  network: {bandwidth: " << rate(hw.network.bandwidth.bytes_per_s) << "}\n";
  o << "  nvme:    {capacity: " << hw.nvme.capacity.v << ", read_bandwidth: " << rate(hw.nvme.read_bandwidth.bytes_per_s)
    << ", write_bandwidth: " << rate(hw.nvme.write_bandwidth.bytes_per_s);
  if (hw.nvme.readwrite_bandwidth.bytes_per_s > 0) o << ", readwrite_bandwidth: " << rate(hw.nvme.readwrite_bandwidth.bytes_per_s);
  o << "}\n";
  return o.str();
}

}  // namespace strata::exec
