// The plan interpreter: a worker per stream runs the plan's ops on this
// rank's buffers (the backend's tier-capped memory, NVMe files through the
// Env's engines). Every touch of tier memory goes through the backend
// (backend.h): copies, accumulations, the model's kernels, collectives and
// the Adam step are calls on the op's stream, synchronized by an event
// before the op counts as done. The interpreter never dereferences tier
// memory itself, so it runs unchanged on a device backend.
#include "strata/executor/runner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <functional>
#include <map>
#include <thread>

#include "runtime/checkpoint.h"
#include "host/convert.h"
#include "devmodel/device_model.h"
#include "runtime/storage.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"
#include "strata/executor/interrupt.h"
#include "strata/executor/sha256.h"

namespace strata::exec {
namespace {

class Runner {
 public:
  // `dp`, `tp`: this rank's data-parallel and tensor-parallel groups (the
  // world, and null, without tensor or pipeline parallelism).
  Runner(const Scenario& s, const Plan& p, const RunOptions& o, Env* env, Backend* be, Comm* dp, Comm* tp, std::string dir)
      : s_(s), p_(p), o_(o), env_(env), be_(be), store_(p, env, be, std::move(dir), Comm::World().rank(), o.keep_swap_files),
        prec_(s.training.precision), lp_bytes_(BytesPerElement(s.training.precision)), dp_(dp), tp_(tp) {}

  Result<RunResult> Run() {
    comm_ = &Comm::World();  // RunTraining checked it is the plan's world
    rank_ = comm_->rank();
    stage_ = p_.StageOf(rank_);
    drank_ = p_.DataRank(rank_);
    dsize_ = p_.data_parallel();
    if (dp_->size() != dsize_ || dp_->rank() != drank_)
      return Status::Internal("the data-parallel communicator is not the plan's group");
    for (const Op& op : p_.ops)
      if (op.stage == stage_) ops_.push_back(op.id);
    for (size_t gi = 0; gi < p_.param_groups.size(); ++gi)
      if (p_.buffers[p_.param_groups[gi].home_buffer].stage == stage_) groups_.push_back(static_cast<int>(gi));
    if (groups_.empty()) return Status::Internal("pipeline stage " + std::to_string(stage_) + " holds no parameters");
    flat_ = p_.pipeline > 1 && !p_.stage_flat_partition.empty() ? p_.stage_flat_partition[static_cast<size_t>(stage_)].v
                                                                 : p_.flat_partition.v;
    ModelOptions mo;
    mo.seed = o_.seed;
    mo.rank = drank_;
    mo.tensor_rank = tp_ != nullptr ? tp_->rank() : 0;
    mo.text_path = o_.text_path;
    auto model = be_->NewModel(s_, p_, mo);
    if (!model.ok()) return model.status();
    model_ = std::move(*model);
    STRATA_RETURN_IF_ERROR(store_.Open());
    // An engine and a backend stream per plan stream: neither is shared
    // between threads.
    for (int st = 0; st < kNumStreams; ++st) {
      auto engine = env_->NewIoEngine(o_.engine, s_.aio);
      if (!engine.ok()) return engine.status();
      engines_[st] = std::move(*engine);
      auto stream = be_->NewStream(static_cast<Stream>(st));
      if (!stream.ok()) return stream.status();
      streams_[st] = std::move(*stream);
    }
    RunResult r;
    STRATA_RETURN_IF_ERROR(Init(r));
    const int start = r.first_step;
    if (start >= o_.steps)
      return Status::InvalidArgument("nothing to run: the checkpoint '" + r.resumed_from + "' is at step " +
                                     std::to_string(start) + " and --steps is " + std::to_string(o_.steps) +
                                     " (steps count from the first, the checkpoint's included)");
    double total = 0, bound = 0, first_bound = 0;
    struct StepSpans {
      double time;
      int index;
      std::vector<OpSpan> spans;
    };
    std::vector<StepSpans> steps;  // median_timeline candidates
    bool kept_applied = false;     // steps holds applied steps only
    for (int step = start; step < o_.steps; ++step) {
      if (o_.before_step) STRATA_RETURN_IF_ERROR(o_.before_step(step));
      model_->StartStep(step);
      spans_.clear();
      loss_sum_ = 0;
      overflow_ = false;
      overflow_agreed_ = false;
      const double t0 = env_->NowSeconds();
      STRATA_RETURN_IF_ERROR(o_.parallel ? RunParallel(t0) : RunSequential(t0));
      for (OpId id : ops_) {
        const Op& op = p_.ops[id];
        r.bytes_moved[static_cast<int>(LinkClassOf(op.kind))] += Bytes(OpBytesOnRank(op, drank_));
      }
      const double it = env_->NowSeconds() - t0;
      total += it;
      r.step_time_s.push_back(it);
      const double busiest = BusiestResource();
      bound += busiest;
      if (step == start) first_bound = busiest;
      comm_->FlushSends();
      // The last pipeline stage computes the losses, each tensor-parallel
      // rank the same; the mean over the data-parallel ranks' micro batches.
      r.losses.push_back(comm_->AllreduceSum(loss_sum_) / p_.micro_steps / dsize_ / (tp_ != nullptr ? tp_->size() : 1));
      r.loss_scale.push_back(scale_);
      r.step_skipped.push_back(overflow_);
      STRATA_RETURN_IF_ERROR(EndIteration(r));
      if (o_.save_every > 0 && (step + 1) % o_.save_every == 0) STRATA_RETURN_IF_ERROR(Save(r, step + 1));
      if (o_.after_step) STRATA_RETURN_IF_ERROR(o_.after_step(step, r));
      // The warm-up step, and skipped steps once an applied one is kept, are
      // no candidates for the median.
      if (o_.median_timeline && step > start) {
        const bool applied = !r.step_skipped.back();
        if (applied && !kept_applied) {
          steps.clear();
          kept_applied = true;
        }
        if (applied || !kept_applied) steps.push_back({it, step, spans_});
      }
    }
    r.timeline_step = o_.steps - 1;
    // The first step is a warm-up (files, page faults, caches): the mean is
    // over the steps after it, when there are any.
    if (const int ran = o_.steps - start; ran > 1) {
      r.iteration_time_s = (total - r.step_time_s[static_cast<size_t>(start)]) / (ran - 1);
      r.busiest_as_run_s = (bound - first_bound) / (ran - 1);
    } else {
      r.iteration_time_s = total;
      r.busiest_as_run_s = bound;
    }
    for (Tier t : kAllTiers) r.peak[static_cast<int>(t)] = store_.peak(t);
    auto digest = Digest();
    if (!digest.ok()) return digest.status();
    r.weights_digest = *digest;
    r.swap_verified_bytes = store_.checksums().verified_bytes();
    r.swap_unverified_bytes = store_.checksums().unverified_bytes();
    if (!steps.empty()) {
      // The step of median iteration time (the upper median for an even count).
      std::sort(steps.begin(), steps.end(), [](const StepSpans& a, const StepSpans& b) { return a.time < b.time; });
      StepSpans& m = steps[steps.size() / 2];
      spans_ = std::move(m.spans);
      r.timeline_step = m.index;
    }
    r.timeline = BuildTimeline(p_, spans_, "run");
    return r;
  }

 private:
  // The busiest resource of this step as it ran: its busy time.
  // Each stream runs one op at a time, so it is a resource; when the
  // hardware says NVMe reads and writes share the device
  // (nvme.readwrite_bandwidth), the device is one resource, busy while
  // either direction is (the union of their spans).
  double BusiestResource() const {
    double busy[kNumStreams] = {};
    std::vector<std::pair<double, double>> nvme;
    for (const OpSpan& sp : spans_) {
      const Stream st = p_.ops[sp.op].stream;
      busy[static_cast<int>(st)] += sp.end_s - sp.start_s;
      if (st == Stream::kNvmeRead || st == Stream::kNvmeWrite) nvme.emplace_back(sp.start_s, sp.end_s);
    }
    double most = *std::max_element(std::begin(busy), std::end(busy));
    if (s_.hardware.nvme.readwrite_bandwidth.bytes_per_s > 0) {
      std::sort(nvme.begin(), nvme.end());
      double device = 0, until = -1;
      for (auto [a, b] : nvme) {
        if (a > until) device += b - a, until = b;
        else if (b > until) device += b - until, until = b;
      }
      most = std::max(most, device);
    }
    return most;
  }

  static Status Prefix(const Op& op, const Status& st) {
    const std::string msg = "op " + std::to_string(op.id) + " '" + op.name + "': " + st.message();
    switch (st.code()) {
      case Status::Code::kIOError: return Status::IOError(msg);
      case Status::Code::kInfeasible: return Status::Infeasible(msg);
      case Status::Code::kInvalidArgument: return Status::InvalidArgument(msg);
      case Status::Code::kCancelled: return st;
      default: return Status::Internal(msg);
    }
  }

  // One op: allocations, the work, frees; its span is recorded.
  Status RunOp(const Op& op, double t0) {
    if (const int sig = StopSignal())
      return Status::Cancelled(std::string("stopped by ") + (sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal") +
                               " before op " + std::to_string(op.id) + " '" + op.name + "'");
    const double a = env_->NowSeconds() - t0;
    for (BufferId b : op.allocs) STRATA_RETURN_IF_ERROR(store_.Allocate(b, op));
    Status st = Execute(op);
    // Done before frees and dependents; after a failure too, so that nothing
    // the op issued still runs when the buffers go.
    const Status synced = Sync(op.stream);
    temps_[static_cast<int>(op.stream)].clear();
    if (st.ok()) st = synced;
    if (!st.ok()) return Prefix(op, st);
    if (overflow_seen_[static_cast<int>(op.stream)]) overflow_ = true;
    for (BufferId b : op.frees) store_.Free(b);
    std::lock_guard<std::mutex> l(span_mu_);
    spans_.push_back({rank_, op.id, a, env_->NowSeconds() - t0});
    return Status::Ok();
  }

  Status RunSequential(double t0) {
    for (OpId id : ops_) STRATA_RETURN_IF_ERROR(RunOp(p_.ops[id], t0));
    return Status::Ok();
  }

  // A worker per stream; an op starts when its deps are done (its stream
  // predecessor is done by construction). A finished op wakes only the
  // workers whose next op it may have unblocked (one condition variable per
  // stream: waking all seven on a two-core host delays the one that can
  // run). The first error stops everyone.
  Status RunParallel(double t0) {
    const size_t n = p_.ops.size();
    std::vector<char> done(n, 0);
    std::mutex mu;
    std::condition_variable cv[kNumStreams];
    Status first;
    bool failed = false;
    std::vector<std::vector<OpId>> per_stream(kNumStreams);
    for (OpId id : ops_) per_stream[static_cast<int>(p_.ops[id].stream)].push_back(id);
    // Streams waiting on each op. A receive's dependency on its send (on
    // another stage's rank) is the message itself: not waited for here.
    std::vector<std::vector<int>> waiters(n);
    for (OpId id : ops_) {
      const Op& op = p_.ops[id];
      for (OpId d : op.deps)
        if (p_.ops[d].stream != op.stream && p_.ops[d].stage == stage_) waiters[d].push_back(static_cast<int>(op.stream));
    }
    std::vector<std::thread> workers;
    for (int sidx = 0; sidx < kNumStreams; ++sidx) {
      if (per_stream[sidx].empty()) continue;
      workers.emplace_back([&, sidx] {
        S(static_cast<Stream>(sidx)).OnWorkerThread();
        for (OpId id : per_stream[sidx]) {
          const Op& op = p_.ops[id];
          {
            std::unique_lock<std::mutex> l(mu);
            cv[sidx].wait(l, [&] {
              if (failed) return true;
              for (OpId d : op.deps)
                if (!done[d] && p_.ops[d].stage == stage_) return false;
              return true;
            });
            if (failed) return;
          }
          Status st = RunOp(op, t0);
          std::lock_guard<std::mutex> l(mu);
          if (!st.ok()) {
            if (!failed) first = st;
            failed = true;
            for (auto& c : cv) c.notify_all();
            return;
          }
          done[id] = 1;
          for (int w : waiters[id]) cv[w].notify_one();
        }
      });
    }
    for (auto& w : workers) w.join();
    return first;
  }

  DeviceStream& S(Stream s) { return *streams_[static_cast<int>(s)]; }
  Status Sync(Stream s) {
    auto ev = S(s).Record();
    if (!ev.ok()) return ev.status();
    return (*ev)->Synchronize();
  }
  Status Io(IoRequest::Op kind, const Region& r, std::byte* mem, Stream stream) {
    const IoRequest q{kind, store_.file(r.buffer), static_cast<uint64_t>(r.offset), mem, static_cast<size_t>(r.bytes)};
    return RunIo(*engines_[static_cast<int>(stream)], {&q, 1});
  }
  // Every NVMe transfer: the engine, with the swap checksums (see
  // swap_checksums.h) when the options keep them. Writes are hashed before
  // they are issued (their memory is stable until done), reads checked
  // before anything uses them.
  Status RunIo(IoEngine& engine, std::span<const IoRequest> io) {
    if (!o_.swap_checksums) return engine.Run(io);
    SwapChecksums& sums = store_.checksums();
    std::vector<uint64_t> hash(io.size());
    for (size_t i = 0; i < io.size(); ++i)
      if (io[i].op == IoRequest::Op::kWrite)
        hash[i] = SwapChecksums::Hash({static_cast<const std::byte*>(io[i].buffer), io[i].length});
    const Status st = engine.Run(io);
    for (size_t i = 0; i < io.size(); ++i) {
      const IoRequest& q = io[i];
      if (q.op == IoRequest::Op::kWrite) {
        if (st.ok()) sums.Wrote(q.file, q.offset, q.length, hash[i]);
        else sums.Lost(q.file, q.offset, q.length);
      } else if (st.ok()) {
        STRATA_RETURN_IF_ERROR(sums.Verify(q.file, q.offset, {static_cast<const std::byte*>(q.buffer), q.length}));
      }
    }
    return st;
  }
  // Host bytes to and from a region, wherever it lives; done on return.
  // Used outside the iteration (initial weights, digest).
  Status HostToRegion(const Region& r, const std::byte* in) {
    if (!store_.in_memory(r.buffer)) return Io(IoRequest::Op::kWrite, r, const_cast<std::byte*>(in), Stream::kCompute);
    STRATA_RETURN_IF_ERROR(S(Stream::kCompute).Copy(store_.data(r), in, static_cast<size_t>(r.bytes)));
    return Sync(Stream::kCompute);
  }
  Status RegionToHost(const Region& r, std::byte* out) {
    if (!store_.in_memory(r.buffer)) return Io(IoRequest::Op::kRead, r, out, Stream::kCompute);
    STRATA_RETURN_IF_ERROR(S(Stream::kCompute).Copy(out, store_.data(r), static_cast<size_t>(r.bytes)));
    return Sync(Stream::kCompute);
  }

  // The starting state: the model's initial weights, or a checkpoint's
  // weights, moments, step counters and loss scaler.
  Status Init(RunResult& r) {
    std::optional<LoadedCheckpoint> ck;
    if (!o_.resume_dir.empty()) {
      std::vector<StateSegment> want;
      for (const OwnSegment& o : OwnSegments()) want.push_back(o.seg);
      auto loaded = LoadCheckpoint(env_, o_.resume_dir, p_, want);
      if (!loaded.ok()) return loaded.status();
      ck = std::move(*loaded);
      const CheckpointScalars& sc = ck->scalars;
      r.first_step = sc.global_steps;
      r.resumed_from = ck->path;
      r.losses = sc.losses;
      r.loss_scale.assign(sc.loss_scales.begin(), sc.loss_scales.end());
      r.step_skipped = sc.step_skipped;
      r.skipped_steps = sc.skipped_steps;
      r.step_time_s.assign(sc.losses.size(), 0.0);
      adam_steps_ = sc.adam_steps;
      scale_ = sc.loss_scale;
      good_steps_ = sc.good_steps;
    }
    STRATA_RETURN_IF_ERROR(InitWeights(ck ? &ck->master : nullptr));
    if (!ck) return Status::Ok();
    // The moments, where this plan keeps them (zero otherwise).
    size_t at = 0;
    for (const OwnSegment& o : OwnSegments()) {
      STRATA_RETURN_IF_ERROR(HostToRegion(o.exp_avg, reinterpret_cast<const std::byte*>(ck->exp_avg.data() + at)));
      STRATA_RETURN_IF_ERROR(HostToRegion(o.exp_avg_sq, reinterpret_cast<const std::byte*>(ck->exp_avg_sq.data() + at)));
      at += static_cast<size_t>(o.seg.count);
    }
    return Status::Ok();
  }

  // This rank's share of the optimizer state: group segments and the
  // regions of master, exp_avg and exp_avg_sq holding each (stages 1-2: its
  // slice of the flat buffer; else its partition of each group, or all of
  // it unpartitioned, which only rank 0 reports when every rank holds a
  // replica).
  struct OwnSegment {
    StateSegment seg;
    Region master, exp_avg, exp_avg_sq;
  };
  std::vector<OwnSegment> OwnSegments() const {
    std::vector<OwnSegment> out;
    auto at = [](BufferId b, Bytes base, int64_t skip, int64_t n) { return Region{b, base.v + skip * 4, n * 4}; };
    const int64_t N = dsize_;
    if (const int64_t S = flat_; S > 0) {
      const PlanParamGroup& g0 = p_.param_groups[static_cast<size_t>(groups_.front())];
      for (int gi : groups_) {
        const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
        const int64_t lo = std::max(g.flat_offset.v, drank_ * S), hi = std::min(g.flat_offset.v + g.elements.v, drank_ * S + S);
        if (lo >= hi) continue;
        const int64_t skip = lo - drank_ * S, n = hi - lo;
        out.push_back({{static_cast<int>(gi), lo - g.flat_offset.v, n}, at(g0.master_buffer, g0.master_offset, skip, n),
                       at(g0.exp_avg_buffer, g0.exp_avg_offset, skip, n), at(g0.exp_avg_sq_buffer, g0.exp_avg_sq_offset, skip, n)});
      }
      return out;
    }
    const bool sharded = p_.zero_stage >= 1 && N > 1;
    if (!sharded && drank_ != 0) return out;
    for (int gi : groups_) {
      const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
      const int64_t part = g.partition_elements.v, from = sharded ? drank_ * part : 0;
      const int64_t n = std::min(g.elements.v, from + part) - from;
      if (n > 0)
        out.push_back({{static_cast<int>(gi), from, n}, at(g.master_buffer, g.master_offset, 0, n),
                       at(g.exp_avg_buffer, g.exp_avg_offset, 0, n), at(g.exp_avg_sq_buffer, g.exp_avg_sq_offset, 0, n)});
    }
    return out;
  }

  // Writes a checkpoint after `steps` steps (every rank, collectively).
  Status Save(RunResult& r, int steps) {
    RankState st;
    for (const OwnSegment& o : OwnSegments()) {
      st.segments.push_back(o.seg);
      const size_t base = st.master.size(), n = static_cast<size_t>(o.seg.count);
      for (auto [v, r] : {std::pair{&st.master, o.master}, {&st.exp_avg, o.exp_avg}, {&st.exp_avg_sq, o.exp_avg_sq}}) {
        v->resize(base + n);
        STRATA_RETURN_IF_ERROR(RegionToHost(r, reinterpret_cast<std::byte*>(v->data() + base)));
      }
    }
    CheckpointScalars sc;
    sc.global_steps = steps;
    sc.adam_steps = adam_steps_;
    sc.loss_scale = scale_;
    sc.good_steps = good_steps_;
    sc.skipped_steps = r.skipped_steps;
    sc.losses = r.losses;
    sc.loss_scales.assign(r.loss_scale.begin(), r.loss_scale.end());
    sc.step_skipped = r.step_skipped;
    ++saves_;
    STRATA_RETURN_IF_ERROR(SaveCheckpoint(env_, o_.checkpoint_dir, p_, *comm_, sc, st, prec_ == Precision::kBf16,
                                          saves_ == o_.kill_in_save));
    r.checkpoints.push_back(o_.checkpoint_dir + "/global_step" + std::to_string(steps));
    return Status::Ok();
  }

  // Initial weights: the model's (the seed alone: the same whatever the
  // placement) or a checkpoint's, written where the plan keeps them.
  Status InitWeights(const std::vector<std::vector<float>>* from) {
    const int64_t N = dsize_;
    // Stages 1-2 (plan.h, flat_partition): the master is this rank's slice
    // of the whole flat buffer, written once every group is in it.
    const int64_t S = flat_;
    const bool cut = S > 0;
    std::vector<float> flat(static_cast<size_t>(S * N), 0.0f);
    for (int gi : groups_) {
      const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
      const int64_t part = g.partition_elements.v;
      std::vector<float> w = from != nullptr ? (*from)[gi] : model_->InitGroup(static_cast<int>(gi));
      if (cut) {
        std::copy(w.begin(), w.begin() + g.elements.v, flat.begin() + g.flat_offset.v);
      } else {
        // fp32 master: this rank's partition of the group, padded with zeros.
        w.resize(static_cast<size_t>(std::max(g.elements.v, part * (p_.zero_stage >= 1 ? N : 1))), 0.0f);
        const int64_t shard = p_.zero_stage >= 1 ? drank_ * part : 0;
        STRATA_RETURN_IF_ERROR(HostToRegion({g.master_buffer, g.master_offset.v, part * 4},
                                            reinterpret_cast<const std::byte*>(w.data() + shard)));
      }
      // Low precision: the whole group (replica, persistent) or the partition.
      const bool whole = p_.zero_stage < 3 || g.persistent;
      const int64_t n = whole ? g.elements.v : part, from = whole ? 0 : drank_ * part;
      std::vector<std::byte> low(static_cast<size_t>(n * lp_bytes_));
      FloatToLow(w.data() + from, low.data(), static_cast<size_t>(n), prec_);  // host data: the host kernel
      STRATA_RETURN_IF_ERROR(HostToRegion({g.home_buffer, g.home_offset.v, n * lp_bytes_}, low.data()));
    }
    if (cut) {
      const PlanParamGroup& g0 = p_.param_groups[static_cast<size_t>(groups_.front())];
      STRATA_RETURN_IF_ERROR(HostToRegion({g0.master_buffer, g0.master_offset.v, S * 4},
                                          reinterpret_cast<const std::byte*>(flat.data() + drank_ * S)));
    }
    return Status::Ok();
  }

  Status Execute(const Op& op) {
    switch (op.kind) {
      case OpKind::kForward: return Forward(op);
      case OpKind::kBackward: return Backward(op);
      case OpKind::kOptimizerStep: return Step(op);
      default: break;
    }
    if (IsPointToPoint(op.kind)) return op.moves.empty() ? Boundary(op) : TiedTransfer(op);
    if (op.operand != Operand::kNone) return TensorCollective(op);
    if (op.moves.empty() && op.bytes.v > 0)
      return Status::Internal("op moves bytes but the plan gives it no data layout");
    const bool collective = op.kind == OpKind::kAllGather || op.kind == OpKind::kReduceScatter || op.kind == OpKind::kAllReduce;
    // An op's file transfers go to the engine together (one queue kept full
    // across its regions), after its memory moves are issued.
    std::vector<IoRequest> io;
    bool issued = false;
    for (const Move& m : op.moves) {
      if (collective && dsize_ > 1) {
        // An allgather runs once per rank, with that rank's move; a
        // reduction to one rank involves every rank (plan.h, Move).
        if (op.kind == OpKind::kAllGather && m.rank >= 0 && m.rank != drank_) continue;
        STRATA_RETURN_IF_ERROR(Collective(op, m));
        issued = true;
        continue;
      }
      if (m.rank >= 0 && m.rank != drank_) continue;  // another rank's slice
      auto q = DoMove(op, m);
      if (!q.ok()) return q.status();
      if (q->file != nullptr) io.push_back(*q);
      else issued = true;
    }
    if (io.empty()) return Status::Ok();
    if (issued) STRATA_RETURN_IF_ERROR(Sync(op.stream));  // the stream's work done before the files see the memory
    // Requests sharing a 4 KiB block of a file, one of them a write, go in
    // separate batches: the engine bounces unaligned edges with a
    // read-modify-write of the whole block, which must not race.
    IoEngine& engine = *engines_[static_cast<int>(op.stream)];
    size_t begin = 0;
    for (size_t i = 1; i <= io.size(); ++i) {
      bool conflict = false;
      for (size_t j = begin; i < io.size() && j < i && !conflict; ++j) conflict = SharesBlock(io[i], io[j]);
      if (i < io.size() && !conflict) continue;
      STRATA_RETURN_IF_ERROR(RunIo(engine, std::span(io).subspan(begin, i - begin)));
      begin = i;
    }
    return Status::Ok();
  }
  static bool SharesBlock(const IoRequest& a, const IoRequest& b) {
    if (a.file != b.file || (a.op == IoRequest::Op::kRead && b.op == IoRequest::Op::kRead)) return false;
    constexpr uint64_t kBlock = 4096;
    const uint64_t a0 = a.offset / kBlock, a1 = (a.offset + a.length + kBlock - 1) / kBlock;
    const uint64_t b0 = b.offset / kBlock, b1 = (b.offset + b.length + kBlock - 1) / kBlock;
    return a0 < b1 && b0 < a1;
  }

  // Scratch memory in buffer b's tier for op's stream work, valid until the
  // op has synchronized (RunOp releases it then).
  Result<std::byte*> Temporary(const Op& op, BufferId b, size_t bytes) {
    auto mem = be_->Allocate(p_.buffers[b].tier, bytes, false);
    if (!mem.ok()) return mem.status();
    std::byte* at = mem->data();
    temps_[static_cast<int>(op.stream)].push_back(std::move(*mem));
    return at;
  }

  // Collectives on memory buffers (see DeviceStream: reductions sum in fp32,
  // average over the ranks and round to the plan's precision).
  Status Collective(const Op& op, const Move& m) {
    if (!store_.in_memory(m.src.buffer) || !store_.in_memory(m.dst.buffer))
      return Status::Internal("collective on NVMe");
    const int64_t N = dsize_;
    DeviceStream& st = S(op.stream);
    bool* of = &overflow_seen_[static_cast<int>(op.stream)];
    if (op.kind == OpKind::kAllGather) {
      if (m.dst.bytes != N * m.src.bytes) return Status::Internal("allgather sizes");
      if (m.src.buffer == m.dst.buffer) {
        // In place (DeepSpeed's all_gather_into_tensor of the flat buffer):
        // the shard is sent from a copy, as MPI needs disjoint buffers (in
        // the buffer's tier: device memory on a GPU backend).
        auto shard = Temporary(op, m.src.buffer, static_cast<size_t>(m.src.bytes));
        if (!shard.ok()) return shard.status();
        STRATA_RETURN_IF_ERROR(st.Copy(*shard, store_.data(m.src), static_cast<size_t>(m.src.bytes)));
        return st.AllGather(*shard, store_.data(m.dst), static_cast<size_t>(m.src.bytes));
      }
      return st.AllGather(store_.data(m.src), store_.data(m.dst), static_cast<size_t>(m.src.bytes));
    }
    if (op.kind == OpKind::kReduceScatter) {
      if (m.src.bytes != N * m.dst.bytes) return Status::Internal("reduce-scatter sizes");
      return st.ReduceScatter(store_.data(m.src), store_.data(m.dst), static_cast<size_t>(m.dst.bytes / lp_bytes_), prec_,
                              m.accumulate, of);
    }
    if (m.src.bytes != m.dst.bytes) return Status::Internal("allreduce sizes");
    if (m.rank >= 0 && m.rank != drank_) {
      // A reduction to another rank: this one contributes, keeps nothing.
      auto sink = Temporary(op, m.dst.buffer, static_cast<size_t>(m.dst.bytes));
      if (!sink.ok()) return sink.status();
      return st.AllReduce(store_.data(m.src), *sink, static_cast<size_t>(m.dst.bytes / lp_bytes_), prec_, false, of);
    }
    return st.AllReduce(store_.data(m.src), store_.data(m.dst), static_cast<size_t>(m.dst.bytes / lp_bytes_), prec_,
                        m.accumulate, of);
  }

  // NVMe traffic goes between a file and memory the host can address (the
  // planner stages it through CPU memory): returned as a request for the
  // op's engine batch. The rest is the stream's copy or accumulation
  // (returned request with no file).
  Result<IoRequest> DoMove(const Op& op, const Move& m) {
    const Stream stream = op.stream;
    const bool src_mem = store_.in_memory(m.src.buffer), dst_mem = store_.in_memory(m.dst.buffer);
    if (m.widen) {
      // Low precision to fp32 (gradients for the fp32 optimizer).
      if (m.dst.bytes * lp_bytes_ != m.src.bytes * 4 || m.accumulate) return Status::Internal("widening move sizes");
      if (!src_mem || !dst_mem) return Status::Internal("widening move on NVMe");
      STRATA_RETURN_IF_ERROR(S(stream).ToFloat(reinterpret_cast<float*>(store_.data(m.dst)), store_.data(m.src),
                                               static_cast<size_t>(m.dst.bytes / 4), prec_));
      return IoRequest{};
    }
    if (m.src.bytes != m.dst.bytes) return Status::Internal("move sizes differ");
    if (!src_mem && !dst_mem) return Status::Internal("NVMe to NVMe move");
    if (m.accumulate && (!src_mem || !dst_mem)) return Status::Internal("accumulating move on NVMe");
    if (src_mem && dst_mem) {
      // The CPU side of a copy to or from the GPU in pageable memory: staged.
      if (IsPageableMove(p_, op, m)) {
        STRATA_RETURN_IF_ERROR(StagedMove(m, stream));
        return IoRequest{};
      }
      if (m.accumulate)
        STRATA_RETURN_IF_ERROR(S(stream).Accumulate(store_.data(m.dst), store_.data(m.src),
                                                    static_cast<size_t>(m.dst.bytes / lp_bytes_), prec_,
                                                    &overflow_seen_[static_cast<int>(stream)]));
      else
        STRATA_RETURN_IF_ERROR(S(stream).Copy(store_.data(m.dst), store_.data(m.src), static_cast<size_t>(m.dst.bytes)));
      return IoRequest{};
    }
    const BufferId mem = src_mem ? m.src.buffer : m.dst.buffer;
    if (!store_.host_accessible(mem))
      return Status::Internal("NVMe transfer with '" + p_.buffers[mem].name + "', which the host cannot address on the " +
                              be_->name() + " backend: the plan must stage NVMe traffic through CPU memory");
    if (src_mem)
      return IoRequest{IoRequest::Op::kWrite, store_.file(m.dst.buffer), static_cast<uint64_t>(m.dst.offset),
                       store_.data(m.src), static_cast<size_t>(m.dst.bytes)};
    return IoRequest{IoRequest::Op::kRead, store_.file(m.src.buffer), static_cast<uint64_t>(m.src.offset),
                     store_.data(m.dst), static_cast<size_t>(m.src.bytes)};
  }

  // A copy between the GPU and pageable CPU memory, as CUDA makes it: chunk
  // by chunk through a pinned staging buffer (the stream's, reused in
  // stream order), one more pass over the bytes. Accumulating moves add
  // from the staging buffer.
  Status StagedMove(const Move& m, Stream stream) {
    static constexpr size_t kChunk = size_t{4} << 20;  // a multiple of every element size
    Memory& bounce = bounce_[static_cast<int>(stream)];
    if (bounce.data() == nullptr) {
      auto b = be_->Allocate(Tier::kCpu, kChunk, /*zeroed=*/false);
      if (!b.ok()) return b.status();
      bounce = std::move(*b);
    }
    DeviceStream& st = S(stream);
    const size_t total = static_cast<size_t>(m.dst.bytes);
    for (size_t off = 0; off < total; off += kChunk) {
      const size_t n = std::min(kChunk, total - off);
      STRATA_RETURN_IF_ERROR(st.Copy(bounce.data(), store_.data(m.src) + off, n));
      if (m.accumulate)
        STRATA_RETURN_IF_ERROR(st.Accumulate(store_.data(m.dst) + off, bounce.data(), n / static_cast<size_t>(lp_bytes_),
                                             prec_, &overflow_seen_[static_cast<int>(stream)]));
      else
        STRATA_RETURN_IF_ERROR(st.Copy(store_.data(m.dst) + off, bounce.data(), n));
    }
    return Status::Ok();
  }

  ModuleArgs Args(const Op& op) {
    ModuleArgs a;
    a.micro = op.micro_step;
    a.module = op.module;
    a.precision = prec_;
    for (const Region& r : op.params) {
      a.w.push_back(store_.data(r));
      a.w_elements.push_back(static_cast<size_t>(r.bytes / lp_bytes_));
    }
    for (const Region& r : op.grads) {
      a.grad.push_back(store_.data(r));
      a.grad_fresh.push_back(std::find(op.allocs.begin(), op.allocs.end(), r.buffer) != op.allocs.end());
    }
    return a;
  }
  Status Forward(const Op& op) {
    return model_->Forward(S(op.stream), Args(op));
  }
  // The loss is read after the op's event (the model accumulates into it).
  Status Backward(const Op& op) {
    return model_->Backward(S(op.stream), Args(op), scale_, &loss_sum_, &overflow_seen_[static_cast<int>(op.stream)]);
  }

  Status Step(const Op& op) {
    if (!overflow_agreed_) {  // every rank skips, or none does
      overflow_ = comm_->AnyTrue(overflow_);
      overflow_agreed_ = true;
    }
    const size_t n = static_cast<size_t>(op.elements.v);
    auto* master = reinterpret_cast<float*>(store_.data(op.master));
    DeviceStream& st = S(op.stream);
    // The new low-precision weights, beside the master, then copied out.
    auto out = be_->Allocate(p_.buffers[op.master.buffer].tier, n * static_cast<size_t>(lp_bytes_));
    if (!out.ok()) return out.status();
    Status status;
    if (!overflow_) {
      const AdamStepConsts c = MakeAdamStep(AdamConfig{}, adam_steps_ + 1, 1.0f / scale_);
      AdamArgs args{master, store_.data(op.grad_in), reinterpret_cast<float*>(store_.data(op.exp_avg)),
                    reinterpret_cast<float*>(store_.data(op.exp_avg_sq)), out->data(), prec_, n,
                    op.grad_in.bytes == static_cast<int64_t>(n) * 4};
      status = st.AdamStep(args, c);
    } else {
      status = st.FromFloat(out->data(), master, n, prec_);  // skipped: weights unchanged
    }
    for (const Move& mv : op.moves) {
      if (mv.src.buffer != kOpOutput || !status.ok() || (mv.rank >= 0 && mv.rank != drank_)) continue;
      status = st.Copy(store_.data(mv.dst), out->data() + mv.src.offset, static_cast<size_t>(mv.dst.bytes));
    }
    const Status synced = Sync(op.stream);  // before `out` is released, whatever happened
    return status.ok() ? synced : status;
  }

  // Gradients start from zero each iteration; the loss scale moves as
  // DeepSpeed's dynamic scaler does (fp16 only).
  Status EndIteration(RunResult& r) {
    for (const Buffer& b : p_.buffers)
      if (b.resident && b.kind == StateKind::kGrad && b.tier != Tier::kNvme && b.stage == stage_)
        STRATA_RETURN_IF_ERROR(S(Stream::kCompute).Zero(store_.data({b.id, 0, b.bytes.v}), static_cast<size_t>(b.bytes.v)));
    STRATA_RETURN_IF_ERROR(Sync(Stream::kCompute));
    for (bool& f : overflow_seen_) f = false;
    if (overflow_) {
      ++r.skipped_steps;
      good_steps_ = 0;
      if (prec_ == Precision::kFp16) scale_ = std::max(1.0f, scale_ / 2);
      return Status::Ok();
    }
    ++adam_steps_;
    if (prec_ == Precision::kFp16 && ++good_steps_ == 1000) {
      scale_ *= 2;
      good_steps_ = 0;
    }
    return Status::Ok();
  }

  // Message tags: a boundary's by micro step and direction (MPI keeps the
  // order of messages with one tag between two ranks, so wrapping is safe);
  // the tied tables' gradients and the digest's groups apart from them.
  static constexpr int kTiedTag = 16384, kDigestTag = 16385;

  // A stage boundary's activations or their gradient (plan.h: a send or
  // receive without moves), between the workload and the rank at this
  // rank's position in the peer stage. The host workloads keep activations
  // in fp32 and send them so (the plan counts them in its precision, as
  // Megatron sends them): a pipeline computes what one stage would, bit for
  // bit. The send returns once posted (Comm::Send), the receive once here.
  Status Boundary(const Op& op) {
    const int peer = p_.PeerRank(rank_, op.peer_stage);
    const bool grad = op.phase == Phase::kBackward;
    const int tag = (2 * op.micro_step + (grad ? 1 : 0)) % kTiedTag;
    const size_t n = static_cast<size_t>(op.bytes.v / lp_bytes_);
    if (op.kind == OpKind::kSend) {
      STRATA_RETURN_IF_ERROR(Sync(op.stream));  // the work computing it is done
      auto v = model_->TakeBoundary(op.micro_step, op.layer, grad);
      if (!v.ok()) return v.status();
      if (v->size() != n)
        return Status::Internal("the workload's boundary tensor has " + std::to_string(v->size()) +
                                " elements, the plan's " + std::to_string(n));
      comm_->Send(v->data(), n * sizeof(float), peer, tag);
      return Status::Ok();
    }
    std::vector<float> v(n);
    comm_->Recv(v.data(), n * sizeof(float), peer, tag);
    return model_->PutBoundary(op.micro_step, op.layer, grad, std::move(v));
  }

  // A tensor-parallel collective on the workload's activation (plan.h,
  // Operand): summed over the tensor-parallel group in fp32 (the host
  // workloads keep activations in fp32; the plan counts its precision).
  Status TensorCollective(const Op& op) {
    if (op.kind != OpKind::kAllReduce || tp_ == nullptr)
      return Status::InvalidArgument("tensor-parallel " + std::string(OpKindName(op.kind)) + " of the " +
                                     std::string(OperandName(op.operand)) +
                                     ": strata run executes the all-reduces of tensor parallelism without sequence "
                                     "parallelism or partitioned activations");
    STRATA_RETURN_IF_ERROR(Sync(op.stream));
    size_t total = 0;
    Status st = model_->TensorAllReduce(op.micro_step, op.module, op.operand, [&](float* data, size_t n, ReduceOp r) {
      total += n;
      if (r == ReduceOp::kMax) tp_->AllreduceMax(data, n);
      else tp_->AllreduceSum(data, n);
    });
    // The plan counts activations in its precision, the loss's statistics
    // in fp32 (core/model.cc).
    if (st.ok() && static_cast<int64_t>(total) * lp_bytes_ != op.bytes.v && static_cast<int64_t>(total) * 4 != op.bytes.v)
      return Status::Internal("the workload reduced " + std::to_string(total) + " values, the plan's all-reduce " +
                              std::to_string(op.bytes.v) + " bytes");
    return st;
  }

  // A tied table's gradient between the first and the last stage (moves on
  // the gradient buffer, plan.h): sent whole; the peer's added into ours
  // (received into a block of the destination's tier: Accumulate works on
  // stream memory).
  Status TiedTransfer(const Op& op) {
    const int peer = p_.PeerRank(rank_, op.peer_stage);
    DeviceStream& st = S(op.stream);
    for (const Move& m : op.moves) {
      const bool send = op.kind == OpKind::kSend;
      const Region& r = send ? m.src : m.dst;
      if (!store_.in_memory(r.buffer)) return Status::Internal("point-to-point transfer on NVMe");
      std::vector<std::byte> host(static_cast<size_t>(r.bytes));
      if (send) {
        STRATA_RETURN_IF_ERROR(st.Copy(host.data(), store_.data(r), host.size()));
        STRATA_RETURN_IF_ERROR(Sync(op.stream));
        comm_->Send(host.data(), host.size(), peer, kTiedTag);
        continue;
      }
      comm_->Recv(host.data(), host.size(), peer, kTiedTag);
      if (!m.accumulate) {
        STRATA_RETURN_IF_ERROR(st.Copy(store_.data(r), host.data(), host.size()));
        STRATA_RETURN_IF_ERROR(Sync(op.stream));
        continue;
      }
      auto tmp = be_->Allocate(p_.buffers[r.buffer].tier, host.size(), /*zeroed=*/false);
      if (!tmp.ok()) return tmp.status();
      STRATA_RETURN_IF_ERROR(st.Copy(tmp->data(), host.data(), host.size()));
      STRATA_RETURN_IF_ERROR(st.Accumulate(store_.data(r), tmp->data(), host.size() / static_cast<size_t>(lp_bytes_), prec_,
                                           &overflow_seen_[static_cast<int>(op.stream)]));
      STRATA_RETURN_IF_ERROR(Sync(op.stream));  // before tmp is released
    }
    return Status::Ok();
  }

  // SHA-256 of the fp32 master weights, group by group in the model's
  // order, partitions gathered in data-parallel rank order without padding:
  // the same for any data-parallel and pipeline layout of the ranks (with
  // tensor parallelism, each group's shards in tensor-parallel rank order). Pipeline stages send their groups
  // to rank 0; a table two stages hold (tied) counts once (the copies are
  // the same: their gradients are summed before either steps).
  Result<std::string> Digest() {
    const bool sharded = p_.zero_stage >= 1 && dsize_ > 1;
    // A master region of every data-parallel rank, in rank order.
    auto gather = [&](const Region& r) -> Result<std::vector<std::byte>> {
      std::vector<std::byte> mine(static_cast<size_t>(r.bytes));
      STRATA_RETURN_IF_ERROR(RegionToHost(r, mine.data()));
      if (!sharded) return mine;
      std::vector<std::byte> all(mine.size() * static_cast<size_t>(dsize_));
      dp_->Allgather(mine.data(), all.data(), mine.size());
      return all;
    };
    // This stage's groups, whole.
    std::map<int, std::vector<std::byte>> whole;
    if (flat_ > 0) {
      // Stages 1-2: every rank's slice is the whole flat buffer.
      const PlanParamGroup& g0 = p_.param_groups[static_cast<size_t>(groups_.front())];
      auto all = gather({g0.master_buffer, g0.master_offset.v, flat_ * 4});
      if (!all.ok()) return all.status();
      for (int gi : groups_) {
        const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
        const std::byte* at = all->data() + g.flat_offset.v * 4;
        whole[gi].assign(at, at + g.elements.v * 4);
      }
    } else {
      for (int gi : groups_) {
        const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
        auto all = gather({g.master_buffer, g.master_offset.v, g.partition_elements.v * 4});
        if (!all.ok()) return all.status();
        all->resize(static_cast<size_t>(g.elements.v) * 4);
        whole[gi] = std::move(*all);
      }
    }
    Sha256 h;
    std::map<std::string, int> first_stage;  // group name -> the stage first holding it
    const int T = tp_ != nullptr ? tp_->size() : 1;
    for (size_t gi = 0; gi < p_.param_groups.size(); ++gi) {
      const PlanParamGroup& g = p_.param_groups[gi];
      const int st = p_.buffers[g.home_buffer].stage;
      if (first_stage.emplace(g.name, st).first->second != st) continue;  // a tied copy
      const size_t bytes = static_cast<size_t>(g.elements.v) * 4;
      // Each tensor-parallel rank's shard, in rank order (the group's ranks
      // are consecutive: core/parallel.h), from the stage's first ranks.
      for (int t = 0; t < T; ++t) {
        const int from = p_.PeerRank(0, st) + t;
        if (rank_ == 0 && from == 0) {
          h.Update(whole[static_cast<int>(gi)].data(), bytes);
        } else if (rank_ == 0) {
          std::vector<std::byte> got(bytes);
          comm_->Recv(got.data(), bytes, from, kDigestTag);
          h.Update(got.data(), bytes);
        } else if (rank_ == from) {
          comm_->Send(whole[static_cast<int>(gi)].data(), bytes, 0, kDigestTag);
        }
      }
    }
    comm_->FlushSends();
    return comm_->Broadcast(rank_ == 0 ? Sha256::Hex(h.Finish()) : std::string());
  }

  const Scenario& s_;
  const Plan& p_;
  RunOptions o_;
  Env* env_;
  Backend* be_;
  BufferStore store_;
  Precision prec_;
  int64_t lp_bytes_;
  std::unique_ptr<IoEngine> engines_[kNumStreams];
  std::unique_ptr<DeviceStream> streams_[kNumStreams];
  Memory bounce_[kNumStreams];  // pinned staging for pageable copies, per stream (StagedMove)
  // Non-finite values seen by each stream's ops (its worker's only).
  bool overflow_seen_[kNumStreams] = {};
  std::unique_ptr<Model> model_;  // used by the compute stream only
  std::mutex span_mu_;
  std::vector<OpSpan> spans_;
  double loss_sum_ = 0;
  std::vector<Memory> temps_[kNumStreams];  // an op's scratch blocks (Temporary), per stream
  std::atomic<bool> overflow_{false};
  bool overflow_agreed_ = false;
  Comm* comm_ = nullptr;
  Comm* dp_;  // the data-parallel group's communicator
  Comm* tp_;  // the tensor-parallel group's (null without tensor parallelism)
  int rank_ = 0;
  int stage_ = 0;        // this rank's pipeline stage
  int drank_ = 0;        // its index in its data-parallel group
  int dsize_ = 1;        // the group's size
  std::vector<OpId> ops_;   // this stage's ops, in plan order
  std::vector<int> groups_;  // this stage's parameter groups
  int64_t flat_ = 0;     // this stage's flat partition (stages 1-2), else 0
  float scale_ = 1.0f;
  int64_t adam_steps_ = 0;
  int good_steps_ = 0;
  int saves_ = 0;

 public:
  void SetScale(float s) { scale_ = s; }
};

}  // namespace

Result<RunResult> RunTraining(const Scenario& scenario, const Plan& plan, const RunOptions& options) {
  const int tensor = std::max(1, scenario.parallelism.tensor);
  if (tensor > 1 && scenario.parallelism.sequence_parallel)
    return Status::InvalidArgument("parallelism.sequence_parallel: strata run executes tensor parallelism without it");
  if (tensor > 1 && scenario.training.partition_activations)
    return Status::InvalidArgument("activation_checkpointing.partition_activations: strata run executes tensor "
                                   "parallelism with whole checkpoints only");
  Comm& world = Comm::World();
  if (plan.world_size != world.size())
    return Status::InvalidArgument("the plan is for " + std::to_string(plan.world_size) + " ranks but " +
                                   std::to_string(world.size()) + " are running");
  // A checkpoint's files are per data-parallel rank (DeepSpeed's
  // zero_pp_rank_D_mp_rank_00): tensor shards and pipeline stages would
  // write the same segments.
  if ((plan.pipeline > 1 || tensor > 1) && (options.save_every > 0 || !options.resume_dir.empty()))
    return Status::InvalidArgument("checkpoints (--save-every, --resume) of tensor- or pipeline-parallel runs are not "
                                   "written yet: run without them, or with parallelism.tensor and pipeline 1");
  // ZeRO's collectives run in the data-parallel group (plan.groups[0]):
  // the world unless the pipeline splits it.
  std::unique_ptr<Comm> dp_split;
  Comm* dp = &world;
  if (plan.data_parallel() != world.size()) {
    if (options.backend != nullptr)
      return Status::InvalidArgument("a tensor- or pipeline-parallel run needs the host backend over its data-parallel group");
    const std::vector<int> group = plan.groups.empty() ? std::vector<int>{world.rank()} : plan.groups[0].RanksOf(world.rank());
    dp_split = world.Split(group.front(), world.rank());
    dp = dp_split.get();
  }
  // Tensor parallelism's all-reduces: in the "tp" group (consecutive ranks).
  std::unique_ptr<Comm> tp;
  for (const CommGroup& g : plan.groups)
    if (g.name == "tp" && g.size() > 1) tp = world.Split(g.RanksOf(world.rank()).front(), world.rank());
  Env* env = options.env != nullptr ? options.env : PosixEnv();
  // The swap directory: --nvme-dir, else the nvme_path of a section whose
  // device is nvme. None at all is an error, as in DeepSpeed
  // (partition_parameters.py asserts nvme_path is set for device nvme).
  std::string dir = options.nvme_dir;
  const ZeroConfig& z = scenario.zero;
  if (dir.empty() && z.offload_param.device == OffloadDevice::kNvme) dir = z.offload_param.nvme_path;
  if (dir.empty() && z.offload_optimizer.device == OffloadDevice::kNvme) dir = z.offload_optimizer.nvme_path;
  if (dir.empty())
    for (const Buffer& b : plan.buffers)
      if (b.tier == Tier::kNvme)
        return Status::InvalidArgument(
            "the plan keeps '" + b.name + "' on NVMe but no directory is given for its swap file: set "
            "zero_optimization.offload_param.nvme_path / offload_optimizer.nvme_path, or --nvme-dir "
            "(DeepSpeed refuses device nvme without nvme_path too)");
  std::unique_ptr<Backend> owned;
  Backend* backend = options.backend;
  if (backend == nullptr && options.backend_kind == BackendKind::kCuda) {
    auto cuda = NewCudaBackend({dp, -1});
    if (!cuda.ok()) return cuda.status();
    owned = std::move(*cuda);
  } else if (backend == nullptr) {
    owned = NewHostBackend({dp, options.copy_threads, options.adam_threads, options.compute_threads});
  }
  std::unique_ptr<Backend> emulated;
  if (backend == nullptr && options.backend_kind == BackendKind::kEmulated) {
    emulated = NewEmulatedDeviceBackend(owned.get());
    backend = emulated.get();
  }
  if (backend == nullptr) backend = owned.get();
  Runner r(scenario, plan, options, env, backend, dp, tp.get(), dir);
  // DeepSpeed's initial_scale_power 16 for fp16; bf16 and fp32 need none.
  r.SetScale(scenario.training.precision == Precision::kFp16 ? 65536.0f : 1.0f);
  return r.Run();
}

}  // namespace strata::exec
