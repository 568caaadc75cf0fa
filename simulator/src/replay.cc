#include "replay.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/kernel/resource/Action.hpp>

#include "strata/core/huge_pages.h"
#include "strata/cost/op_cost.h"
#include "strata/plan/write_requests.h"

namespace strata::sim {
Replay::Replay(const Plan& plan, const HardwareSpec& hw, const SimOptions& opt, std::vector<int> ranks, Platform& pf)
    : plan_(plan), hw_(hw), opt_(opt), ranks_(std::move(ranks)), pf_(pf) {
  nops_ = static_cast<int>(plan_.ops.size());
  nranks_ = static_cast<int>(ranks_.size());
  succ_.resize(nops_);
  npred_.assign(nops_, 0);
  // Stream order is per stage (plan.h); a receive's send is of another stage.
  const int P = std::max(1, plan_.pipeline);
  std::vector<OpId> last(StreamSlots(plan_), -1);
  std::vector<int64_t> ops_of_stage(static_cast<size_t>(P), 0);
  for (const Op& op : plan_.ops) {
    ++ops_of_stage[static_cast<size_t>(op.stage)];
    for (OpId d : op.deps) {
      succ_[d].push_back(op.id);
      ++npred_[op.id];
    }
    OpId& prev = last[StreamSlot(op)];
    if (prev >= 0 && std::find(op.deps.begin(), op.deps.end(), prev) == op.deps.end()) {
      succ_[prev].push_back(op.id);
      ++npred_[op.id];
    }
    prev = op.id;
  }
  // Write buffering's staged bytes, the same on every rank unless moves
  // name ranks (-1: counted per rank).
  staged_.assign(static_cast<size_t>(nops_), 0);
  for (const Op& op : plan_.ops)
    if (op.kind == OpKind::kNvmeWrite && op.coalesce)
      staged_[static_cast<size_t>(op.id)] =
          HasRankMoves(op) ? -1 : CountWrites(op, 0, plan_.run.aio.block_size.v, true).staged_bytes;
  const size_t instances = static_cast<size_t>(nops_) * nranks_;
  most_preds_ = nops_ > 0 ? *std::max_element(npred_.begin(), npred_.end()) : 0;
  if (most_preds_ > kMaxPreds) return;  // Run refuses it
  remaining_.reserve(instances);
  AdviseHugePages(remaining_.data(), instances * sizeof(uint16_t));  // before the first write: fewer page faults
  remaining_.resize(instances);
  start_.assign(static_cast<size_t>(nranks_) * kNumStreams, 0.0);
  for (OpId o = 0; o < nops_; ++o)
    for (int l = 0; l < nranks_; ++l) remaining_[Instance(l, o)] = static_cast<uint16_t>(npred_[o]);
  coll_ready_.assign(nops_, 0);
  stage_locals_.resize(static_cast<size_t>(P));
  for (int l = 0; l < nranks_; ++l) {
    const int st = plan_.StageOf(ranks_[l]);
    stage_of_.push_back(st);
    stage_locals_[static_cast<size_t>(st)].push_back(l);
    expected_ += ops_of_stage[static_cast<size_t>(st)];
  }
  signals_ = UsesSignals(opt_, static_cast<size_t>(nranks_));
  time_compute_ = signals_ && std::none_of(plan_.ops.begin(), plan_.ops.end(), [](const Op& o) {
                    return (o.kind == OpKind::kForward || o.kind == OpKind::kBackward) && o.stream != Stream::kCompute;
                  });
}

Status Replay::Run() {
  if (most_preds_ > kMaxPreds)
    return Status::InvalidArgument("an op waits on " + std::to_string(most_preds_) +
                                   " others (its deps and its stream predecessor); the replay counts at most " +
                                   std::to_string(kMaxPreds));
  span_chunk_ = on_spans ? static_cast<size_t>(std::max<int64_t>(1, opt_.spans_per_frame)) : 0;
  spans.reserve(std::min(span_chunk_ > 0 ? span_chunk_ : SIZE_MAX, static_cast<size_t>(expected_)));  // never regrown
  if (signals_) {
    namespace res = simgrid::kernel::resource;
    sg4::Link::on_communication_state_change_cb([this](res::NetworkAction& na, res::Action::State) {
      // NetworkAction derives from Action alone; 3.32's public headers only
      // declare it, so its Action is reached by the address they share.
      const auto& a = reinterpret_cast<const res::Action&>(na);
      if (a.get_state() == res::Action::State::FINISHED || a.get_state() == res::Action::State::FAILED)
        signalled_.push_back(a.get_activity());
    });
    sg4::Engine::on_time_advance_cb([this](double) {
      OnSignalled();
      Settle();
    });
  } else {
    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) { OnDone(&a); });
  }
  domains_on_ = signals_ && opt_.flow_domains;
  if (domains_on_) routes_by_source_.resize(static_cast<size_t>(nranks_) * kNumStreams + 1);
  StartOwners();
  for (int l = 0; l < nranks_; ++l)
    for (OpId o = 0; o < nops_; ++o)
      if (npred_[o] == 0 && plan_.ops[o].stage == stage_of_[l]) Ready(l, o);
  Settle();
  if (expected_ == 0) StopOwners();
  sg4::Engine::get_instance()->run();
  if (completed_ != expected_)
    return Status::Internal("simulation stalled: " + std::to_string(completed_) + " of " + std::to_string(expected_) +
                            " op instances completed (is the plan valid?)");
  return Status::Ok();
}

void Replay::StartOwners() {
  // With flow domains no flow is a SimGrid activity (but for a route the
  // domains do not solve, none on this platform): no owner has work.
  if (nranks_ < opt_.activity_owners_from_ranks || domains_on_) return;
  owners_.resize(static_cast<size_t>(nranks_) + 1);
  for (size_t i = 0; i < owners_.size(); ++i) {
    sg4::ActorPtr actor = sg4::Actor::create("owner-" + std::to_string(i), pf_.delay(), [this, i] { OwnerLoop(i); });
    owner_of_pid_[actor->get_pid()] = i;
  }
}

void Replay::OwnerLoop(size_t i) {
  Owner& o = owners_[i];
  if (signals_) {
    // Refill, then sleep until the replay starts `stop` (the pool is low,
    // or the replay has ended).
    while (!stopping_) {
      while (o.pool.size() < kBatch) o.pool.push_back(sg4::Exec::init());
      o.stop = sg4::Exec::init();
      o.woken = false;
      const std::vector<sg4::ActivityPtr> wake{o.stop};
      if (sg4::Activity::wait_any(wake) < 0) return;
    }
    return;
  }
  o.stop = sg4::Exec::init();
  o.waits.push_back(o.stop);
  while (!stopping_) {
    while (o.pool.size() < kPool) {
      o.pool.push_back(sg4::Exec::init());
      o.waits.push_back(o.pool.back());
    }
    // Reports (on_completion, so OnDone) the first of them to finish.
    const ssize_t k = sg4::Activity::wait_any(o.waits);
    if (k < 0) return;
    o.waits[static_cast<size_t>(k)] = std::move(o.waits.back());
    o.waits.pop_back();
  }
}

// Signal mode: the completions the network reported during this time
// advance, in the order it reported them.
void Replay::OnSignalled() {
  if (signalled_.empty()) return;
  std::vector<const void*> done;
  done.swap(signalled_);
  for (const void* key : done) OnDone(key);
}

// Every op instance has completed: each owner's stop Exec starts empty,
// ends at once and wakes the owner to return (its blank Execs are canceled
// unstarted), so the engine ends with no actor left. (A pool may be empty
// here, handed out to other ranks' activities: hence an Exec of its own.)
void Replay::StopOwners() {
  stopping_ = true;
  for (Owner& o : owners_) {
    o.pool.clear();
    if (o.stop && !o.woken) o.stop->set_flops_amount(0)->set_host(pf_.delay())->start();
    o.woken = true;
  }
}

// A blank Exec from the pool of the task's owner (its rank's, or the
// collectives' for a task of no rank). With the pool empty (its owner
// refills it when it next wakes), one created here: by the owner actor
// running this code, which waits on it too, or by maestro (before the run),
// whose activities SimGrid reports itself.
sg4::ExecPtr Replay::NewExec(const Task& t) {
  if (owners_.empty()) return sg4::Exec::init();
  Owner& o = owners_[t.local >= 0 ? static_cast<size_t>(t.local) : owners_.size() - 1];
  if (signals_ && o.pool.size() <= kLow && !o.woken && o.stop && !stopping_) {
    o.woken = true;  // the owner refills its pool when it next runs
    o.stop->set_flops_amount(0)->set_host(pf_.delay())->start();
  }
  if (!o.pool.empty()) {
    sg4::ExecPtr e = std::move(o.pool.back());
    o.pool.pop_back();
    return e;
  }
  if (signals_) return sg4::Exec::init();  // maestro's (rare: the pool ran dry)
  sg4::ExecPtr e = sg4::Exec::init();
  if (!sg4::Actor::is_maestro()) owners_[owner_of_pid_.at(sg4::this_actor::get_pid())].waits.push_back(e);
  return e;
}

void Replay::Launch(sg4::ActivityPtr a, Task t) {
  ++activities;
  a->start();  // (a Comm has its implementation only once started)
  const void* key = signals_ ? static_cast<const void*>(a->get_impl()) : static_cast<const void*>(a.get());
  live_.emplace(key, std::make_pair(std::move(a), t));
}

// Signal mode: `t` completes after `seconds` (a timer, not an activity; it
// counts as one, as the delay Exec it replaces did).
void Replay::After(double seconds, Task t) {
  ++activities;
  simgrid::kernel::timer::Timer::set(sg4::Engine::get_clock() + seconds, [this, t] {
    Done(t);
    Settle();
  });
}

// Work of `amount` on `host` (a GPU: flops; the node's CPU: bytes of memory
// traffic, its speed being the memory bandwidth): an Exec on it, or in
// signal mode a flow over its link to the sink (Platform work_as_flows),
// which the network's signal reports; zero work then an empty flow (it
// ends at once).
void Replay::Work(sg4::Host* host, double amount, Task t, double unjittered) {
  amount = amount * Jitter(t) + unjittered;
  if (DomainFlow(host, pf_.sink(), std::max(amount, 0.0), t)) return;  // signal mode with flow domains
  if (!signals_) {
    Launch(NewExec(t)->set_flops_amount(amount)->set_host(host), t);
  } else if (amount <= 0) {
    Launch(sg4::Comm::sendto_init(host, pf_.sink())->set_payload_size(0), t);
  } else {
    Launch(NewFlow(host, pf_.sink(), amount, t), t);
  }
}

// A flow of `bytes` from one host to another: a two-host Exec with that one
// byte amount (see Owner); an empty flow (latency only) as a Comm, which the
// Exec form refuses.
void Replay::Flow(sg4::Host* from, sg4::Host* to, double bytes, Task t) {
  const double b = static_cast<double>(static_cast<uint64_t>(bytes * Jitter(t)));  // whole bytes, as the Comm's payload
  if (DomainFlow(from, to, b, t)) return;
  if (b <= 0 || owners_.empty()) {
    Launch(sg4::Comm::sendto_init(from, to)->set_payload_size(static_cast<uint64_t>(b)), t);
    return;
  }
  Launch(NewFlow(from, to, b, t), t);
}

sg4::ExecPtr Replay::NewFlow(const sg4::Host* from, const sg4::Host* to, double bytes, const Task& t) {
  sg4::ExecPtr e = NewExec(t);
  e->set_hosts({const_cast<sg4::Host*>(from), const_cast<sg4::Host*>(to)})
      ->set_flops_amounts({0, 0})
      ->set_bytes_amounts({0, bytes, 0, 0});
  return e;
}

void Replay::Ready(int local, OpId op) {
  if (IsCollective(plan_.ops[op].kind)) {
    if (++coll_ready_[op] == static_cast<int>(StageLocals(op).size())) StartCollective(op);
    return;
  }
  Start(local, op);
}

// splitmix64's finaliser: the jitter's and the stalls' draws, each over its
// own combination of (seed, rank, op[, step]).
static uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Mix64 over (seed, rank, op, step): u uniform in [-1, 1).
// The rank is the task's (a network entry flow: its receiver's), global, so
// a rank draws the same with or without the one-node reduction.
double Replay::Jitter(const Task& t) const {
  if (opt_.jitter == 0) return 1;
  const int local = t.local >= 0 ? t.local : t.recv;
  const uint64_t rank = local >= 0 ? static_cast<uint64_t>(ranks_[local]) : ~uint64_t{0};
  const uint64_t z = Mix64(opt_.jitter_seed * 0x9E3779B97F4A7C15ull ^ (rank + 1) * 0xBF58476D1CE4E5B9ull ^
                           static_cast<uint64_t>(t.op) * 0x94D049BB133111EBull ^ static_cast<uint64_t>(t.step + 2));
  const double u = static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;  // 53 bits: [0, 2) - 1
  return 1.0 + opt_.jitter * u;
}

// SimOptions::stall_rate/stall_time: a compute op of `seconds` on the
// task's rank stalls with probability min(1, stall_rate x seconds), drawn
// from (seed, rank, op) by Mix64 over other constants, so the
// draws do not follow the jitter's and do not depend on stall_time (a longer
// stall never removes one). Returns the stall's seconds, or 0.
double Replay::Stall(const Task& t, double seconds) const {
  if (!opt_.Stalls()) return 0;
  const uint64_t rank = static_cast<uint64_t>(ranks_[t.local]);
  const uint64_t z =
      Mix64((opt_.jitter_seed + 0x5851F42D4C957F2Dull) * 0xD6E8FEB86659FD93ull ^ (rank + 1) * 0x9E3779B97F4A7C15ull ^
            (static_cast<uint64_t>(t.op) + 1) * 0xBF58476D1CE4E5B9ull);
  const double u = static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
  return u < opt_.stall_rate * seconds ? opt_.stall_time : 0;
}

double Replay::Latency(const Op& o) const {
  switch (o.kind) {
    case OpKind::kCopyH2D:
    case OpKind::kCopyD2H:
      return hw_.pcie.latency.v;
    case OpKind::kNvmeRead:
    case OpKind::kNvmeWrite:
      return hw_.nvme.latency.v;
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllReduce:
      return GroupLink(plan_.groups[static_cast<size_t>(o.group)], hw_).latency.v;
    default:
      return 0;
  }
}

// A GPU op's work in the GPU host's units (its speed is peak_flops x
// efficiency): the op's FLOPs under the flat model (exactly as before the
// roofline model existed), else its seconds (op_cost.h) times that speed.
double Replay::GpuWork(const Op& o) const {
  const double speed = GpuSpeed();
  if (hw_.gpu.compute_model == ComputeModel::kFlat) {
    if (o.kind != OpKind::kOptimizerStep) return o.flops;
    return static_cast<double>(o.bytes.v) * speed / hw_.gpu.hbm_bandwidth.bytes_per_s;  // HBM-bound
  }
  return OpGpuSeconds(plan_, o, hw_.gpu) * speed;
}

void Replay::Start(int local, OpId op) {
  const Op& o = plan_.ops[op];
  const int rank = ranks_[local];
  start_[Running(local, op)] = sg4::Engine::get_clock();
  const Task t{local, op, -1};
  switch (o.kind) {
    case OpKind::kForward:
    case OpKind::kBackward:
    case OpKind::kOptimizerStep:
      if (o.kind == OpKind::kOptimizerStep && o.stream != Stream::kCompute) {
        // On the CPU, whose host speed is its memory bandwidth: the step's
        // bytes, or their equivalent when the cores' vector math binds.
        Work(pf_.cpu(rank), OpCpuWorkBytes(o, hw_.cpu), t);
      } else {
        // A stall (SimOptions::stall_rate) idles the GPU before the op: on
        // the GPU host, alone there, it is the same as a longer op (where a
        // hand-made plan runs compute on another stream too, the stall is
        // work beside it, stretched by the sharing: docs/simulator.md).
        const double work = GpuWork(o);
        const bool timed = time_compute_ && o.stream == Stream::kCompute;
        const double seconds = timed || opt_.Stalls() ? work * Jitter(t) / GpuSpeed() : 0;
        const double stall = o.stream == Stream::kCompute ? Stall(t, seconds) : 0;
        if (stall > 0) ++stalls, stalled_s += stall;
        if (timed) {
          // Signal mode: a rank's compute stream runs one op at a time (each
          // waits for its stream predecessor) and nothing else runs on its
          // GPU, so the op takes its work over the GPU's speed, alone: a
          // timer, as the exec or flow would end, without the flow's LMM
          // variable, owner Exec and signal (a fifth of all activities).
          After(seconds + stall, t);
        } else {
          Work(pf_.gpu(rank), work, t, stall * GpuSpeed());
        }
      }
      break;
    case OpKind::kCopyH2D:
    case OpKind::kCopyD2H:
    case OpKind::kNvmeRead:
    case OpKind::kNvmeWrite:
      // A copy whose moves name other ranks (plan.h) moves nothing here.
      if (HasRankMoves(o) && OpBytesOnRank(o, plan_.DataRank(rank)) == 0) {
        Complete(local, op, sg4::Engine::get_clock());
        break;
      }
      // A fixed latency first (its own activity: it shares nothing), with
      // the host's first touch of fresh pageable pages (op_cost.h
      // FirstTouchSeconds: one thread's time, per page), then a pageable
      // copy's staging pass, then the flow.
      // Compression's codec (policy.compression) is one thread's time on
      // the op's path too: a write compresses before its flow, a read
      // decompresses after it, spent here first (the op's time is the sum).
      if (const double lat = Latency(o) + FirstTouchSeconds(plan_, o, plan_.DataRank(rank), hw_.cpu) +
                             CodecSeconds(plan_, o, plan_.DataRank(rank));
          lat > 0)
        Delay(lat, {local, op, kDelay});
      else
        StageOrTransfer(local, op);
      break;
    case OpKind::kSend:
      // Eager: the bytes leave when the send is ready (after the link's
      // latency); the receive (the other stage's op that depends on it)
      // completes when they arrive.
      if (const double lat = PeerLink(rank, plan_.PeerRank(rank, o.peer_stage), hw_).latency.v; lat > 0)
        Delay(lat, {local, op, kDelay});
      else
        Transfer(local, op);
      break;
    case OpKind::kRecv:
      Complete(local, op, sg4::Engine::get_clock());
      break;
    case OpKind::kHook:
      // The host thread's own time (the framework's hooks): a delay that
      // shares no resource, jittered as any work (ranks' hosts are not in
      // lockstep either).
      if (o.host_seconds > 0)
        Delay(o.host_seconds * Jitter(t), t);
      else
        Complete(local, op, sg4::Engine::get_clock());
      break;
    default:
      break;  // collectives start in StartCollective
  }
}

// A copy from or to pageable CPU memory first passes its bytes through
// pinned staging: a memcpy, which reads and writes every byte, so 2 bytes
// of CPU memory traffic per byte copied at the node's memory bandwidth,
// shared with the CPU optimizer (the host speed is bytes per second), and
// at most cpu.staging_bandwidth for the one thread that copies it: an
// exec bounded to that rate, or in signal mode a flow from sink() to the
// GPU, whose route crosses the rank's own staging link (Platform).
//
// A coalesced NVMe write (write buffering, Op::coalesce) gathers its
// requests of several moves into pinned memory the same way first.
int64_t Replay::StagedBytes(const Op& o, int rank) const {
  if (o.kind == OpKind::kNvmeWrite && o.coalesce)
    return staged_[static_cast<size_t>(o.id)] >= 0
               ? staged_[static_cast<size_t>(o.id)]
               : CountWrites(o, plan_.DataRank(rank), plan_.run.aio.block_size.v, true).staged_bytes;
  return IsPageableCopy(plan_, o) ? OpBytesOnRank(o, plan_.DataRank(rank)) : 0;
}

void Replay::StageOrTransfer(int local, OpId op) {
  const Op& o = plan_.ops[op];
  const int rank = ranks_[local];
  const int64_t staged = StagedBytes(o, rank);
  if (staged == 0) {
    Transfer(local, op);
    return;
  }
  const double traffic = kStagingTrafficPerByte * static_cast<double>(staged);
  const Task t{local, op, kStage};
  const double per_copy = hw_.cpu.staging_bandwidth.bytes_per_s;
  if (per_copy <= 0) {
    Work(pf_.cpu(rank), traffic, t);
  } else if (signals_) {
    Flow(pf_.sink(), pf_.gpu(rank), traffic, t);  // over the staging link, then the node's memory
  } else {
    Launch(NewExec(t)
               ->set_flops_amount(traffic * Jitter(t))
               ->set_host(pf_.cpu(rank))
               ->set_bound(kStagingTrafficPerByte * per_copy),
           t);
  }
}

void Replay::Transfer(int local, OpId op) {
  const Op& o = plan_.ops[op];
  const int rank = ranks_[local];
  const Task t{local, op, -1};
  const double bytes = static_cast<double>(OpBytesOnRank(o, plan_.DataRank(rank)));
  switch (o.kind) {
    case OpKind::kCopyH2D:
      Flow(pf_.cpu(rank), pf_.gpu(rank), bytes, t);
      break;
    case OpKind::kCopyD2H:
      Flow(pf_.gpu(rank), pf_.cpu(rank), bytes, t);
      break;
    case OpKind::kNvmeRead:  // compressed: the drive moves the stored bytes (Op::stored)
      Flow(pf_.nvme(rank), pf_.cpu(rank), bytes * o.stored, t);
      break;
    case OpKind::kNvmeWrite:
      Flow(pf_.cpu(rank), pf_.nvme(rank), bytes * o.stored, t);
      break;
    case OpKind::kSend:
      Flow(pf_.gpu(rank), pf_.gpu(plan_.PeerRank(rank, o.peer_stage)), static_cast<double>(o.bytes.v), t);
      break;
    default:
      break;
  }
}

void Replay::StartCollective(OpId op) {
  const Op& o = plan_.ops[op];
  const double now = sg4::Engine::get_clock();
  for (int l : StageLocals(op)) start_[Running(l, op)] = now;
  const int n = static_cast<int>(plan_.groups[o.group].ranks.size());
  if (n <= 1 || o.bytes.v == 0) {
    for (int l : StageLocals(op)) Complete(l, op, now);
    return;
  }
  if (const double lat = Latency(o); lat > 0)
    Delay(lat, {-1, op, kDelay});
  else
    CollectiveFlows(op);
}

void Replay::CollectiveFlows(OpId op) {
  const Op& o = plan_.ops[op];
  const int n = static_cast<int>(plan_.groups[o.group].ranks.size());
  const double phases = o.kind == OpKind::kAllReduce ? 2.0 : 1.0;  // reduce-scatter + allgather
  Collective& c = colls_[op];
  if (opt_.collectives == CollectiveModel::kRing) {
    const double bytes = phases * (n - 1) * static_cast<double>(o.bytes.v) / n;
    c.flows_left = 0;
    for (int l : StageLocals(op)) c.flows_left += 1 + (pf_.ring_prev_outside(ranks_[l], o.group) != nullptr);
    for (int l : StageLocals(op)) {
      const int r = ranks_[l];
      Flow(pf_.gpu(r), pf_.ring_next(r, o.group), bytes, {l, op, -1});
      if (sg4::Host* in = pf_.ring_prev_outside(r, o.group)) Flow(in, pf_.gpu(r), bytes, {-1, op, -1, l});
    }
    return;
  }
  // Ring in steps: n-1 (2(n-1) for allreduce) steps of bytes/n; a rank sends
  // step k+1 once it has sent and received step k.
  c.steps = static_cast<int>(phases) * (n - 1);
  c.bytes_per_flow = static_cast<double>(o.bytes.v) / n;
  c.launched.assign(nranks_, 0);
  c.sent.assign(nranks_, 0);
  c.recv.assign(nranks_, 0);
  c.flows_left = 0;
  for (int l : StageLocals(op)) c.flows_left += c.steps * (1 + (pf_.ring_prev_outside(ranks_[l], o.group) != nullptr));
  for (int l : StageLocals(op)) TrySend(op, l);
}

// Sends the next step of `local` once it has sent and received the previous one.
void Replay::TrySend(OpId op, int local) {
  Collective& c = colls_[op];
  const int k = c.launched[local];
  if (k >= c.steps || c.sent[local] < k || c.recv[local] < k) return;
  c.launched[local] = k + 1;
  const int r = ranks_[local];
  const int g = plan_.ops[op].group;
  const CommGroup& group = plan_.groups[static_cast<size_t>(g)];
  Flow(pf_.gpu(r), pf_.ring_next(r, g), c.bytes_per_flow, {local, op, k});
  // The node's entry flow mirrors its exit flow of the same step: under the
  // symmetry reduction one node is simulated, and the member of this ring
  // whose predecessor is outside it receives from outside.
  if (!pf_.simulated(group.Next(r))) {
    int entry = r;
    while (pf_.simulated(group.Prev(entry))) entry = group.Prev(entry);
    if (sg4::Host* in = pf_.ring_prev_outside(entry, g))
      Flow(in, pf_.gpu(entry), c.bytes_per_flow, {-1, op, k, LocalOf(entry)});
  }
}

void Replay::StepDone(OpId op, const Task& t) {
  Collective& c = colls_[op];
  int receiver = t.recv;  // a flow from outside: its receiver
  if (t.local >= 0) {
    c.sent[t.local] = std::max(c.sent[t.local], t.step + 1);
    const int next = plan_.groups[static_cast<size_t>(plan_.ops[op].group)].Next(ranks_[t.local]);
    if (!pf_.simulated(next)) {
      TrySend(op, t.local);
      return;
    }
    receiver = LocalOf(next);
  }
  c.recv[receiver] = std::max(c.recv[receiver], t.step + 1);
  TrySend(op, receiver);
  if (t.local >= 0) TrySend(op, t.local);
}

void Replay::OnDone(const void* key) {
  auto it = live_.find(key);
  if (it == live_.end()) return;
  const Task t = it->second.second;
  const double now = sg4::Engine::get_clock();
  if (now > finished_at_) {
    finished_.clear();
    finished_at_ = now;
  }
  finished_.push_back(std::move(it->second.first));
  live_.erase(it);
  Done(t);
}

// A fixed latency (or a reduction's time) on its own: a timer in signal
// mode, else an Exec on the delay host (its cores never shared).
void Replay::Delay(double seconds, Task t) {
  if (signals_)
    After(seconds, t);
  else
    Launch(NewExec(t)->set_flops_amount(seconds)->set_host(pf_.delay()), t);
}

void Replay::Done(const Task& t) {
  const double now = sg4::Engine::get_clock();
  if (t.step == kReduce) {  // the reduction after the ring: the collective is done
    for (int l : StageLocals(t.op)) Complete(l, t.op, now);
    return;
  }
  if (t.step == kDelay) {  // the op's latency has elapsed: its transfer starts
    if (IsCollective(plan_.ops[t.op].kind))
      CollectiveFlows(t.op);
    else
      StageOrTransfer(t.local, t.op);
    return;
  }
  if (t.step == kStage) {  // the bytes are in pinned staging: the DMA starts
    Transfer(t.local, t.op);
    return;
  }
  if (!IsCollective(plan_.ops[t.op].kind)) {
    // A copy whose bytes the GPU then works on (stage 2's CPU gradient
    // accumulator, added to the gradient on arrival): its side kernels at
    // HBM bandwidth, on its stream, before it completes.
    const Op& o = plan_.ops[t.op];
    if (t.step != kCopyKernels && (o.kind == OpKind::kCopyH2D || o.kind == OpKind::kCopyD2H))
      if (const double after = CopyKernelSecondsOnRank(o, plan_.DataRank(ranks_[t.local]), hw_.gpu); after > 0) {
        Delay(after, {t.local, t.op, kCopyKernels});
        return;
      }
    Complete(t.local, t.op, now);
    return;
  }
  auto cit = colls_.find(t.op);
  if (t.step >= 0) StepDone(t.op, t);
  if (--cit->second.flows_left == 0) {
    colls_.erase(cit);
    const Op& o = plan_.ops[t.op];
    // The ranks reduce what arrived, in parallel (each its own share), and
    // run the op's copy kernels (flattening, copying out, pre-dividing).
    if (const double after = CollectiveTailSeconds(o, hw_.gpu); after > 0) {
      Delay(after, {-1, t.op, kReduce});
      return;
    }
    for (int l : StageLocals(t.op)) Complete(l, t.op, now);
  }
}

void Replay::Complete(int local, OpId op, double end) {
  spans.push_back({ranks_[local], op, start_[Running(local, op)], end});
  if (spans.size() == span_chunk_) {
    on_spans(spans);
    spans.clear();
  }
  ++completed_;
  Progress();
  if (completed_ == expected_) StopOwners();
  const int stage = plan_.ops[op].stage;
  for (OpId s : succ_[op]) {
    // A send's receive runs on the peer stage's rank at this rank's position.
    const int at = plan_.ops[s].stage == stage ? local : LocalOf(plan_.PeerRank(ranks_[local], plan_.ops[s].stage));
    if (--remaining_[Instance(at, s)] == 0) Ready(at, s);
  }
}

void Replay::Progress() {
  const int64_t total = expected_;
  const int pct = static_cast<int>(100 * completed_ / total);
  if (pct == last_percent_) return;
  last_percent_ = pct;
  if (on_progress) on_progress(completed_, total);
}

}  // namespace strata::sim
