// Replays a plan's ops as SimGrid activities (private to the simulator).
#pragma once

#include <deque>
#include <functional>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <unordered_map>
#include <vector>

#include "flow_domains.h"
#include "platform.h"
#include "strata/core/status.h"
#include "strata/plan/plan.h"
#include "strata/simulator/simulator.h"
#include "strata/timeline/timeline.h"

namespace strata::sim {

// One plan op on each simulated rank. An instance is ready when its deps and
// its stream predecessor have completed; a collective starts when every
// simulated rank is ready for it. Activities are created only when ready.
class Replay {
 public:
  Replay(const Plan& plan, const HardwareSpec& hw, const SimOptions& opt, std::vector<int> ranks, Platform& pf);
  // Whether a replay of `nranks` ranks runs in signal mode (below); its
  // platform must then be built with work_as_flows.
  static bool UsesSignals(const SimOptions& opt, size_t nranks) {
    return opt.signal_completions && nranks >= static_cast<size_t>(std::max(0, opt.activity_owners_from_ranks));
  }
  // REQUIRES: the engine exists and the platform is sealed. Runs to the end.
  Status Run();

  // The completed op instances not yet handed to on_spans (all of them
  // when on_spans is unset).
  std::vector<OpSpan> spans;
  int64_t activities = 0;
  // Of those, flows the replay shared itself (flow_domains.h), and the
  // most flows one domain held at once.
  int64_t domain_flows = 0;
  int64_t max_domain_flows = 0;
  // Stalls drawn (SimOptions::stall_rate), and their seconds on all ranks.
  int64_t stalls = 0;
  double stalled_s = 0;
  // When set, called with `spans` whenever opt.spans_per_frame have
  // accumulated (then cleared), so that a replay of millions of instances
  // never holds them all: the simulator child streams them as it goes.
  std::function<void(const std::vector<OpSpan>&)> on_spans;
  // Called whenever another percent of the op instances has completed.
  std::function<void(int64_t done, int64_t total)> on_progress;

 private:
  struct Task {
    int local = 0;  // simulated rank index (collective flows: sender, or -1 for a network entry)
    OpId op = 0;
    int step = -1;  // collectives: ring step, -1 for plain ops and one-shot rings, kDelay for a latency
    int recv = -1;  // a ring step's flow entering from outside: the simulated rank index receiving it
  };
  // Activities are created, and waited for, by owner actors: one per
  // simulated rank and one for the collectives' latencies and reductions.
  // SimGrid 3.32 keeps each actor's live activities in a std::list that it
  // searches whole at every completion (ExecImpl::post, CommImpl::finish).
  // Created in maestro's completion callbacks, every activity in flight sat
  // in maestro's one list: all-nodes runs slowed superlinearly (1T on
  // 256/512/1024 GPUs at 180k/150k/85k activities/s). An owner keeps a pool
  // of blank Execs it created and waits on all of them with wait_any: the
  // replay (in whichever context completes an activity) takes a blank Exec
  // from the right owner's pool, sets and starts it; its completion wakes
  // the owner, whose wait_any reports it (on_completion fires then: SimGrid
  // fires it itself only for maestro's activities), and the owner refills
  // its pool. Host-to-host Comms always register with maestro
  // (Comm::sendto_init detaches them), so flows are two-host Execs with one
  // byte amount, which the default host model turns into the same network
  // action (HostCLM03Model::execute_parallel calls communicate()).
  //
  // Signal mode (SimOptions::signal_completions, the default from that many
  // ranks): no actor work per activity. Every activity is a flow, CPU work
  // over the node's memory link (Platform work_as_flows), so the network's
  // one signal, Link::on_communication_state_change, reports each completion in maestro
  // whoever created it; the replay handles them in Engine::on_time_advance
  // (after every model's update, before handle_ended_actions posts them),
  // starting the next activities from maestro (no simcall). Owners only
  // create blank Execs, kBatch at a time, and sleep on a wake-up Exec that
  // the replay starts when a pool runs low; each activity still sits in
  // its owner's short list. Fixed latencies are timers, and so are the
  // compute stream's ops (one at a time on their GPU, never shared), and
  // with flow domains (the default) every flow is shared by the replay
  // itself (DomainFlow, flow_domains.h, replay_domains.cc), so SimGrid
  // keeps the clock and the timers, creates no activity per flow, and no
  // owner actor is started.
  struct Owner {
    std::vector<sg4::ExecPtr> pool;       // blank Execs, not yet handed out
    std::vector<sg4::ActivityPtr> waits;  // everything this actor created and waits on
    sg4::ExecPtr stop;                    // never handed out: started to wake the actor at the end
    bool woken = false;                   // signal mode: stop started early, to refill the pool
  };
  static constexpr size_t kPool = 8;
  static constexpr size_t kBatch = 8, kLow = 2;  // signal mode: refill to kBatch once kLow are left
  void OwnerLoop(size_t i);
  void OnSignalled();
  void After(double seconds, Task t);  // a fixed latency: t completes after `seconds`
  // Compute or CPU memory work: `amount` jittered, plus `unjittered` (a stall).
  void Work(sg4::Host* host, double amount, Task t, double unjittered = 0);
  // Signal mode with flow domains (SimOptions::flow_domains): a flow of
  // `bytes` on its route, shared max-min fairly by the replay itself
  // (flow_domains.h). False when not in that mode or the route is not one
  // it solves (then it is a SimGrid flow).
  bool DomainFlow(const sg4::Host* from, const sg4::Host* to, double bytes, const Task& t);
  int32_t FlowRoute(const sg4::Host* from, const sg4::Host* to, int64_t source);
  void MarkDirty(int32_t domain);
  // Brings every domain an event touched up to now: ends its flows due now
  // (their tasks' Done), re-solves it and sets its timer. Called last by
  // every engine callback that can start a flow.
  void Settle();
  void SetDomainTimer(int32_t domain, double end);
  sg4::ExecPtr NewFlow(const sg4::Host* from, const sg4::Host* to, double bytes, const Task& t);
  // A task's flows' source (the route cache's key): its rank's stream, or
  // -1 for a flow into the simulated ranks from outside.
  int64_t Source(const Task& t) const {
    return t.local < 0 ? -1
                       : static_cast<int64_t>(t.local) * kNumStreams + static_cast<int64_t>(plan_.ops[t.op].stream);
  }
  void StartOwners();
  void StopOwners();
  sg4::ExecPtr NewExec(const Task& t);

  struct Collective {
    int flows_left = 0;
    int steps = 0;  // ring steps (kRingSteps)
    double bytes_per_flow = 0;
    std::vector<int> launched, sent, recv;  // per local rank: steps started, sent, received
  };

  static constexpr int kDelay = -2;
  static constexpr int kReduce = -3;
  static constexpr int kStage = -4;        // a pageable copy's pass through pinned staging (CPU memory)
  static constexpr int kCopyKernels = -5;  // a copy's side kernels on the GPU after its DMA (Op::copy_bytes)
  // Op-major: the ranks run the same ops at about the same time (a
  // collective completes on all of them at once), so op-major keeps the
  // instances touched together on the same cache lines; rank-major put each
  // a whole rank's ops apart, a cache miss per instance at 1024 ranks.
  int64_t Instance(int local, OpId op) const { return static_cast<int64_t>(op) * nranks_ + local; }
  // A rank runs one op of a stream at a time (each waits for its stream
  // predecessor, and a rank runs one stage's ops), so an instance's start
  // is kept per rank and stream while it runs: 8 bytes a stream instead of
  // 8 an instance (787 MB for the 10T GPT on 4096 GPUs).
  size_t Running(int local, OpId op) const {
    return static_cast<size_t>(local) * kNumStreams + static_cast<size_t>(plan_.ops[op].stream);
  }
  // The fixed latency of the op's transfer (hardware.*.latency), 0 if none.
  double Latency(const Op& o) const;
  // SimOptions::jitter: the factor scaling task t's work (1 without jitter).
  double Jitter(const Task& t) const;
  double Stall(const Task& t, double seconds) const;  // SimOptions::stall_rate: 0 or stall_time
  double GpuWork(const Op& o) const;
  // The GPU host's speed: peak_flops x efficiency (GpuWork's unit per second).
  double GpuSpeed() const { return hw_.gpu.peak_flops.flops_per_s * hw_.gpu.efficiency; }
  void StageOrTransfer(int local, OpId op);
  int64_t StagedBytes(const Op& o, int rank) const;
  void Transfer(int local, OpId op);
  void CollectiveFlows(OpId op);
  void OnDone(const void* key);  // an activity's completion
  void Done(const Task& t);      // a task's: an activity's or a timer's
  void Delay(double seconds, Task t);
  void Ready(int local, OpId op);
  void Start(int local, OpId op);
  void StartCollective(OpId op);
  void Flow(sg4::Host* from, sg4::Host* to, double bytes, Task t);
  // Starts `a` for task `t`.
  void Launch(sg4::ActivityPtr a, Task t);
  void Complete(int local, OpId op, double end);
  void StepDone(OpId op, const Task& t);
  void TrySend(OpId op, int local);
  int LocalOf(int rank) const { return pf_.Local(rank); }
  // The simulated ranks that run op `op` (those of its stage).
  const std::vector<int>& StageLocals(OpId op) const { return stage_locals_[static_cast<size_t>(plan_.ops[op].stage)]; }
  void Progress();

  const Plan& plan_;
  const HardwareSpec& hw_;
  SimOptions opt_;
  std::vector<int> ranks_;
  Platform& pf_;
  int nops_ = 0;
  int nranks_ = 0;
  std::vector<std::vector<OpId>> succ_;  // deps reversed, plus stream successor
  std::vector<int> npred_;
  std::vector<int64_t> staged_;  // per op: a coalesced write's staged bytes (StagedBytes)
  // Per instance: the ops it still waits on. 16 bits (197 MB rather than
  // 394 for the 10T GPT on 4096 GPUs); a plan op waits on a few.
  static constexpr int kMaxPreds = 65535;
  int most_preds_ = 0;
  std::vector<uint16_t> remaining_;
  std::vector<double> start_;                   // per simulated rank and stream: its running op's start (Running)
  std::vector<int> coll_ready_;                 // per op
  std::vector<int> stage_of_;                   // per simulated rank: its pipeline stage
  std::vector<std::vector<int>> stage_locals_;  // per stage: its simulated ranks
  int64_t expected_ = 0;                        // op instances to complete (each rank runs its stage's ops)
  std::unordered_map<OpId, Collective> colls_;
  // Keyed by the s4u activity, or in signal mode by its implementation
  // (all the network signal gives).
  std::unordered_map<const void*, std::pair<sg4::ActivityPtr, Task>> live_;
  bool signals_ = false;
  // Signal mode times the compute stream's ops (Start): unless a pass runs
  // on another stream (a hand-made plan's; the planner never does), where
  // it could share its GPU with them.
  bool time_compute_ = false;
  // Signal mode with flow domains: the flows' tasks by tag, each domain's
  // timer (by domain), the domains an event touched, and the routes found
  // per source (a rank's stream uses a few).
  bool domains_on_ = false;
  FlowDomains domains_;
  std::vector<Task> flow_task_;
  std::vector<uint32_t> free_tags_;
  std::vector<simgrid::kernel::timer::Timer*> domain_timer_;
  std::vector<double> domain_timer_at_;
  std::vector<int32_t> dirty_;
  std::vector<uint8_t> is_dirty_;
  std::vector<uint32_t> due_;
  bool settling_ = false;
  struct KnownRoute {
    const sg4::Host* from;
    const sg4::Host* to;
    int32_t route;
  };
  std::vector<std::vector<KnownRoute>> routes_by_source_;  // [source + 1]
  size_t span_chunk_ = 0;               // on_spans's frame (opt.spans_per_frame), 0 when unset; fixed in Run
  std::vector<const void*> signalled_;  // completions since the last time advance
  // Completed activities are released only after the engine has finished
  // handling them: dropping the last reference inside the completion
  // callback frees memory SimGrid still uses. Those that completed before
  // the current simulated time are done with.
  std::vector<sg4::ActivityPtr> finished_;
  double finished_at_ = 0;
  int64_t completed_ = 0;
  int last_percent_ = -1;
  std::vector<Owner> owners_;  // [simulated rank], then the collectives'
  std::unordered_map<long, size_t> owner_of_pid_;
  bool stopping_ = false;
};

}  // namespace strata::sim
