// The plan interpreter: a worker per stream runs the plan's ops on this
// rank's buffers (tier-capped host memory, NVMe files), the workload's math
// for compute ops, MPI for collectives, the fused CPU Adam for steps.
#include "strata/executor/runner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "storage.h"
#include "strata/executor/comm.h"
#include "strata/executor/copy_engine.h"
#include "strata/executor/cpu_adam.h"
#include "strata/executor/sha256.h"
#include "workload.h"

namespace strata::exec {
namespace {

// Elements in the plan's low precision (fp32 stays fp32).
struct LowPrecision {
  Precision p;
  int bytes;
  float Load(const std::byte* base, size_t i) const {
    if (p == Precision::kFp32) {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, base + 2 * i, 2);
    return p == Precision::kBf16 ? Bf16ToFloat(h) : HalfToFloat(h);
  }
  void Store(std::byte* base, size_t i, float f) const {
    if (p == Precision::kFp32) {
      std::memcpy(base + 4 * i, &f, 4);
      return;
    }
    const uint16_t h = p == Precision::kBf16 ? FloatToBf16(f) : FloatToHalf(f);
    std::memcpy(base + 2 * i, &h, 2);
  }
};

class Runner {
 public:
  Runner(const Scenario& s, const Plan& p, const RunOptions& o, Env* env, std::string dir)
      : s_(s), p_(p), o_(o), env_(env), store_(p, env, std::move(dir), Comm::World().rank()), lp_{s.training.precision, BytesPerElement(s.training.precision)} {}

  Result<RunResult> Run() {
    comm_ = &Comm::World();
    rank_ = comm_->rank();
    if (p_.world_size != comm_->size())
      return Status::InvalidArgument("the plan is for " + std::to_string(p_.world_size) + " ranks but " +
                                     std::to_string(comm_->size()) + " are running");
    if (s_.model.kind == ModelKind::kMlp) {
      wl_ = MakeMlpWorkload(s_, o_.seed, rank_);
    } else {
      auto w = MakeGptWorkload(s_, p_, o_.seed, rank_, o_.text_path);
      if (!w.ok()) return w.status();
      wl_ = std::move(*w);
    }
    STRATA_RETURN_IF_ERROR(store_.Open());
    // An engine per stream: engines are not shared between threads.
    for (int st = 0; st < kNumStreams; ++st) {
      auto engine = env_->NewIoEngine(o_.engine, s_.aio);
      if (!engine.ok()) return engine.status();
      engines_[st] = std::move(*engine);
    }
    STRATA_RETURN_IF_ERROR(Init());
    RunResult r;
    double total = 0, bound = 0;
    for (int step = 0; step < o_.steps; ++step) {
      wl_->StartStep(step);
      spans_.clear();
      loss_sum_ = 0;
      overflow_ = false;
      overflow_agreed_ = false;
      const double t0 = env_->NowSeconds();
      STRATA_RETURN_IF_ERROR(o_.parallel ? RunParallel(t0) : RunSequential(t0));
      for (const Op& op : p_.ops) r.bytes_moved[static_cast<int>(LinkClassOf(op.kind))] += op.bytes;
      total += env_->NowSeconds() - t0;
      double busy[kNumStreams] = {};
      for (const OpSpan& sp : spans_) busy[static_cast<int>(p_.ops[sp.op].stream)] += sp.end_s - sp.start_s;
      bound += *std::max_element(std::begin(busy), std::end(busy));
      r.losses.push_back(comm_->AllreduceSum(loss_sum_) / p_.micro_steps / comm_->size());
      r.loss_scale.push_back(scale_);
      EndIteration(r);
    }
    r.iteration_time_s = total / std::max(1, o_.steps);
    r.critical_path_bound_s = bound / std::max(1, o_.steps);
    for (Tier t : kAllTiers) r.peak[static_cast<int>(t)] = store_.peak(t);
    auto digest = Digest();
    if (!digest.ok()) return digest.status();
    r.weights_digest = *digest;
    r.timeline = BuildTimeline(p_, spans_, "run");
    return r;
  }

 private:
  static Status Prefix(const Op& op, const Status& st) {
    const std::string msg = "op " + std::to_string(op.id) + " '" + op.name + "': " + st.message();
    switch (st.code()) {
      case Status::Code::kIOError: return Status::IOError(msg);
      case Status::Code::kInfeasible: return Status::Infeasible(msg);
      case Status::Code::kInvalidArgument: return Status::InvalidArgument(msg);
      default: return Status::Internal(msg);
    }
  }

  // One op: allocations, the work, frees; its span is recorded.
  Status RunOp(const Op& op, double t0) {
    const double a = env_->NowSeconds() - t0;
    for (BufferId b : op.allocs) STRATA_RETURN_IF_ERROR(store_.Allocate(b, op));
    Status st = Execute(op);
    if (!st.ok()) return Prefix(op, st);
    for (BufferId b : op.frees) store_.Free(b);
    std::lock_guard<std::mutex> l(span_mu_);
    spans_.push_back({0, op.id, a, env_->NowSeconds() - t0});
    return Status::Ok();
  }

  Status RunSequential(double t0) {
    for (const Op& op : p_.ops) STRATA_RETURN_IF_ERROR(RunOp(op, t0));
    return Status::Ok();
  }

  // A worker per stream; an op starts when its deps are done (its stream
  // predecessor is done by construction). The first error stops everyone.
  Status RunParallel(double t0) {
    const size_t n = p_.ops.size();
    std::vector<char> done(n, 0);
    std::mutex mu;
    std::condition_variable cv;
    Status first;
    bool failed = false;
    std::vector<std::vector<OpId>> per_stream(kNumStreams);
    for (const Op& op : p_.ops) per_stream[static_cast<int>(op.stream)].push_back(op.id);
    std::vector<std::thread> workers;
    for (int sidx = 0; sidx < kNumStreams; ++sidx) {
      if (per_stream[sidx].empty()) continue;
      workers.emplace_back([&, sidx] {
        for (OpId id : per_stream[sidx]) {
          const Op& op = p_.ops[id];
          {
            std::unique_lock<std::mutex> l(mu);
            cv.wait(l, [&] {
              if (failed) return true;
              for (OpId d : op.deps)
                if (!done[d]) return false;
              return true;
            });
            if (failed) return;
          }
          Status st = RunOp(op, t0);
          std::lock_guard<std::mutex> l(mu);
          if (!st.ok()) {
            if (!failed) first = st;
            failed = true;
          } else {
            done[id] = 1;
          }
          cv.notify_all();
          if (failed) return;
        }
      });
    }
    for (auto& w : workers) w.join();
    return first;
  }


  // Bytes of a region into memory, wherever it lives, with the engine of
  // `stream` (the stream whose worker calls).
  Status ReadRegion(const Region& r, std::byte* out, Stream stream = Stream::kCompute) {
    if (store_.in_memory(r.buffer)) {
      std::memcpy(out, store_.data(r), static_cast<size_t>(r.bytes));
      return Status::Ok();
    }
    const IoRequest q{IoRequest::Op::kRead, store_.file(r.buffer), static_cast<uint64_t>(r.offset), out, static_cast<size_t>(r.bytes)};
    return engines_[static_cast<int>(stream)]->Run({&q, 1});
  }
  Status WriteRegion(const Region& r, const std::byte* in, Stream stream = Stream::kCompute) {
    if (store_.in_memory(r.buffer)) {
      CopyBytes(store_.data(r), in, static_cast<size_t>(r.bytes), o_.copy_threads);
      return Status::Ok();
    }
    const IoRequest q{IoRequest::Op::kWrite, store_.file(r.buffer), static_cast<uint64_t>(r.offset),
                      const_cast<std::byte*>(in), static_cast<size_t>(r.bytes)};
    return engines_[static_cast<int>(stream)]->Run({&q, 1});
  }

  // Initial weights from the workload (the seed alone: the same whatever
  // the placement), written where the plan keeps them.
  Status Init() {
    const int64_t N = p_.world_size;
    for (size_t gi = 0; gi < p_.param_groups.size(); ++gi) {
      const PlanParamGroup& g = p_.param_groups[gi];
      const int64_t part = g.partition_elements.v;
      // The whole group, padded to N partitions with zeros.
      std::vector<float> w = wl_->InitGroup(static_cast<int>(gi));
      w.resize(static_cast<size_t>(std::max(g.elements.v, part * (p_.zero_stage >= 1 ? N : 1))), 0.0f);
      // fp32 master: this rank's partition of the flat optimizer state.
      const int64_t shard = p_.zero_stage >= 1 ? rank_ * part : 0;
      STRATA_RETURN_IF_ERROR(WriteRegion({MasterBuffer(), g.flat_offset.v * 4, part * 4},
                                         reinterpret_cast<const std::byte*>(w.data() + shard)));
      // Low precision: the whole group (replica, persistent) or the partition.
      const bool whole = p_.zero_stage < 3 || g.persistent;
      const int64_t n = whole ? g.elements.v : part, from = whole ? 0 : rank_ * part;
      std::vector<std::byte> low(static_cast<size_t>(n * lp_.bytes));
      for (int64_t i = 0; i < n; ++i) lp_.Store(low.data(), static_cast<size_t>(i), w[static_cast<size_t>(from + i)]);
      STRATA_RETURN_IF_ERROR(WriteRegion({g.home_buffer, g.home_offset.v, static_cast<int64_t>(low.size())}, low.data()));
    }
    return Status::Ok();
  }
  BufferId MasterBuffer() const {
    for (const Buffer& b : p_.buffers)
      if (b.kind == StateKind::kMaster32 && b.resident) return b.id;
    return -1;
  }

  Status Execute(const Op& op) {
    switch (op.kind) {
      case OpKind::kForward: return Forward(op);
      case OpKind::kBackward: return Backward(op);
      case OpKind::kOptimizerStep: return Step(op);
      default: break;
    }
    if (op.moves.empty() && op.bytes.v > 0)
      return Status::Internal("op moves bytes but the plan gives it no data layout");
    for (const Move& m : op.moves) {
      const bool collective = op.kind == OpKind::kAllGather || op.kind == OpKind::kReduceScatter || op.kind == OpKind::kAllReduce;
      STRATA_RETURN_IF_ERROR(collective && p_.world_size > 1 ? Collective(op, m) : DoMove(m, op.stream));
    }
    return Status::Ok();
  }

  // Collectives over MPI, on memory buffers. Reductions sum in fp32 and
  // average over the ranks; the result is rounded to the plan's precision
  // before it is accumulated, as a gradient arriving from a copy would be.
  Status Collective(const Op& op, const Move& m) {
    if (!store_.in_memory(m.src.buffer) || !store_.in_memory(m.dst.buffer))
      return Status::Internal("collective on NVMe");
    const size_t N = static_cast<size_t>(p_.world_size);
    if (op.kind == OpKind::kAllGather) {
      if (static_cast<size_t>(m.dst.bytes) != N * static_cast<size_t>(m.src.bytes)) return Status::Internal("allgather sizes");
      comm_->Allgather(store_.data(m.src), store_.data(m.dst), static_cast<size_t>(m.src.bytes));
      return Status::Ok();
    }
    const size_t n_src = static_cast<size_t>(m.src.bytes / lp_.bytes);
    std::vector<float> in(n_src);
    for (size_t i = 0; i < n_src; ++i) in[i] = lp_.Load(store_.data(m.src), i);
    std::vector<float> out;
    if (op.kind == OpKind::kReduceScatter) {
      out.resize(n_src / N);
      comm_->ReduceScatterSum(in.data(), out.data(), out.size());
    } else {
      comm_->AllreduceSum(in.data(), in.size());
      out = std::move(in);
    }
    std::byte* dst = store_.data(m.dst);
    std::byte rounded[4];
    for (size_t i = 0; i < out.size(); ++i) {
      lp_.Store(rounded, 0, out[i] / static_cast<float>(N));
      const float v = m.accumulate ? lp_.Load(dst, i) + lp_.Load(rounded, 0) : lp_.Load(rounded, 0);
      lp_.Store(dst, i, v);
      if (!std::isfinite(lp_.Load(dst, i))) overflow_ = true;
    }
    return Status::Ok();
  }

  Status DoMove(const Move& m, Stream stream) {
    if (m.src.bytes != m.dst.bytes) return Status::Internal("move sizes differ");
    const bool src_mem = store_.in_memory(m.src.buffer), dst_mem = store_.in_memory(m.dst.buffer);
    if (!m.accumulate) {
      if (src_mem) return WriteRegion(m.dst, store_.data(m.src), stream);
      if (dst_mem) return ReadRegion(m.src, store_.data(m.dst), stream);
      return Status::Internal("NVMe to NVMe move");
    }
    if (!src_mem || !dst_mem) return Status::Internal("accumulating move on NVMe");
    const std::byte* a = store_.data(m.src);
    std::byte* b = store_.data(m.dst);
    const size_t n = static_cast<size_t>(m.dst.bytes) / static_cast<size_t>(lp_.bytes);
    for (size_t i = 0; i < n; ++i) {
      const float v = lp_.Load(b, i) + lp_.Load(a, i);
      lp_.Store(b, i, v);
      if (!std::isfinite(lp_.Load(b, i))) overflow_ = true;
    }
    return Status::Ok();
  }

  std::vector<float> Weights(const Op& op) {
    const size_t n = static_cast<size_t>(op.param.bytes) / static_cast<size_t>(lp_.bytes);
    std::vector<float> w(n);
    const std::byte* src = store_.data(op.param);
    for (size_t i = 0; i < n; ++i) w[i] = lp_.Load(src, i);
    return w;
  }

  Status Forward(const Op& op) {
    const std::vector<float> w = op.param.valid() ? Weights(op) : std::vector<float>();
    wl_->Forward(op.micro_step, op.module, w.empty() ? nullptr : w.data());
    return Status::Ok();
  }

  Status Backward(const Op& op) {
    const std::vector<float> w = op.param.valid() ? Weights(op) : std::vector<float>();
    std::vector<float> dw(op.grad.valid() ? static_cast<size_t>(op.grad.bytes / lp_.bytes) : 0, 0.0f);
    loss_sum_ += wl_->Backward(op.micro_step, op.module, w.empty() ? nullptr : w.data(), dw.empty() ? nullptr : dw.data(),
                               scale_);
    if (dw.empty()) return Status::Ok();
    // The micro step's gradient is produced in the plan's precision (as a
    // 16-bit backward would), then accumulated: the same roundings whatever
    // buffer, tier or copy the accumulation happens in.
    std::byte* g = store_.data(op.grad);
    std::byte rounded[4];
    for (size_t i = 0; i < dw.size(); ++i) {
      lp_.Store(rounded, 0, dw[i]);
      const float v = lp_.Load(g, i) + lp_.Load(rounded, 0);
      lp_.Store(g, i, v);
      if (!std::isfinite(lp_.Load(g, i))) overflow_ = true;
    }
    return Status::Ok();
  }

  Status Step(const Op& op) {
    if (!overflow_agreed_) {  // every rank skips, or none does
      overflow_ = comm_->AnyTrue(overflow_);
      overflow_agreed_ = true;
    }
    const size_t n = static_cast<size_t>(op.elements.v);
    auto* master = reinterpret_cast<float*>(store_.data(op.master));
    auto* m1 = reinterpret_cast<float*>(store_.data(op.exp_avg));
    auto* m2 = reinterpret_cast<float*>(store_.data(op.exp_avg_sq));
    std::vector<float> g(n);
    const std::byte* gl = store_.data(op.grad_in);
    for (size_t i = 0; i < n; ++i) g[i] = lp_.Load(gl, i);
    std::vector<std::byte> out(n * static_cast<size_t>(lp_.bytes));
    if (!overflow_) {
      const AdamStepConsts c = MakeAdamStep(AdamConfig{}, adam_steps_ + 1, 1.0f / scale_);
      const bool low = lp_.p != Precision::kFp32;
      CpuAdamStep({master, g.data(), m1, m2, low ? reinterpret_cast<uint16_t*>(out.data()) : nullptr, lp_.p, n}, c,
                  o_.adam_threads);
      if (!low) std::memcpy(out.data(), master, n * 4);
    } else {
      for (size_t i = 0; i < n; ++i) lp_.Store(out.data(), i, master[i]);  // skipped: weights unchanged
    }
    for (const Move& mv : op.moves) {
      if (mv.src.buffer != kOpOutput) continue;
      std::memcpy(store_.data(mv.dst), out.data() + mv.src.offset, static_cast<size_t>(mv.dst.bytes));
    }
    return Status::Ok();
  }

  // Gradients start from zero each iteration; the loss scale moves as
  // DeepSpeed's dynamic scaler does (fp16 only).
  void EndIteration(RunResult& r) {
    for (const Buffer& b : p_.buffers)
      if (b.resident && b.kind == StateKind::kGrad && b.tier != Tier::kNvme)
        std::memset(store_.data({b.id, 0, b.bytes.v}), 0, static_cast<size_t>(b.bytes.v));
    if (overflow_) {
      ++r.skipped_steps;
      good_steps_ = 0;
      if (lp_.p == Precision::kFp16) scale_ = std::max(1.0f, scale_ / 2);
      return;
    }
    ++adam_steps_;
    if (lp_.p == Precision::kFp16 && ++good_steps_ == 1000) {
      scale_ *= 2;
      good_steps_ = 0;
    }
  }

  // SHA-256 of the fp32 master weights, group by group, partitions gathered
  // in rank order without padding: the same for any number of ranks' layout.
  Result<std::string> Digest() {
    Sha256 h;
    const BufferId master = MasterBuffer();
    const bool sharded = p_.zero_stage >= 1 && p_.world_size > 1;
    for (const PlanParamGroup& g : p_.param_groups) {
      const int64_t part = g.partition_elements.v;
      std::vector<std::byte> mine(static_cast<size_t>(part) * 4);
      STRATA_RETURN_IF_ERROR(ReadRegion({master, g.flat_offset.v * 4, part * 4}, mine.data()));
      std::vector<std::byte> all = mine;
      if (sharded) {
        all.resize(mine.size() * static_cast<size_t>(p_.world_size));
        comm_->Allgather(mine.data(), all.data(), mine.size());
      }
      h.Update(all.data(), static_cast<size_t>(g.elements.v) * 4);
    }
    return comm_->Broadcast(Sha256::Hex(h.Finish()));
  }

  const Scenario& s_;
  const Plan& p_;
  RunOptions o_;
  Env* env_;
  BufferStore store_;
  LowPrecision lp_;
  std::unique_ptr<IoEngine> engines_[kNumStreams];
  std::unique_ptr<Workload> wl_;  // touched by the compute stream only
  std::mutex span_mu_;
  std::vector<OpSpan> spans_;
  double loss_sum_ = 0;
  std::atomic<bool> overflow_{false};
  bool overflow_agreed_ = false;
  Comm* comm_ = nullptr;
  int rank_ = 0;
  float scale_ = 1.0f;
  int64_t adam_steps_ = 0;
  int good_steps_ = 0;

 public:
  void SetScale(float s) { scale_ = s; }
};

}  // namespace

Result<RunResult> RunTraining(const Scenario& scenario, const Plan& plan, const RunOptions& options) {
  Env* env = options.env != nullptr ? options.env : PosixEnv();
  std::string dir = options.nvme_dir;
  if (dir.empty()) dir = scenario.zero.offload_param.nvme_path;
  if (dir.empty()) dir = scenario.zero.offload_optimizer.nvme_path;
  if (dir.empty()) dir = "/tmp/strata_nvme";
  Runner r(scenario, plan, options, env, dir);
  // DeepSpeed's initial_scale_power 16 for fp16; bf16 and fp32 need none.
  r.SetScale(scenario.training.precision == Precision::kFp16 ? 65536.0f : 1.0f);
  return r.Run();
}

}  // namespace strata::exec
