#include "strata/executor/calibrate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "io/aligned.h"
#include "runtime/best_rate.h"
#include "runtime/calibrate_device.h"
#include "runtime/calibrate_fit.h"
#include "strata/executor/comm.h"
#include "strata/executor/copy_engine.h"
#include "strata/executor/cpu_adam.h"

namespace strata::exec {
namespace {

// Work and time of the plan's ops per class, ops one at a time on every
// rank, the median of `plan_repeats` runs per op (the minimum would be
// optimistic: the simulator is to predict a typical iteration), then the
// mean over the ranks that run the op (its pipeline stage's).
struct ClassRates {
  double flops = 0, compute_s = 0;  // forward, backward
  Points copies, reads, writes;     // H2D and D2H; NVMe reads; NVMe writes (bytes)
  Points staged;                    // pageable H2D and D2H that only copy (StagingRate)
  double cpu_opt_bytes = 0, cpu_opt_s = 0;
  double gpu_opt_bytes = 0, gpu_opt_s = 0;
  Points gathers, reductions;  // collectives: ring bytes per link
  double reduced_bytes = 0;    // the reductions' op bytes
};

// Whether `op` frees a buffer that was a fresh mapping (plan.h
// FreshPageBytes: transient, pageable, kFreshMappingBytes or more).
bool FreesFreshMapping(const Plan& p, const Op& op) {
  return std::any_of(op.frees.begin(), op.frees.end(), [&](BufferId id) { return IsFreshMapping(p.buffers[id]); });
}

Result<ClassRates> MeasurePlanOps(const Plan& plan, const CalibrateOptions& o) {
  // A delayed update's step order does not change what an op costs, and its
  // warm-up's last step applies nothing: every step run as a warm-up step
  // (the step's ops after the others, on this step's gradients).
  std::optional<Plan> ordinary;
  if (plan.run.delayed_warmup >= 0) {
    ordinary = plan;
    ordinary->run.delayed_warmup = static_cast<int>(limits::kWarmupSteps);
  }
  const Plan& p = ordinary ? *ordinary : plan;
  RunOptions ro;
  ro.steps = 2;  // the first warms caches, pools and files up (more while fp16 steps skip)
  ro.engine = o.engine;
  ro.nvme_dir = o.nvme_dir;
  ro.parallel = false;
  ro.compute_threads = o.compute_threads;
  ro.backend_kind = o.backend;
  std::vector<std::vector<double>> times(p.ops.size());
  Comm& comm = Comm::World();
  for (int k = 0; k < std::max(1, o.plan_repeats);) {
    STRATA_ASSIGN_OR_RETURN(auto r, RunTraining(p, ro));
    // A step skipped for fp16 overflow does no Adam work: measure one the
    // optimizer applied. The early steps skip while the dynamic loss scale
    // comes down (the same on every run and rank: same seed, agreed skips),
    // so run past them.
    if (r.step_skipped.back()) {
      if (ro.steps >= 64) return Status::Internal("calibrate: every one of 64 fp16 steps overflowed");
      ro.steps += r.skipped_steps;
      continue;
    }
    // This process's timeline holds its own rank's ops (under mpirun rank
    // r's spans say r: taking rank 0's alone left every other rank without
    // samples, and the mean over the ranks halved each op's time).
    for (const TimelineOp& t : r.timeline.ops)
      if (t.rank == comm.rank()) times[t.op].push_back(t.end_s - t.start_s);
    ++k;
  }
  // Each op's median over the repeats on this rank, then the mean over the
  // ranks that ran it (under mpirun every rank measured its own ops; one
  // rank alone can be systematically off, e.g. the one sharing its core
  // with mpirun). Every rank runs every op of its pipeline stage (one that
  // moves nothing there too): an op of its stage without a time is an
  // error, agreed by all ranks (the Allgather below would wait for one that
  // returned alone). Other stages' ops are NaN here.
  const int stage = p.StageOf(comm.rank());
  const Op* unmeasured = nullptr;
  for (const Op& op : p.ops)
    if (op.stage == stage && times[op.id].empty() && unmeasured == nullptr) unmeasured = &op;
  if (comm.AnyTrue(unmeasured != nullptr))
    return Status::Internal(unmeasured != nullptr
                                ? "calibrate: no time measured for op " + std::to_string(unmeasured->id) + " '" +
                                      unmeasured->name + "' on rank " + std::to_string(comm.rank())
                                : std::string("calibrate: an op went unmeasured on another rank"));
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> median(p.ops.size(), kNone);
  for (const Op& op : p.ops) {
    std::vector<double>& v = times[op.id];
    if (v.empty()) continue;  // another stage's op (this stage's have times: checked above)
    std::sort(v.begin(), v.end());
    median[op.id] = v[v.size() / 2];
  }
  if (comm.size() > 1) {
    std::vector<double> all(median.size() * static_cast<size_t>(comm.size()));
    comm.Allgather(median.data(), all.data(), median.size() * sizeof(double));
    for (size_t i = 0; i < median.size(); ++i) {
      double sum = 0;
      int ran = 0;
      for (int r = 0; r < comm.size(); ++r)
        if (const double t = all[static_cast<size_t>(r) * median.size() + i]; !std::isnan(t)) sum += t, ++ran;
      median[i] = ran > 0 ? sum / ran : kNone;
    }
  }
  ClassRates c;
  for (const Op& op : p.ops) {
    const double t = median[op.id], bytes = static_cast<double>(op.bytes.v);
    if (std::isnan(t)) continue;
    switch (op.kind) {
      case OpKind::kForward:
      case OpKind::kBackward:
        c.flops += op.flops, c.compute_s += t;
        break;
      case OpKind::kCopyH2D:
      case OpKind::kCopyD2H:
        // A pageable copy's staging pass is CPU memory work (the simulator
        // spends 2 bytes a byte at cpu.memory_bandwidth, at most
        // cpu.staging_bandwidth per copy): only pinned copies measure PCIe.
        // A copy with side kernels (copy_bytes: the simulator charges them
        // after the DMA at HBM bandwidth) measures neither rate: its time
        // holds them. The pageable ones that only copy give the staging
        // rate; one that accumulates or widens does more than a DMA on its
        // way (the host backend adds or converts on the CPU); one into
        // fresh pages spends their first touch too (page_fault_time,
        // measured by the micro-benchmarks), and one that frees a fresh
        // mapping its munmap (the runner frees inside the op's time).
        if (op.copy_bytes.v > 0) break;
        if (!IsPageableCopy(p, op))
          c.copies.emplace_back(bytes, t);
        else if (FreshPageBytes(p, op, -1) == 0 && !FreesFreshMapping(p, op) &&
                 std::none_of(op.moves.begin(), op.moves.end(), [](const Move& m) { return m.accumulate || m.widen; }))
          c.staged.emplace_back(bytes, t);
        break;
      case OpKind::kNvmeRead:
        c.reads.emplace_back(bytes, t);
        break;
      case OpKind::kNvmeWrite:
        c.writes.emplace_back(bytes, t);
        break;
      case OpKind::kOptimizerStep:
        if (op.stream == Stream::kCompute)
          c.gpu_opt_bytes += bytes, c.gpu_opt_s += t;
        else
          c.cpu_opt_bytes += bytes, c.cpu_opt_s += t;
        break;
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce: {
        const double n = static_cast<double>(p.groups[op.group].ranks.size());
        if (n <= 1) break;
        const double phases = op.kind == OpKind::kAllReduce ? 2 : 1;
        (op.kind == OpKind::kAllGather ? c.gathers : c.reductions).emplace_back(phases * (n - 1) / n * bytes, t);
        if (op.kind != OpKind::kAllGather) c.reduced_bytes += bytes;
        break;
      }
      case OpKind::kSend:
      case OpKind::kRecv:
        break;  // point to point: no rate of its own here (the links' come from collectives)
      case OpKind::kHook:
        break;  // the modelled framework's host time: nothing the hardware does
    }
  }
  return c;
}

// Reads one file and/or writes another (`dirs`: 1 read, 2 write, 3 both at
// once) for about `seconds`; bytes per second moved by them together.
Result<double> MixedNvmeRate(const Scenario& s, Env* env, const CalibrateOptions& o, const std::string& dir,
                             double seconds, int dirs) {
  const size_t chunk = std::min<size_t>(o.nvme_bytes, size_t{8} << 20);
  std::unique_ptr<File> files[2];
  std::unique_ptr<IoEngine> engines[2];
  AlignedBuffer bufs[2] = {AlignedBuffer(chunk), AlignedBuffer(chunk)};
  for (int i = 0; i < 2; ++i) {
    const std::string path = dir + "/strata-calibrate-mixed" + std::to_string(i) + ".swp";
    STRATA_RETURN_IF_ERROR(env->RemoveFile(path));
    STRATA_ASSIGN_OR_RETURN(auto f, env->OpenFile(path, true));
    STRATA_RETURN_IF_ERROR((f)->Allocate(o.nvme_bytes));
    files[i] = std::move(f);
    std::memset(bufs[i].data(), 5, chunk);
    STRATA_ASSIGN_OR_RETURN(auto e, env->NewIoEngine(o.engine, s.aio));
    engines[i] = std::move(e);
  }
  // The file to read holds data.
  for (size_t off = 0; off + chunk <= o.nvme_bytes; off += chunk) {
    const IoRequest w{IoRequest::Op::kWrite, files[0].get(), off, bufs[0].data(), chunk};
    STRATA_RETURN_IF_ERROR(engines[0]->Run({&w, 1}));
  }
  std::atomic<bool> stop{false};
  double moved[2] = {0, 0};
  Status st[2];
  const double t0 = Now();
  auto loop = [&](int i) {
    const auto kind = i == 0 ? IoRequest::Op::kRead : IoRequest::Op::kWrite;
    for (size_t off = 0; !stop.load(); off = (off + chunk + chunk <= o.nvme_bytes) ? off + chunk : 0) {
      const IoRequest q{kind, files[i].get(), off, bufs[i].data(), chunk};
      st[i] = engines[i]->Run({&q, 1});
      if (!st[i].ok()) return;
      if (!stop.load()) moved[i] += static_cast<double>(chunk);  // counted only while both run
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    if (dirs & (1 << i)) threads.emplace_back(loop, i);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  const double t = Now() - t0;
  for (auto& th : threads) th.join();
  for (int i = 0; i < 2; ++i) {
    STRATA_RETURN_IF_ERROR(st[i]);
    STRATA_RETURN_IF_ERROR(env->RemoveFile(files[i]->path()));
  }
  return (moved[0] + moved[1]) / t;
}

// Micro-benchmarks on rank 0: the rates of classes a plan may not use.
Status MicroBenchmarks(const Scenario& s, const CalibrateOptions& o, HardwareSpec& hw) {
  {  // Optimizer: the fused Adam's bytes per second (28 + low-precision bytes per parameter).
    const size_t n = size_t{8} << 20;
    std::vector<float> p(n, 0.1f), gr(n, 0.01f), m(n, 0.0f), v(n, 0.0f);
    std::vector<uint16_t> out16(n);
    const AdamTile tile{
        p.data(), gr.data(),    m.data(),
        v.data(), out16.data(), s.training.precision == Precision::kBf16 ? Precision::kBf16 : Precision::kFp16,
        n};
    const auto c = MakeAdamStep(AdamConfig{}, 1);
    const double rate = BestRate(o.repeats, static_cast<double>(n) * (28 + BytesPerElement(s.training.precision)),
                                 [&] { CpuAdamStep(tile, c, 1); });
    hw.cpu.memory_bandwidth = Bandwidth{rate};
    hw.gpu.hbm_bandwidth = Bandwidth{rate};
    // One core's vector math alone (cpu.adam_core_rate, parameters/s): the
    // same step on a tile that stays in cache (16K parameters, under 0.5
    // MiB), many times over, so memory does not bind.
    const size_t small = size_t{16} << 10;
    const AdamTile hot{p.data(), gr.data(), m.data(), v.data(), out16.data(), tile.out_precision, small};
    constexpr int kPasses = 64;
    const double per_s = BestRate(o.repeats, static_cast<double>(small) * kPasses, [&] {
      for (int k = 0; k < kPasses; ++k) CpuAdamStep(hot, c, 1);
    });
    hw.cpu.adam_core_rate = per_s;
  }
  {  // Copies (H2D, D2H and peer copies on the host backend).
    const size_t n = size_t{64} << 20;
    AlignedBuffer a(n), b(n);
    std::memset(a.data(), 1, n);
    std::memset(b.data(), 2, n);
    const double rate = BestRate(o.repeats, static_cast<double>(n), [&] { CopyBytes(b.data(), a.data(), n, 2); });
    hw.pcie.bandwidth = Bandwidth{rate};
    if (hw.nvlink.bandwidth.bytes_per_s > 0) hw.nvlink.bandwidth = Bandwidth{rate};
  }
  {  // First touch (cpu.page_fault_time): fresh pageable blocks as the
     // executor allocates them (posix_memalign, as PyTorch's CPU tensors),
     // one byte written per 4 KiB page; the median over the repeats.
    const size_t n = size_t{64} << 20;
    std::vector<double> per_page;
    for (int k = 0; k < std::max(1, o.repeats); ++k) {
      void* q = nullptr;
      if (const int e = posix_memalign(&q, 4096, n); e != 0)
        return Status::Internal(std::string("calibrate: posix_memalign of 64 MiB: ") + std::strerror(e));
      auto* bytes = static_cast<volatile std::byte*>(q);
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < n; i += kHostPageBytes) bytes[i] = std::byte{1};
      const std::chrono::duration<double> t = std::chrono::steady_clock::now() - t0;
      std::free(q);
      per_page.push_back(t.count() / static_cast<double>(n / kHostPageBytes));
    }
    std::sort(per_page.begin(), per_page.end());
    hw.cpu.page_fault_time = Seconds{per_page[per_page.size() / 2]};
  }
  // NVMe through the configured engine and knobs: each direction alone and
  // both at once, the same loop of 8 MiB requests for all three, the median
  // of `repeats` each (the split between directions, and the total, vary a
  // lot from run to run). Shared or not: both at once against each alone.
  Env* env = PosixEnv();
  STRATA_RETURN_IF_ERROR(env->CreateDir(o.nvme_dir));
  double median[4] = {};
  for (int dirs : {1, 2, 3}) {
    std::vector<double> rates;
    for (int k = 0; k < std::max(1, o.repeats); ++k) {
      STRATA_ASSIGN_OR_RETURN(auto m, MixedNvmeRate(s, env, o, o.nvme_dir, 0.5, dirs));
      rates.push_back(m);
    }
    std::sort(rates.begin(), rates.end());
    median[dirs] = rates[rates.size() / 2];
  }
  hw.nvme.read_bandwidth = Bandwidth{median[1]};
  hw.nvme.write_bandwidth = Bandwidth{median[2]};
  const double mixed = median[3];
  hw.nvme.readwrite_bandwidth = Bandwidth{mixed < 0.9 * (median[1] + median[2]) ? mixed : 0.0};
  return Status::Ok();
}

}  // namespace

Result<HardwareSpec> Calibrate(const Scenario& s, const Plan& plan, const CalibrateOptions& o) {
  HardwareSpec hw = s.hardware;
  auto step = [&](const char* what, double f) {
    if (o.progress) o.progress(what, f);
  };
  Comm& comm = Comm::World();
  // A communicator of one per rank (split by every rank: MPI_Comm_split is
  // collective), for the device backend's micro-benchmarks on rank 0 and
  // the check, first of all, that every rank has a device.
  std::unique_ptr<Comm> self = comm.size() > 1 ? comm.Split(comm.rank(), 0) : nullptr;
  if (o.backend == BackendKind::kCuda) {
    auto probe = NewCudaBackend({self != nullptr ? self.get() : &comm, -1});
    // Agreed: a rank without a device must not leave the others waiting.
    if (comm.AnyTrue(!probe.ok()))
      return probe.ok() ? Status::Internal("no CUDA device on another rank (strata calibrate --backend cuda)")
                        : probe.status();
  }
  step("micro-benchmarks: adam, copy, nvme (alone and mixed)", 0.0);
  Status micro;
  if (comm.rank() == 0) micro = MicroBenchmarks(s, o, hw);
  if (micro.ok() && comm.rank() == 0 && o.backend != BackendKind::kHost)
    micro = DeviceMicroBenchmarks(s, o, self != nullptr ? self.get() : &comm, hw,
                                  [&](const std::string& line) { step(line.c_str(), 0.4); });
  // Every rank learns whether rank 0 failed (the plan run below is collective).
  if (comm.AnyTrue(!micro.ok())) return micro.ok() ? Status::IOError("calibration failed on rank 0") : micro;
  step("the plan's ops one at a time", 0.5);
  STRATA_ASSIGN_OR_RETURN(auto c, MeasurePlanOps(plan, o));
  const double share = comm.size() > 1 ? static_cast<double>(hw.gpus_per_node) : 1.0;
  if (c.compute_s > 0) {
    hw.gpu.peak_flops = FlopRate{c.flops / c.compute_s};
    hw.gpu.efficiency = 1.0;
  }
  // What was measured is whole ops on this host: the flat compute model
  // (FLOPs at one rate), one NVMe device, one link per level; the
  // roofline's and the topology's finer parameters are not measured here.
  hw.gpu.compute_model = ComputeModel::kFlat;
  hw.gpu.sms = 0;
  hw.gpu.launch_latency = Seconds{0};
  hw.pcie.gpus_per_switch = 0;
  hw.pcie.host_bandwidth = Bandwidth{0};
  hw.network.nics = 1;
  hw.nvme.drives = 1;
  if (!c.copies.empty()) {
    const Fit f = RateGiven(c.copies, LeastSquaresIntercept(c.copies));
    hw.pcie.bandwidth = Bandwidth{f.rate};
    hw.pcie.latency = Seconds{f.latency};
  }
  if (!c.reads.empty() || !c.writes.empty()) {
    // One latency for the device: the per-direction intercepts, weighted by
    // their op counts.
    const double nr = static_cast<double>(c.reads.size()), nw = static_cast<double>(c.writes.size());
    const double lat = (nr * LeastSquaresIntercept(c.reads) + nw * LeastSquaresIntercept(c.writes)) / (nr + nw);
    Fit r = RateGiven(c.reads, lat), w = RateGiven(c.writes, lat);
    // A direction whose ops take less than the latency rejects it: then
    // neither keeps it, and both rates are the plain bytes over time.
    const bool keep = lat > 0 && (c.reads.empty() || r.latency > 0) && (c.writes.empty() || w.latency > 0);
    if (!keep) r = RateGiven(c.reads, 0), w = RateGiven(c.writes, 0);
    if (!c.reads.empty()) hw.nvme.read_bandwidth = Bandwidth{share * r.rate};
    if (!c.writes.empty()) hw.nvme.write_bandwidth = Bandwidth{share * w.rate};
    hw.nvme.latency = Seconds{keep ? lat : 0};
  }
  if (c.cpu_opt_s > 0) hw.cpu.memory_bandwidth = Bandwidth{share * c.cpu_opt_bytes / c.cpu_opt_s};
  // After the copy rate and the memory bandwidth it is measured against.
  if (!c.staged.empty())
    hw.cpu.staging_bandwidth = Bandwidth{
        StagingRate(c.staged, hw.pcie.bandwidth.bytes_per_s, hw.pcie.latency.v, hw.cpu.memory_bandwidth.bytes_per_s)};
  if (c.gpu_opt_s > 0) hw.gpu.hbm_bandwidth = Bandwidth{c.gpu_opt_bytes / c.gpu_opt_s};
  if (!c.gathers.empty() || !c.reductions.empty()) {
    // The link from the gathers (pure transfers) when there are any; what
    // the reductions take beyond it is their reduction (the host backend's
    // fp32 conversion and MPI sum), as gpu.reduction_bandwidth.
    Points all = c.gathers;
    all.insert(all.end(), c.reductions.begin(), c.reductions.end());
    const Points& link_ops = c.gathers.empty() ? all : c.gathers;
    const Fit f = RateGiven(link_ops, LeastSquaresIntercept(link_ops));
    LinkSpec& link = hw.nodes > 1 ? hw.network : hw.nvlink;  // peers on one node: MPI, not the copy engine
    link.bandwidth = Bandwidth{f.rate};
    link.latency = Seconds{f.latency};
    double extra = 0;
    if (!c.gathers.empty() && f.rate > 0)
      for (auto [x, y] : c.reductions) extra += y - f.latency - x / f.rate;
    hw.gpu.reduction_bandwidth = Bandwidth{extra > 0 ? c.reduced_bytes / extra : 0.0};
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
  o << "  gpu:     {memory: " << hw.gpu.memory.v << ", reserved_memory: " << hw.gpu.reserved_memory.v
    << ", peak_flops: " << hw.gpu.peak_flops.flops_per_s / 1e9
    << "GFLOPS, hbm_bandwidth: " << rate(hw.gpu.hbm_bandwidth.bytes_per_s) << ", efficiency: " << hw.gpu.efficiency
    << ", compute_model: " << (hw.gpu.compute_model == ComputeModel::kFlat ? "flat" : "roofline");
  if (hw.gpu.reduction_bandwidth.bytes_per_s > 0)
    o << ", reduction_bandwidth: " << rate(hw.gpu.reduction_bandwidth.bytes_per_s);
  o << "}\n";
  o << "  cpu:     {memory: " << hw.cpu.memory.v << ", memory_bandwidth: " << rate(hw.cpu.memory_bandwidth.bytes_per_s)
    << ", cores: " << hw.cpu.cores;
  if (hw.cpu.adam_core_rate > 0) o << ", adam_core_rate: " << hw.cpu.adam_core_rate;
  if (hw.cpu.staging_bandwidth.bytes_per_s > 0)
    o << ", staging_bandwidth: " << rate(hw.cpu.staging_bandwidth.bytes_per_s);
  o << ", page_fault_time: " << hw.cpu.page_fault_time.v * 1e6 << "us";
  o << "}\n";
  auto latency = [](const Seconds& l) {
    std::ostringstream s;
    if (l.v > 0) s << ", latency: " << l.v * 1e6 << "us";
    return s.str();
  };
  o << "  pcie:    {bandwidth: " << rate(hw.pcie.bandwidth.bytes_per_s) << latency(hw.pcie.latency) << "}\n";
  if (hw.nvlink.bandwidth.bytes_per_s > 0)
    o << "  nvlink:  {bandwidth: " << rate(hw.nvlink.bandwidth.bytes_per_s) << latency(hw.nvlink.latency) << "}\n";
  o << "  network: {bandwidth: " << rate(hw.network.bandwidth.bytes_per_s) << latency(hw.network.latency) << "}\n";
  o << "  nvme:    {capacity: " << hw.nvme.capacity.v
    << ", read_bandwidth: " << rate(hw.nvme.read_bandwidth.bytes_per_s)
    << ", write_bandwidth: " << rate(hw.nvme.write_bandwidth.bytes_per_s);
  if (hw.nvme.readwrite_bandwidth.bytes_per_s > 0)
    o << ", readwrite_bandwidth: " << rate(hw.nvme.readwrite_bandwidth.bytes_per_s);
  o << latency(hw.nvme.latency);
  o << "}\n";
  return o.str();
}

}  // namespace strata::exec
