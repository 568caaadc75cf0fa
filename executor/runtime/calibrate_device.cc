// A device backend's copy and Adam rates (calibrate_device.h).
#include "runtime/calibrate_device.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "devmodel/device_model.h"
#include "runtime/best_rate.h"
#include "strata/executor/backend.h"

namespace strata::exec {
namespace {

// The best rate (work per second) of `repeats` runs of fn after one to
// warm up, each run ended by the stream's event (the work is asynchronous
// on a device); the first failure ends the measurement.
template <typename F>
Result<double> BestStreamRate(int repeats, double work, DeviceStream& st, F&& fn) {
  Status failed;
  auto run = [&] {
    if (!failed.ok()) return;
    failed = fn();
    if (!failed.ok()) return;
    auto ev = st.Record();
    failed = ev.ok() ? (*ev)->Synchronize() : ev.status();
  };
  run();
  const double best = BestRate(std::max(1, repeats), work, run);
  if (!failed.ok()) return failed;
  return best;
}

}  // namespace

Status DeviceMicroBenchmarks(const Scenario& s, const CalibrateOptions& o, Comm* self, HardwareSpec& hw,
                             const std::function<void(const std::string&)>& report) {
  std::unique_ptr<Backend> base, owned;
  if (o.backend == BackendKind::kCuda) {
    STRATA_ASSIGN_OR_RETURN(auto b, NewCudaBackend({self, -1}));
    owned = std::move(b);
  } else {
    base = NewHostBackend({self});
    owned = NewEmulatedDeviceBackend(base.get());
  }
  Backend& be = *owned;
  STRATA_ASSIGN_OR_RETURN(auto st, be.NewStream(Stream::kH2D));
  DeviceStream& stream = *st;
  // The device's memory as CUDA reports it, and what is in use before any
  // tensor: gpu.memory and gpu.reserved_memory. That is this process's CUDA
  // context and one stream (cuBLAS and NCCL come later, with a model and a
  // communicator of more than one rank, and lazily loaded kernels as they
  // first run), so it is a lower bound of a run's; other processes on the
  // device count too.
  std::string memory_line;
  if (auto dm = be.GpuMemory(); dm.ok() && dm->total > dm->free) {
    hw.gpu.memory = Bytes(static_cast<int64_t>(dm->total));
    hw.gpu.reserved_memory = Bytes(static_cast<int64_t>(dm->total - dm->free));
    memory_line = ", memory " + FormatBytes(hw.gpu.memory) + " of which " + FormatBytes(hw.gpu.reserved_memory) +
                  " in use before any tensor";
  }

  const size_t bytes = size_t{64} << 20;
  STRATA_ASSIGN_OR_RETURN(auto cpu, be.Allocate(Tier::kCpu, bytes, true));
  STRATA_ASSIGN_OR_RETURN(auto gpu, be.Allocate(Tier::kGpu, bytes, true));
  STRATA_ASSIGN_OR_RETURN(auto h2d, BestStreamRate(o.repeats, static_cast<double>(bytes), stream,
                                                   [&] { return stream.Copy(gpu.data(), cpu.data(), bytes); }));
  STRATA_ASSIGN_OR_RETURN(auto d2h, BestStreamRate(o.repeats, static_cast<double>(bytes), stream,
                                                   [&] { return stream.Copy(cpu.data(), gpu.data(), bytes); }));
  hw.pcie.bandwidth = Bandwidth{std::min(h2d, d2h)};

  // The fused Adam on GPU memory: master, m, v (fp32), the gradient and the
  // copy-out in the run's precision.
  const Precision p = s.training.precision;
  const size_t n = size_t{8} << 20, lp = static_cast<size_t>(BytesPerElement(p));
  Memory mem[5];
  for (int i = 0; i < 5; ++i) {
    STRATA_ASSIGN_OR_RETURN(auto m, be.Allocate(Tier::kGpu, n * (i < 3 ? 4 : lp), true));
    mem[i] = std::move(m);
  }
  const AdamArgs args{reinterpret_cast<float*>(mem[0].data()),
                      mem[3].data(),
                      reinterpret_cast<float*>(mem[1].data()),
                      reinterpret_cast<float*>(mem[2].data()),
                      mem[4].data(),
                      p,
                      n};
  const AdamStepConsts c = MakeAdamStep(AdamConfig{}, 1);
  // Bytes per parameter as the simulator charges an optimizer step and the
  // host's calibration counts them (28 + the copy-out).
  STRATA_ASSIGN_OR_RETURN(auto adam, BestStreamRate(o.repeats, static_cast<double>(n) * static_cast<double>(28 + lp),
                                                    stream, [&] { return stream.AdamStep(args, c); }));
  hw.gpu.hbm_bandwidth = Bandwidth{adam};

  char line[200];
  std::snprintf(
      line, sizeof line, "%s: H2D %.2f GB/s, D2H %.2f GB/s (page-locked, 64 MiB), Adam %.1f GB/s on %s memory",
      be.name().c_str(), h2d / 1e9, d2h / 1e9, adam / 1e9, o.backend == BackendKind::kCuda ? "GPU" : "emulated GPU");
  report(line + memory_line);
  return Status::Ok();
}

}  // namespace strata::exec
