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
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "devmodel/device_model.h"
#include "host/convert.h"
#include "io/striped_file.h"
#include "runtime/checkpoint.h"
#include "runtime/runner_impl.h"
#include "runtime/storage.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"
#include "strata/executor/interrupt.h"
#include "strata/executor/sha256.h"
#include "strata/plan/write_requests.h"

namespace strata::exec {
namespace detail {

Result<RunResult> Runner::Run() {
  comm_ = &Comm::World();  // RunTraining checked it is the plan's world
  rank_ = comm_->rank();
  stage_ = p_.StageOf(rank_);
  drank_ = p_.DataRank(rank_);
  dsize_ = p_.data_parallel();
  if (dp_->size() != dsize_ || dp_->rank() != drank_)
    return Status::Internal("the data-parallel communicator is not the plan's group");
  for (const Op& op : p_.ops)
    if (op.stage == stage_) {
      ops_.push_back(op.id);
      (op.phase == Phase::kStep ? step_ops_ : rest_ops_).push_back(op.id);
      if (p_.run.delayed_warmup >= 0 && op.kind == OpKind::kOptimizerStep && op.phase == Phase::kStep)
        pending_grads_ = op.grad_in.buffer;  // one for all the steps (the validator checks)
    }
  // A delayed update's swap (RunStep) needs its buffers here (the
  // validator checks the rest).
  if (const int g = p_.run.delayed_grads;
      p_.run.delayed_warmup >= 0 && (pending_grads_ < 0 || g < 0 || g >= static_cast<int>(p_.buffers.size()) ||
                                     p_.buffers[static_cast<size_t>(g)].stage != stage_))
    return Status::Internal("the plan's delayed_grads is not a buffer of pipeline stage " + std::to_string(stage_) +
                            " beside a step's gradients");
  for (size_t gi = 0; gi < p_.param_groups.size(); ++gi)
    if (p_.buffers[HomeOf(p_.param_groups[gi])].stage == stage_) groups_.push_back(static_cast<int>(gi));
  if (groups_.empty()) return Status::Internal("pipeline stage " + std::to_string(stage_) + " holds no parameters");
  flat_ = p_.pipeline > 1 && !p_.stage_flat_partition.empty() ? p_.stage_flat_partition[static_cast<size_t>(stage_)].v
                                                              : p_.flat_partition.v;
  ModelOptions mo;
  mo.seed = o_.seed;
  mo.rank = drank_;
  mo.tensor_rank = tp_ != nullptr ? tp_->rank() : 0;
  mo.text_path = o_.text_path;
  STRATA_ASSIGN_OR_RETURN(auto model, be_->NewModel(p_, mo));
  model_ = std::move(model);
  STRATA_RETURN_IF_ERROR(store_.Open());
  STRATA_RETURN_IF_ERROR(OpenCodecs());
  STRATA_RETURN_IF_ERROR(Prepare());
  // An engine and a backend stream per plan stream: neither is shared
  // between threads.
  for (int st = 0; st < kNumStreams; ++st) {
    STRATA_ASSIGN_OR_RETURN(auto engine, env_->NewIoEngine(o_.engine, p_.run.aio));
    engines_[st] = std::move(engine);
    STRATA_ASSIGN_OR_RETURN(auto stream, be_->NewStream(static_cast<Stream>(st)));
    streams_[st] = std::move(stream);
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
    double t0;  // the step's start on this process's clock
    std::vector<OpSpan> spans;
  };
  double last_t0 = 0;
  std::vector<StepSpans> steps;  // median_timeline candidates
  bool kept_applied = false;     // steps holds applied steps only
  for (int step = start; step < o_.steps; ++step) {
    if (o_.before_step) STRATA_RETURN_IF_ERROR(o_.before_step(step));
    model_->StartStep(step);
    // The steps' own compressed writes (not the initial weights' or a
    // checkpoint's).
    const uint64_t raw0 = swap_codec_ ? swap_codec_->raw_written() : 0,
                   stored0 = swap_codec_ ? swap_codec_->stored_written() : 0;
    spans_.clear();
    loss_sum_ = 0;
    overflow_ = false;
    overflow_agreed_ = false;
    const double t0 = env_->NowSeconds();
    last_t0 = t0;
    STRATA_RETURN_IF_ERROR(RunStep(step, t0));
    for (OpId id : ops_) {
      const Op& op = p_.ops[id];
      if (!step_ran_ && op.phase == Phase::kStep) continue;  // not run (RunStep)
      r.bytes_moved[static_cast<int>(LinkClassOf(op.kind))] += Bytes(OpBytesOnRank(op, drank_));
    }
    r.nvme_write_requests += nvme_write_requests_.exchange(0);
    if (swap_codec_ != nullptr) {
      r.nvme_raw_written += swap_codec_->raw_written() - raw0;
      r.nvme_stored_written += swap_codec_->stored_written() - stored0;
    }
    const double it = env_->NowSeconds() - t0;
    total += it;
    r.step_time_s.push_back(it);
    const double busiest = BusiestResource();
    bound += busiest;
    if (step == start) first_bound = busiest;
    // The step's closing collectives (the loss, the overflow's agreement),
    // named if one of them times out, as an op's are.
    std::optional<Comm::Label> closing;
    if (comm_->size() > 1) closing.emplace("the end of step " + std::to_string(step));
    comm_->FlushSends();
    // The last pipeline stage computes the losses, each tensor-parallel
    // rank the same; the mean over the data-parallel ranks' micro batches.
    r.losses.push_back(comm_->AllreduceSum(loss_sum_) / p_.micro_steps / dsize_ / (tp_ != nullptr ? tp_->size() : 1));
    r.loss_scale.push_back(scale_);
    STRATA_ASSIGN_OR_RETURN(const bool applied, EndIteration(r));
    r.step_skipped.push_back(!applied);
    closing.reset();
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
      if (applied || !kept_applied) steps.push_back({it, step, t0, spans_});
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
  STRATA_ASSIGN_OR_RETURN(auto digest, Digest());
  r.weights_digest = digest;
  r.swap_verified_bytes = store_.checksums().verified_bytes();
  r.swap_unverified_bytes = store_.checksums().unverified_bytes();
  if (!steps.empty()) {
    // The step of median iteration time (the upper median for an even
    // count). Every rank takes the same step (the timeline gathers them):
    // a step's time is the slowest rank's. The candidates are the same
    // steps on every rank (skips are agreed).
    if (comm_->size() > 1) {
      // Every rank decides from the same maximum and minimum (a sum could
      // agree on one rank and not on another).
      float count[2] = {static_cast<float>(steps.size()), -static_cast<float>(steps.size())};
      comm_->AllreduceMax(count, 2);
      if (count[0] != -count[1]) return Status::Internal("the ranks kept different steps for the median timeline");
      std::vector<float> times;
      for (const StepSpans& st : steps) times.push_back(static_cast<float>(st.time));
      comm_->AllreduceMax(times.data(), times.size());
      for (size_t i = 0; i < steps.size(); ++i) steps[i].time = times[i];
    }
    std::stable_sort(steps.begin(), steps.end(),
                     [](const StepSpans& a, const StepSpans& b) { return a.time < b.time; });
    StepSpans& m = steps[steps.size() / 2];
    spans_ = std::move(m.spans);
    last_t0 = m.t0;
    r.timeline_step = m.index;
  }
  STRATA_ASSIGN_OR_RETURN(auto spans, GatherSpans(std::move(spans_), last_t0));
  r.timeline = BuildTimeline(p_, std::move(spans), "run");
  return r;
}

double Runner::BusiestResource() const {
  double busy[kNumStreams] = {};
  std::vector<std::pair<double, double>> nvme;
  for (const OpSpan& sp : spans_) {
    const Stream st = p_.ops[sp.op].stream;
    busy[static_cast<int>(st)] += sp.end_s - sp.start_s;
    if (st == Stream::kNvmeRead || st == Stream::kNvmeWrite) nvme.emplace_back(sp.start_s, sp.end_s);
  }
  double most = *std::max_element(std::begin(busy), std::end(busy));
  if (p_.run.nvme_shared) {
    std::sort(nvme.begin(), nvme.end());
    double device = 0, until = -1;
    for (auto [a, b] : nvme) {
      if (a > until)
        device += b - a, until = b;
      else if (b > until)
        device += b - until, until = b;
    }
    most = std::max(most, device);
  }
  return most;
}

Status Runner::Prefix(const Op& op, const Status& st) {
  const std::string msg = "op " + std::to_string(op.id) + " '" + op.name + "': " + st.message();
  switch (st.code()) {
    case Status::Code::kIOError:
      return Status::IOError(msg);
    case Status::Code::kInfeasible:
      return Status::Infeasible(msg);
    case Status::Code::kInvalidArgument:
      return Status::InvalidArgument(msg);
    case Status::Code::kCancelled:
      return st;
    default:
      return Status::Internal(msg);
  }
}

Status Runner::RunOp(const Op& op, double t0) {
  if (const int sig = StopSignal())
    return Status::Cancelled(std::string("stopped by ") +
                             (sig == SIGINT    ? "SIGINT"
                              : sig == SIGTERM ? "SIGTERM"
                                               : "a signal") +
                             " before op " + std::to_string(op.id) + " '" + op.name + "'");
  const double a = env_->NowSeconds() - t0;
  std::optional<Comm::Label> label;  // named if a collective of it times out
  if (comm_->size() > 1) label.emplace("op " + std::to_string(op.id) + " '" + op.name + "'");
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

// What the first step would otherwise set up in its own time: the
// transient buffers' blocks, the stream threads and the model's memory.
Status Runner::Prepare() {
  STRATA_RETURN_IF_ERROR(store_.Reserve());
  // An optimizer step's output (Runner::Step), one live per size at a time.
  std::set<std::pair<Tier, size_t>> outputs;
  for (OpId id : ops_)
    if (const Op& op = p_.ops[id]; op.kind == OpKind::kOptimizerStep && op.master.valid())
      outputs.insert(
          {p_.buffers[op.master.buffer].tier, static_cast<size_t>(op.elements.v) * static_cast<size_t>(lp_bytes_)});
  for (const auto& [tier, bytes] : outputs) STRATA_RETURN_IF_ERROR(be_->Reserve(tier, bytes, 1));
  if (o_.parallel) {
    stream_threads_ = std::make_unique<StreamThreads>(kNumStreams);
    std::vector<std::function<void()>> prepare(kNumStreams);
    prepare[static_cast<int>(Stream::kCompute)] = [this] { model_->Prepare(); };
    stream_threads_->Run(std::move(prepare));
  } else {
    model_->Prepare();  // the ops run on this thread
  }
  // The groups' first collective sets MPI's state up (PMIx look-ups,
  // buffers): once here, as DeepSpeed's optimizer ends its set-up with
  // dist.barrier() (stage3.py _setup_for_real_optimizer).
  comm_->AnyTrue(false);
  if (dp_ != comm_) dp_->AnyTrue(false);
  return Status::Ok();
}

Status Runner::RunStep(int step, double t0) {
  auto run = [&](const std::vector<OpId>& ops) { return o_.parallel ? RunParallel(t0, ops) : RunSequential(t0, ops); };
  applied_ = false;
  const int warmup = p_.run.delayed_warmup;
  delayed_now_ = warmup >= 0 && step > warmup;
  step_ran_ = warmup != step;
  if (warmup < 0) return run(ops_);
  // The gradients this step's backward wrote become the step's pending
  // ones (RunSpec::delayed_grads), each stream idle.
  auto hand_over = [&] { store_.Swap(pending_grads_, p_.run.delayed_grads); };
  if (step > warmup) {
    STRATA_RETURN_IF_ERROR(run(ops_));
    hand_over();
    return Status::Ok();
  }
  STRATA_RETURN_IF_ERROR(run(rest_ops_));
  hand_over();
  return step < warmup ? run(step_ops_) : Status::Ok();
}

Status Runner::RunSequential(double t0, const std::vector<OpId>& ops) {
  for (OpId id : ops) STRATA_RETURN_IF_ERROR(RunOp(p_.ops[id], t0));
  return Status::Ok();
}

Status Runner::RunParallel(double t0, const std::vector<OpId>& ops) {
  const size_t n = p_.ops.size();
  std::vector<char> done(n, 1);  // the ops not run this time are done
  for (OpId id : ops) done[id] = 0;
  std::mutex mu;
  std::condition_variable cv[kNumStreams];
  Status first;
  bool failed = false;
  std::vector<std::vector<OpId>> per_stream(kNumStreams);
  for (OpId id : ops) per_stream[static_cast<int>(p_.ops[id].stream)].push_back(id);
  // Streams waiting on each op. A receive's dependency on its send (on
  // another stage's rank) is the message itself: not waited for here.
  std::vector<std::vector<int>> waiters(n);
  for (OpId id : ops) {
    const Op& op = p_.ops[id];
    for (OpId d : op.deps)
      if (p_.ops[d].stream != op.stream && p_.ops[d].stage == stage_) waiters[d].push_back(static_cast<int>(op.stream));
  }
  std::vector<std::function<void()>> workers(kNumStreams);
  for (int sidx = 0; sidx < kNumStreams; ++sidx) {
    if (per_stream[sidx].empty()) continue;
    workers[sidx] = [&, sidx] {
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
    };
  }
  stream_threads_->Run(std::move(workers));
  return first;
}

Status Runner::Sync(Stream s) {
  STRATA_ASSIGN_OR_RETURN(auto ev, S(s).Record());
  return (ev)->Synchronize();
}

Status Runner::Io(IoRequest::Op kind, const Region& r, std::byte* mem, Stream stream) {
  const IoRequest q{kind, store_.file(r.buffer), static_cast<uint64_t>(r.offset.v), mem,
                    static_cast<size_t>(r.bytes.v)};
  return RunIo(stream, {&q, 1});
}

Status Runner::OpenCodecs() {
  const CompressionConfig& c = p_.run.compression;
  if (c.codec == CodecKind::kNone) return Status::Ok();
  swap_codec_ = std::make_unique<SwapCodec>();
  for (auto& codecs : codecs_)
    for (int t = 0; t < std::max(1, c.threads); ++t) {
      STRATA_ASSIGN_OR_RETURN(auto codec, Codec::New(c.codec, c.level));
      codecs.push_back(std::move(codec));
    }
  for (const Buffer& b : p_.buffers)
    if (b.tier == Tier::kNvme && store_.file(b.id) != nullptr)
      swap_codec_->SetElement(store_.file(b.id), static_cast<size_t>(SwapElementBytes(p_, b.id)));
  // Frames end where any of this rank's write requests does (the plan's
  // ops' requests, write_requests.h; the initial weights' writes meet no
  // frame): no write covers part of another's frame.
  std::map<const File*, std::vector<uint64_t>> cuts;
  for (OpId id : ops_) {
    const Op& op = p_.ops[id];
    if (op.kind != OpKind::kNvmeWrite) continue;
    ForEachWriteRequest(op, drank_, p_.run.aio.block_size.v, [&](const Region& dst, std::span<const WritePiece>) {
      auto& c = cuts[store_.file(dst.buffer)];
      c.push_back(static_cast<uint64_t>(dst.offset.v));
      c.push_back(static_cast<uint64_t>(dst.end().v));
    });
  }
  for (auto& [file, c] : cuts) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    swap_codec_->SetCuts(file, std::move(c));
  }
  return Status::Ok();
}

Status Runner::RunIo(Stream stream, std::span<const IoRequest> io) {
  IoEngine& engine = *engines_[static_cast<int>(stream)];
  if (swap_codec_ == nullptr) return SubmitIo(engine, io);
  // A window's frames and their scratch at a time (the codec's memory,
  // besides the plan's: kCodecWindow a stream).
  const auto& codecs = codecs_[static_cast<int>(stream)];
  for (const auto& window : swap_codec_->Windows(io, kCodecWindow)) {
    STRATA_ASSIGN_OR_RETURN(auto batch, swap_codec_->Prepare(codecs, window));
    const Status ran = SubmitIo(engine, batch.io);
    STRATA_RETURN_IF_ERROR(swap_codec_->Finish(codecs, batch, ran));
    STRATA_RETURN_IF_ERROR(ran);
  }
  return Status::Ok();
}

// Requests sharing a 4 KiB block of a file, one of them a write, go in
// separate batches: the engine bounces unaligned edges with a
// read-modify-write of the whole block, which must not race.
Status Runner::SubmitIo(IoEngine& engine, std::span<const IoRequest> requests) {
  // Striped swap files (policy.stripe_paths): each request on its parts.
  std::vector<IoRequest> parts;
  if (p_.run.striped) {
    for (const IoRequest& q : requests)
      if (const auto* striped = dynamic_cast<const StripedFile*>(q.file))
        striped->Split(q, &parts);
      else
        parts.push_back(q);
    requests = parts;
  }
  const std::span<const IoRequest> io = requests;
  size_t begin = 0;
  for (size_t i = 1; i <= io.size(); ++i) {
    bool conflict = false;
    for (size_t j = begin; i < io.size() && j < i && !conflict; ++j) conflict = SharesBlock(io[i], io[j]);
    if (i < io.size() && !conflict) continue;
    STRATA_RETURN_IF_ERROR(RunChecked(engine, io.subspan(begin, i - begin)));
    begin = i;
  }
  return Status::Ok();
}

Status Runner::RunChecked(IoEngine& engine, std::span<const IoRequest> io) {
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
      if (st.ok())
        sums.Wrote(q.file, q.offset, q.length, hash[i]);
      else
        sums.Lost(q.file, q.offset, q.length);
    } else if (st.ok()) {
      STRATA_RETURN_IF_ERROR(sums.Verify(q.file, q.offset, {static_cast<const std::byte*>(q.buffer), q.length}));
    }
  }
  return st;
}

Status Runner::HostToRegion(const Region& r, const std::byte* in) {
  if (!store_.in_memory(r.buffer)) return Io(IoRequest::Op::kWrite, r, const_cast<std::byte*>(in), Stream::kCompute);
  STRATA_RETURN_IF_ERROR(S(Stream::kCompute).Copy(store_.data(r), in, static_cast<size_t>(r.bytes.v)));
  return Sync(Stream::kCompute);
}

Status Runner::RegionToHost(const Region& r, std::byte* out) {
  if (!store_.in_memory(r.buffer)) return Io(IoRequest::Op::kRead, r, out, Stream::kCompute);
  STRATA_RETURN_IF_ERROR(S(Stream::kCompute).Copy(out, store_.data(r), static_cast<size_t>(r.bytes.v)));
  return Sync(Stream::kCompute);
}

}  // namespace detail

Result<RunResult> RunTraining(const Plan& plan, const RunOptions& options) {
  const int tensor = plan.tensor_parallel();
  if (tensor > 1 && plan.run.sequence_parallel)
    return Status::InvalidArgument("parallelism.sequence_parallel: strata run executes tensor parallelism without it");
  if (tensor > 1 && plan.run.partition_activations)
    return Status::InvalidArgument(
        "activation_checkpointing.partition_activations: strata run executes tensor "
        "parallelism with whole checkpoints only");
  // FSDP2 (docs/fsdp.md, "Executed"): one shard group, gradient
  // accumulation on the GPU only.
  if (plan.framework == Framework::kFsdp) {
    for (const CommGroup& g : plan.groups)
      if (g.name == "fsdp_replicate")
        return Status::InvalidArgument(
            "fsdp.mesh: strata run does not execute HSDP (replicate > 1) yet; plan and simulate it, or run with one "
            "shard group");
    // A reduce-scatter moving more bytes than its moves' inputs reduces in
    // a wider dtype than the parameters' (mp_policy.reduce_dtype).
    for (const Op& op : plan.ops) {
      if (op.kind != OpKind::kReduceScatter) continue;
      int64_t in = 0;
      for (const Move& m : op.moves) in += m.src.bytes.v;
      if (op.bytes.v != in)
        return Status::InvalidArgument(
            "fsdp.mp_policy.reduce_dtype: strata run reduces gradients in param_dtype only; leave reduce_dtype out or "
            "equal to param_dtype");
    }
    if (plan.micro_steps > 1)
      for (const Buffer& b : plan.buffers)
        if (b.kind == StateKind::kGrad && b.tier == Tier::kCpu)
          return Status::InvalidArgument(
              "fsdp.offload_policy: strata run executes CPU offload with one micro step "
              "(training.gradient_accumulation_steps 1) only");
  }
  // ZeRO++ (docs/fidelity.md "ZeRO++"): its quantized collectives are
  // planned and simulated; the executor has no DeepSpeed block quantizer.
  for (const Op& op : plan.ops)
    if (op.quant_bits != 0)
      return Status::InvalidArgument(
          "'" + op.name + "' moves " + std::to_string(op.quant_bits) +
          "-bit quantized data (ZeRO++'s zero_quantized_weights or zero_quantized_gradients): strata run does not "
          "execute DeepSpeed's block quantizer; simulate it, or run without those keys");
  Comm& world = Comm::World();
  Comm::SetTimeout(options.collective_timeout_s);
  if (plan.world_size != world.size())
    return Status::InvalidArgument("the plan is for " + std::to_string(plan.world_size) + " ranks but " +
                                   std::to_string(world.size()) + " are running");
  // A checkpoint's files are per data-parallel rank (DeepSpeed's
  // zero_pp_rank_D_mp_rank_00): tensor shards and pipeline stages would
  // write the same segments.
  if ((plan.pipeline > 1 || tensor > 1) && (options.save_every > 0 || !options.resume_dir.empty()))
    return Status::InvalidArgument(
        "checkpoints (--save-every, --resume) of tensor- or pipeline-parallel runs are not "
        "written yet: run without them, or with parallelism.tensor and pipeline 1");
  // A delayed update's state between steps includes the pending gradients
  // and their loss scale, which DeepSpeed's checkpoint layout has no place
  // for.
  if (plan.run.delayed_warmup >= 0 && (options.save_every > 0 || !options.resume_dir.empty()))
    return Status::InvalidArgument(
        "policy.delayed_update: checkpoints (--save-every, --resume) would lose the pending gradients "
        "(DeepSpeed's checkpoint layout has no place for them): run without them, or without the delayed update");
  // ZeRO's collectives run in the data-parallel group (plan.groups[0]):
  // the world unless the pipeline splits it.
  std::unique_ptr<Comm> dp_split;
  Comm* dp = &world;
  if (plan.data_parallel() != world.size()) {
    if (options.backend != nullptr)
      return Status::InvalidArgument(
          "a tensor- or pipeline-parallel run needs the host backend over its data-parallel group");
    const std::vector<int> group =
        plan.groups.empty() ? std::vector<int>{world.rank()} : plan.groups[0].RanksOf(world.rank());
    dp_split = world.Split(group.front(), world.rank());
    dp = dp_split.get();
  }
  // Tensor parallelism's all-reduces: in the "tp" group (consecutive ranks).
  std::unique_ptr<Comm> tp;
  for (const CommGroup& g : plan.groups)
    if (g.name == "tp" && g.size() > 1) tp = world.Split(g.RanksOf(world.rank()).front(), world.rank());
  // hpZ's secondary group (ZeRO++), or FSDP2's post-forward group of an
  // integer reshard_after_forward: consecutive ranks.
  std::unique_ptr<Comm> hpz;
  for (const CommGroup& g : plan.groups)
    if (detail::IsSubGroupGather(g) && g.size() > 1) hpz = world.Split(g.RanksOf(world.rank()).front(), world.rank());
  Env* env = options.env != nullptr ? options.env : PosixEnv();
  // Every NVMe buffer's swap directory: --nvme-dir, else the plan's. None
  // at all is an error, as in DeepSpeed (partition_parameters.py asserts
  // nvme_path is set for device nvme).
  for (const Buffer& b : plan.buffers) {
    if (b.tier != Tier::kNvme || !options.nvme_dir.empty()) continue;
    if (plan.SwapDirOf(b).empty())
      return Status::InvalidArgument(
          "the plan keeps '" + b.name +
          "' on NVMe but no directory is given for its swap file: set "
          "zero_optimization.offload_param.nvme_path / offload_optimizer.nvme_path, or --nvme-dir "
          "(DeepSpeed refuses device nvme without nvme_path too)");
  }
  std::unique_ptr<Backend> owned;
  Backend* backend = options.backend;
  if (backend == nullptr && options.backend_kind == BackendKind::kCuda) {
    STRATA_ASSIGN_OR_RETURN(auto cuda, NewCudaBackend({dp, -1, options.adam_threads}));
    owned = std::move(cuda);
  } else if (backend == nullptr) {
    owned = NewHostBackend(
        {dp, options.copy_threads, options.adam_threads > 0 ? options.adam_threads : 1, options.compute_threads});
  }
  std::unique_ptr<Backend> emulated;
  if (backend == nullptr && options.backend_kind == BackendKind::kEmulated) {
    emulated = NewEmulatedDeviceBackend(owned.get());
    backend = emulated.get();
  }
  if (backend == nullptr) backend = owned.get();
  detail::Runner r(plan, options, env, backend, dp, tp.get(), hpz.get());
  // DeepSpeed's initial_scale_power 16 for fp16; bf16 and fp32 need none.
  r.SetScale(plan.run.precision == Precision::kFp16 ? 65536.0f : 1.0f);
  return r.Run();
}

}  // namespace strata::exec
