// The simulator: replays a plan, unchanged, on a SimGrid platform built from
// the scenario's hardware, where concurrent flows share links by SimGrid's
// flow-level (max-min fair) bandwidth model. SimGrid stays PRIVATE to this
// target.
//
// Model choices (see docs/simulator.md):
//  - Network model CM02 without cross-traffic, zero latency, no TCP window:
//    a pure bandwidth-sharing model one can reason about.
//  - Per node: each GPU is a host that runs one compute op at a time for the
//    seconds the compute model gives (cost/op_cost.h: GEMMs by shape
//    on a roofline, memory-bound kernels at HBM bandwidth, launch latency;
//    or FLOPs at peak x efficiency under the flat model); the CPU is a host
//    whose speed is cpu.memory_bandwidth (CPU Adam's work is the bytes it
//    touches, or their equivalent when the cores bind); PCIe is a
//    full-duplex link per GPU (H2D and D2H do not share) under its switch's
//    uplink and the host's ports; NVLink a full-duplex link per GPU (or
//    PCIe through the host when absent); NVMe one read and one write link
//    per node (all drives) shared by all its GPUs; the network a
//    full-duplex link per node (all NICs).
//  - GPU optimizer steps are HBM-bound: time = bytes / hbm_bandwidth.
//  - Collectives follow the ring over the real links: every rank sends
//    (n-1)/n of the bytes (2(n-1)/n for allreduce) to its ring successor at
//    once (kRing), or in n-1 dependent steps of bytes/n (kRingSteps; equal
//    on homogeneous links, tested).
//  - Symmetry: all ranks run the same plan, so nodes behave alike. With
//    reduce_symmetric_nodes, one node is simulated and the ring's
//    inter-node hop leaves through the node's network link up and enters
//    through its link down, as it does for every node of the real ring.
//  - Activities are created when their predecessors complete (SimGrid 3.32
//    becomes quadratic when all are created up front).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/core/status.h"
#include "strata/cost/endurance.h"
#include "strata/plan/plan.h"
#include "strata/timeline/timeline.h"

namespace strata::sim {

enum class CollectiveModel { kRing, kRingSteps };

struct SimOptions {
  CollectiveModel collectives = CollectiveModel::kRing;
  // Simulate one node when there are several (exact under SPMD symmetry).
  bool reduce_symmetric_nodes = true;
  // Draw a progress bar on stderr (only when stderr is a terminal).
  bool progress = false;
  // Called in the calling thread with the fraction of op instances done.
  std::function<void(double)> on_progress;
  // When set to true (from any thread), Simulate stops the simulation and
  // returns an error whose message is "simulation cancelled".
  const std::atomic<bool>* cancel = nullptr;
  // Refuse (InvalidArgument, before starting) a simulation of more op
  // instances than this (plan ops x simulated ranks): each costs about 45
  // bytes (about 38 in this process's timeline, 6 in the child) and 0.5-5 us
  // here (the least with every node simulated: flow domains), so 1e7 is
  // about half a GiB and seconds to a minute; docs/limits.md. A guard against an
  // accidental --all-nodes run of hours, not a hard limit (raise it: the
  // 10T GPT on 4096 GPUs, 98M instances, simulates; docs/simulator.md).
  int64_t max_op_instances = 10'000'000;
  // The simulator process is killed and Simulate returns an error after
  // this many seconds (a hang, or a far larger simulation than intended:
  // the largest the limit above admits takes about a minute here).
  double timeout_s = 600;
  // From this many simulated ranks on, activities are created by one owner
  // actor per simulated rank (replay.h: SimGrid 3.32 scans an actor's whole
  // activity list at every completion, and maestro's holds every activity
  // in flight); below it maestro creates them. The same results either way
  // (byte for byte at jitter 0; to SimGrid's precision with jitter).
  // Measured (bench/sim_bench BM_ActivityOwners, owners reported by signal):
  // 0.89x of maestro at 16 ranks, 1.06x at 256, 1.5x at 1024.
  int activity_owners_from_ranks = 256;
  // From that many ranks on, how the owners' activities are reported: true,
  // by the network's completion signal in maestro, every activity a flow
  // or, for the compute stream's ops and latencies, a timer (no actor work
  // per activity; replay.h); false, by each owner waiting on
  // its own (wait_any). The same timelines up to rounding either way
  // (with jitter, to SimGrid's precision: 1e-6 of the iteration, tested).
  bool signal_completions = true;
  // In signal mode, flows are shared max-min fairly by the replay itself,
  // link domain by link domain, as SimGrid's CM02 model shares them, instead
  // of as SimGrid activities, whose s4u and kernel layers cost most of an
  // all-nodes replay (simulator/src/flow_domains.h); SimGrid keeps the
  // clock and the timers. The same timelines either way, to 1e-11 s at
  // jitter 0 and 1e-6 of the iteration with it (flows that end nanoseconds
  // apart, merged by SimGrid's precision; Simulate.FlowDomainsGiveTheSameTimeline).
  bool flow_domains = true;
  // The child sends the completed op instances to this process in frames of
  // this many while it simulates (it never holds them all; they are copied
  // here while it runs). Any value >= 1 gives the same timeline.
  int64_t spans_per_frame = 1 << 16;
  // Symmetry breaking. Every activity's work (a kernel's FLOPs, a CPU op's
  // bytes of memory traffic, a transfer's or ring hop's bytes, a compute
  // timer's seconds; not a latency or a collective's copy kernels) is scaled
  // by 1 + jitter x u, u in [-1, 1) drawn from (jitter_seed, rank, op, ring
  // step) by a fixed hash: deterministic, and zero-mean per activity (a
  // collective, which ends with its slowest flow, comes out a little
  // slower). Why: SPMD ranks that run the same ops on equal partitions stay
  // in exact lockstep in a fluid model, and where nothing resynchronises
  // them (DeepSpeed's optimizer step has no collective inside its sub-group
  // loop) that lockstep is an unstable equilibrium: on hardware any noise
  // lets the ranks drift apart, so that one rank's NVMe writes overlap
  // another's reads. The amount matters little beside lockstep, but it
  // matters: the ZeRO-Infinity 0.5T row gives 1381 s exact and 1092, 1061
  // and 1046 s at 1e-9, 1e-3 and 1e-2, seeds within 0.3%; the 100B row
  // moves 4% from 1e-3 to 1e-2 (docs/simulator.md "Symmetry breaking").
  // 0 replays exactly, ranks in lockstep (the analytic tests; the one-node
  // reduction is exact only then). In [0, 0.5).
  double jitter = 1e-3;
  uint64_t jitter_seed = 0;
  // Stalls (docs/simulator.md "Stalls"): a rank's host stops now and then (a
  // garbage collection, a page-fault storm, OS noise) and its GPU idles.
  // Each compute-stream op of `s` seconds on a rank stalls with probability
  // min(1, stall_rate x s), drawn from (jitter_seed, rank, op) by a fixed
  // hash independent of the jitter's, and then takes stall_time more: on
  // average stall_rate stalls per second of a rank's compute. What it is
  // for: a stall on one rank delays every rank that next meets it in a
  // collective, so a schedule that synchronises its ranks often loses about
  // ranks x stall_rate x stall_time of its time while one that rarely does
  // loses about one rank's share; bounded jitter cannot show that. Off (0)
  // by default: no stall rate is measured here. Stalls break the symmetry
  // of nodes, so with stalls every node is simulated (reduce_symmetric_nodes
  // is ignored). Both >= 0 and finite, stall_time at most a year
  // (StallsInRange).
  double stall_rate = 0;  // per second of a rank's compute
  double stall_time = 0;  // seconds
  bool Stalls() const { return stall_rate > 0 && stall_time > 0; }
};

// SimOptions' stall fields: finite and not negative.
// Bounded by a year of stall_time (its FLOPs at any GPU speed stay finite).
inline bool StallsInRange(double rate, double time) { return rate >= 0 && time >= 0 && rate < 1e300 && time <= 3.2e7; }

// SimOptions::jitter's range, [0, 0.5) (so never NaN): Simulate refuses
// anything else, and the CLI checks it before planning.
inline bool JitterInRange(double jitter) { return jitter >= 0 && jitter < 0.5; }

struct SimResult {
  Timeline timeline;
  int64_t activities = 0;        // SimGrid activities created (timers included)
  int64_t domain_flows = 0;      // of those, flows the replay shared itself (SimOptions::flow_domains)
  int64_t max_domain_flows = 0;  // the most flows one link domain held at once
  int64_t stalls = 0;            // stalls drawn (SimOptions::stall_rate), on all simulated ranks
  double stalled_s = 0;          // their seconds, summed over those ranks
  std::vector<int> ranks;        // ranks simulated
  double wall_s = 0;             // host time spent simulating
  double peak_flops = 0;         // the GPU's peak FLOP/s (hardware.gpu.peak_flops): MFU's and HFU's denominator
  // The fraction of peak_flops the compute model gives a large GEMM
  // (hardware.gpu.efficiency, a preset's or the scenario's): MFU's ceiling.
  double gpu_efficiency = 1.0;
  DriveWear wear;  // the node's NVMe drives at the simulated rate (cost/endurance.h)
};

// Runs the simulation in a child process (SimGrid's engine can run once per
// process), so it may be called any number of times, from any thread. A
// process with one thread forks the child; a multi-threaded one (sweep and
// compare workers, the GUI) spawns the `strata-sim-worker` helper instead
// and sends it the plan, since a fork copies only the calling thread and
// any lock another thread held stays locked in the child.
Result<SimResult> Simulate(const Plan& plan, const HardwareSpec& hw, const SimOptions& options = {});

}  // namespace strata::sim
