// DeepSpeed's stage-3 parameter coordinator (policy.prefetch: deepspeed):
// prefetch issue points for a given bucket, max_live and reuse distance, the
// NVMe read-ahead and its swap buffers. Each expectation is worked out from
// partitioned_param_coordinator.py's rules in the comment above it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "strata/plan/validator.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata {
namespace {

// An MLP of seven layers on 2 ranks, stage 3. Persistence threshold 500:
// the biases (500 elements; fc6's 10) are persistent, as DeepSpeed's
// per-tensor rule keeps them, so each module fetches one tensor, its
// weight: fc0-fc5 250,000 elements each (500x500), fc6 5,000. Positions:
// forward 0-6 (fc0..fc6), backward 7-13 (fc6..fc0). Every weight use is an
// allgather.
Scenario Mlp(int64_t bucket, int64_t max_live, int64_t reuse) {
  Scenario s = testing::SmallGpt(3, 2);
  s.model.kind = ModelKind::kMlp;
  s.model.sizes = {500, 500, 500, 500, 500, 500, 500, 10};
  s.zero.stage3_param_persistence_threshold = Elements(500);
  s.zero.stage3_prefetch_bucket_size = Elements(bucket);
  s.zero.stage3_max_live_parameters = Elements(max_live);
  s.zero.stage3_max_reuse_distance = Elements(reuse);
  return s;
}

using testing::MustPlanValid;

const char* Release(DeepSpeedStage3 v) {
  return v == DeepSpeedStage3::kV05 ? "v0.5" : v == DeepSpeedStage3::kV0313 ? "v0.3.13" : "current";
}

// Mlp(bucket, 1e9, 0) as DeepSpeed release `v` plans it; v0.5 with its
// trace aligned (policy.aligned_trace), so its prefetch runs as written.
Plan MlpPlan(DeepSpeedStage3 v, int64_t bucket) {
  Scenario s = Mlp(bucket, 1'000'000'000, 0);
  s.policy.deepspeed_stage3 = v;
  s.policy.aligned_trace = true;
  return MustPlanValid(s);
}

// Forward allgathers of micro step 0, by group index: the module whose
// compute each waits for (-1: issued before the first compute).
std::map<int, int> ForwardIssuePoints(const Plan& p) {
  std::map<int, int> at;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kAllGather || op.micro_step != 0 || op.name.rfind("m0.fwd.allgather.fc", 0) != 0) continue;
    int after = -1;
    for (OpId d : op.deps)
      if (d >= 0 && (p.ops[d].kind == OpKind::kForward || p.ops[d].kind == OpKind::kBackward))
        after = std::max(after, p.ops[d].module);
    at[std::stoi(op.name.substr(std::string("m0.fwd.allgather.fc").size()))] = after;
  }
  return at;
}

int64_t Gathers(const Plan& p) {
  int64_t n = 0;
  for (const Op& op : p.ops) n += op.kind == OpKind::kAllGather && op.phase != Phase::kStep;
  return n;
}

// Bucket 1 element: at each module the first group not yet available is
// prefetched whatever its size, so fc_j (j >= 2) is issued at module j-1's
// fetch, after module j-2's compute: one group ahead. Strata's window never
// prefetches a group larger than the bucket: on demand, after j-1's compute.
// At fc6's forward (position 6) the walk passes fc6's backward use
// (position 7) and marks it, but the release after position 6 runs at step
// id 7 and keeps only marks beyond it: fc6 is released and gathered again,
// 14 allgathers in all.
TEST(Coordinator, TheNextGroupIsPrefetchedPastTheBucket) {
  Scenario s = Mlp(1, 1'000'000'000, 0);
  const Plan p = MustPlanValid(s);
  EXPECT_EQ(Gathers(p), 14);
  const auto ds = ForwardIssuePoints(p);
  ASSERT_EQ(ds.size(), 7u);
  EXPECT_EQ(ds.at(0), -1);
  EXPECT_EQ(ds.at(1), -1);  // prefetched at fc0's fetch
  for (int j = 2; j < 7; ++j) EXPECT_EQ(ds.at(j), j - 2) << "fc" << j;
  s.policy.prefetch = PrefetchKind::kWindow;
  const auto window = ForwardIssuePoints(MustPlanValid(s));
  for (int j = 1; j < 7; ++j) EXPECT_EQ(window.at(j), j - 1) << "fc" << j;
}

// Bucket 375,750 (1.5 weights): each fetch prefetches weights while fewer than
// 375,750 elements are taken, so two per call: fc1, fc2 at fc0's fetch; fc3,
// fc4 at fc1's (after compute 0); fc5, fc6 at fc2's (after compute 1). The
// budget is per call, so the prefetch runs further ahead at every module.
TEST(Coordinator, BucketBudgetIsPerFetchAndOvershootsByOneGroup) {
  const auto at = ForwardIssuePoints(MustPlanValid(Mlp(375'750, 1'000'000'000, 0)));
  const std::map<int, int> want = {{0, -1}, {1, -1}, {2, -1}, {3, 0}, {4, 0}, {5, 1}, {6, 1}};
  EXPECT_EQ(at, want);
}

// max_live caps only the prefetch: at 300,000 (one group and a bit) the
// budget after fetching fc_j (fc_{j-1} released after its compute) is
// 50,000 > 0, so one weight ahead; at 1 element there is no prefetch, yet
// every group is still fetched when its module needs it.
TEST(Coordinator, MaxLiveCapsOnlyThePrefetch) {
  const auto one_ahead = ForwardIssuePoints(MustPlanValid(Mlp(1'000'000'000, 300'000, 0)));
  for (int j = 2; j < 7; ++j) EXPECT_EQ(one_ahead.at(j), j - 2) << "fc" << j;
  const Plan p = MustPlanValid(Mlp(1'000'000'000, 1, 0));
  const auto none = ForwardIssuePoints(p);
  ASSERT_EQ(none.size(), 7u);
  for (int j = 1; j < 7; ++j) EXPECT_EQ(none.at(j), j - 1) << "fc" << j;
  EXPECT_EQ(Gathers(p), 14);  // reuse distance 0: every use gathers
}

// With a bucket and max_live that admit everything, fc0's fetch prefetches
// fc1-fc6 and then walks into the backward uses of groups it holds, marking
// them: fc0-fc5 are kept until their backward use, whatever
// max_reuse_distance says. fc6's mark (position 7) is not beyond the step id
// its release sees (7): released and gathered again. 8 allgathers. Strata's
// window with reuse distance 0 keeps only fc6 across the turn (13).
TEST(Coordinator, PrefetchPastALaterUseKeepsTheGroup) {
  Scenario s = Mlp(1'000'000'000, 1'000'000'000, 0);
  EXPECT_EQ(Gathers(MustPlanValid(s)), 8);
  s.policy.prefetch = PrefetchKind::kWindow;
  EXPECT_EQ(Gathers(MustPlanValid(s)), 13);
}

// max_reuse_distance with on-demand fetches (max_live 1): after fc6's
// forward the next module is fc6's backward (0 elements in between), so
// fc6 is kept when the distance is above 0; fc5's next use comes after fc6's
// forward and backward (10,020 elements: the distance counts every
// parameter of the modules, fc6's persistent bias too): kept at 10,021,
// not at 10,020.
TEST(Coordinator, ReuseDistanceCountsTheModulesInBetween) {
  EXPECT_EQ(Gathers(MustPlanValid(Mlp(1'000'000'000, 1, 1))), 13);
  EXPECT_EQ(Gathers(MustPlanValid(Mlp(1'000'000'000, 1, 5'010 + 5'010))), 13);
  EXPECT_EQ(Gathers(MustPlanValid(Mlp(1'000'000'000, 1, 5'010 + 5'011))), 12);
}

// NVMe parameters (MidGpt, one rank, max_in_cpu 0, reuse distance 0): every
// H2D of an NVMe-homed group reads a swap buffer its own read filled; reads
// run ahead of the fetches; a buffer is read into again only after the
// compute that released its previous holder.
TEST(Coordinator, NvmeReadsAheadIntoBuffersHeldUntilRelease) {
  Scenario s = testing::MidGpt(3, 1);
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_param.max_in_cpu = Elements(0);
  s.zero.stage3_max_reuse_distance = Elements(0);
  const Plan p = MustPlanValid(s);
  std::map<BufferId, OpId> last_read;  // per swap buffer
  std::map<BufferId, OpId> released_by;
  int reads = 0, ahead = 0;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kNvmeRead && op.phase != Phase::kStep) {
      ++reads;
      const BufferId slot = op.writes.at(0);
      ASSERT_EQ(p.buffers[slot].name.rfind("swap.param.", 0), 0u) << op.name;
      last_read[slot] = op.id;
    }
    if (op.kind == OpKind::kCopyH2D && op.name.find("fetch_h2d") != std::string::npos &&
        p.buffers[op.reads.at(0)].name.rfind("swap.param.", 0) == 0) {
      const OpId rd = last_read.at(op.reads[0]);
      EXPECT_NE(std::find(op.deps.begin(), op.deps.end(), rd), op.deps.end()) << op.name;
      // Issued (after the compute it depends on) at least one module before
      // its own read? Then the read ran ahead.
      int read_after = -1, fetch_after = -1;
      for (OpId d : p.ops[rd].deps)
        if (d >= 0 && p.ops[d].stream == Stream::kCompute) read_after = std::max<int>(read_after, d);
      for (OpId d : op.deps)
        if (d >= 0 && p.ops[d].stream == Stream::kCompute) fetch_after = std::max<int>(fetch_after, d);
      ahead += read_after < fetch_after;
    }
  }
  EXPECT_GT(reads, 8);
  EXPECT_GT(ahead, 0);
}

// DeepSpeed v0.3.16-v0.5.10's coordinator (policy.deepspeed_stage3: v0.5,
// stage3.py at tag v0.5.10): a fetch that gathers or finds a prefetch in
// flight ends in torch.cuda.synchronize(). Bucket 1 element, reuse 0, the
// gradient bucket (30,000) smaller than a weight, so each weight's gradient
// is reduce-scattered right after its backward. Backward positions: 7 fc6
// (released after its forward: gathered now, a barrier that also completes
// fc5's prefetch from position 6), 8 fc5 (available: no fetch, no barrier,
// and no prefetch since fc4's, issued at 7, is in flight), 9 fc4 (in
// flight: a barrier), 10 fc3 ... So fc4's backward waits for fc5's
// reduce-scatter, while fc5's does not wait for fc6's. Current DeepSpeed
// waits on the gathers' events only: neither waits (the check's teeth).
// 14 allgathers either way, and the forward issue points are unchanged.
TEST(Coordinator, V05FetchesThatWaitAreDeviceBarriers) {
  for (const auto v : {DeepSpeedStage3::kCurrent, DeepSpeedStage3::kV05}) {
    SCOPED_TRACE(Release(v));
    const Plan p = MlpPlan(v, 1);
    EXPECT_EQ(Gathers(p), 14);
    const auto at = ForwardIssuePoints(p);
    for (int j = 2; j < 7; ++j) EXPECT_EQ(at.at(j), j - 2) << "fc" << j;
    const testing::Order order(p);
    auto id = [&](const std::string& name) { return testing::FindOp(p, name)->id; };
    const bool v05 = v == DeepSpeedStage3::kV05;
    EXPECT_EQ(order.HappensBefore(id("m0.reduce.fc5.weight"), id("m0.bwd.fc4")), v05);
    EXPECT_EQ(order.HappensBefore(id("m0.reduce.fc4.weight"), id("m0.bwd.fc3")), v05);
    EXPECT_FALSE(order.HappensBefore(id("m0.reduce.fc6.weight"), id("m0.bwd.fc5")));
  }
}

// v0.3.16-v0.5.10 register the top module's reset_step pre-hook after its
// sub-module hook, so after the top module's hook every step id is one
// behind the recorded trace: get_params_to_prefetch and
// get_reuse_distance_in_numel find another module there. Only the top
// module's own hook prefetches (fc0, bucket 1); every later weight is
// gathered at its own module, after the previous compute (fc_j after
// compute j-1, where the aligned trace issues it after j-2), and with a
// reuse distance that would keep every forward weight for its backward
// (aligned: 7 allgathers) nothing is kept: 14.
TEST(Coordinator, V05TraceOffByOneDisablesPrefetchAndReuse) {
  for (const bool aligned : {false, true}) {
    SCOPED_TRACE(aligned ? "aligned" : "off by one");
    Scenario s = Mlp(1, 1'000'000'000, 1'000'000'000);
    s.policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
    s.policy.aligned_trace = aligned;
    const Plan p = MustPlanValid(s);
    const auto at = ForwardIssuePoints(p);
    EXPECT_EQ(at.at(0), -1);
    EXPECT_EQ(at.at(1), aligned ? -1 : 0);
    for (int j = 2; j < 7; ++j) EXPECT_EQ(at.at(j), aligned ? j - 2 : j - 1) << "fc" << j;
    EXPECT_EQ(Gathers(p), aligned ? 7 : 14);
  }
  // Bucket 1.5 weights: the top module's hook prefetches fc0 and fc1 before
  // any compute (fc1 would otherwise wait for fc0's compute); later
  // weights are gathered on demand. Aligned, fc0's own hook then prefetches
  // fc2 too, before any compute.
  for (const bool aligned : {false, true}) {
    SCOPED_TRACE(aligned ? "aligned, bucket 1.5 weights" : "off by one, bucket 1.5 weights");
    Scenario s = Mlp(375'750, 1'000'000'000, 0);
    s.policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
    s.policy.aligned_trace = aligned;
    const auto at = ForwardIssuePoints(MustPlanValid(s));
    EXPECT_EQ(at.at(0), -1);
    EXPECT_EQ(at.at(1), -1);
    EXPECT_EQ(at.at(2), aligned ? -1 : 1);
    for (int j = 3; j < 7; ++j)
      if (!aligned) {
        EXPECT_EQ(at.at(j), j - 1) << "fc" << j;
      }
  }
}

// v0.5's _allgather_param synchronizes the device before launching each
// prefetched parameter's allgather. Bucket 375,750 (1.5 weights): at fc0's
// fetch the prefetch takes fc1 and fc2; fc2's launch waits for fc1's
// allgather, so fc0's compute (issued after both) waits for fc1's but
// overlaps fc2's. Current DeepSpeed launches both and waits for neither.
// A bucket of 0 still prefetches one parameter in v0.5 (the walk stops at
// total >= 0): fc_j is issued at module j-1's fetch, after compute j-2, as
// with a bucket of 1; current DeepSpeed then prefetches nothing.
TEST(Coordinator, V05PrefetchedAllgathersRunOneAfterAnother) {
  for (const auto v : {DeepSpeedStage3::kCurrent, DeepSpeedStage3::kV05}) {
    SCOPED_TRACE(Release(v));
    const bool v05 = v == DeepSpeedStage3::kV05;
    const Plan p = MlpPlan(v, 375'750);
    const testing::Order order(p);
    const OpId fc0 = testing::FindOp(p, "m0.fwd.fc0")->id;
    EXPECT_EQ(order.HappensBefore(testing::FindOp(p, "m0.fwd.allgather.fc1.weight")->id, fc0), v05);
    EXPECT_FALSE(order.HappensBefore(testing::FindOp(p, "m0.fwd.allgather.fc2.weight")->id, fc0));
    const auto at = ForwardIssuePoints(MlpPlan(v, 0));
    for (int j = 2; j < 7; ++j) EXPECT_EQ(at.at(j), v05 ? j - 2 : j - 1) << "fc" << j;
  }
}

// Parameters offloaded to the CPU, two ranks: DeepSpeed's allgather copies
// each partition up with a blocking .to(device) (partition_parameters.py
// _all_gather_dtype / _all_gather_sequential), so the host waits for the
// copy before it issues anything else, not for the allgathers. Bucket 1.5
// weights: fc0's fetch prefetches fc1 and fc2, so fc0's compute (issued
// after) waits for fc2's copy but for neither prefetched allgather. v0.5's
// device barrier before each prefetched allgather makes fc0 wait for fc1's;
// its copies do not block on their own here. Strata's window never waits
// on the host. The copies stay on the H2D stream: the comm stream is every
// collective's FIFO, while DeepSpeed's allgather stream holds only copies
// and the allgathers already waited for.
TEST(Coordinator, OffloadedPartitionCopiesBlockTheHost) {
  for (int k = 0; k < 3; ++k) {
    const bool window = k == 2, v05 = k == 1;
    SCOPED_TRACE(window ? "window" : v05 ? "v0.5" : "current");
    Scenario s = Mlp(375'750, 1'000'000'000, 0);
    s.zero.offload_param.device = OffloadDevice::kCpu;
    if (v05) s.policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
    s.policy.aligned_trace = true;  // v0.5's prefetch as written
    if (window) s.policy.prefetch = PrefetchKind::kWindow;
    const Plan p = MustPlanValid(s);
    int copies = 0;
    for (const Op& op : p.ops) {
      if (op.name.find("fetch_h2d") == std::string::npos) continue;
      ++copies;
      EXPECT_EQ(op.stream, Stream::kH2D) << op.name;
    }
    EXPECT_GT(copies, 0);
    const testing::Order order(p);
    auto before_fc0 = [&](const std::string& name) {
      return order.HappensBefore(testing::FindOp(p, name)->id, testing::FindOp(p, "m0.fwd.fc0")->id);
    };
    // v0.5's _allgather_param copies a CPU partition into its view: that
    // copy_ is the H2D copy, not a second device copy.
    for (const Op& op : p.ops) {
      if (v05 && op.kind == OpKind::kAllGather && op.phase != Phase::kStep) {
        EXPECT_EQ(op.copy_bytes.v, 3 * op.bytes.v) << op.name;
      }
    }
    EXPECT_EQ(before_fc0("m0.fwd.fetch_h2d.fc2.weight"), !window && !v05);
    EXPECT_EQ(before_fc0("m0.fwd.allgather.fc1.weight"), v05);
    EXPECT_FALSE(before_fc0("m0.fwd.allgather.fc2.weight"));
  }
}

// v0.5 with NVMe parameters: an allgather first makes its partitions
// resident synchronously (_ensure_availability_of_partitioned_params:
// swap_in(async_op=False) or synchronize_reads), so each forward compute
// waits for the reads of every group gathered before it, the prefetched
// ones included. Current DeepSpeed's compute waits only for its own
// module's gathers (teeth: some read of a prefetched group is not waited).
TEST(Coordinator, V05GathersWaitForTheirReadsOnTheHost) {
  for (const auto v : {DeepSpeedStage3::kCurrent, DeepSpeedStage3::kV05}) {
    SCOPED_TRACE(Release(v));
    Scenario s = testing::MidGpt(3, 1);
    s.zero.offload_param.device = OffloadDevice::kNvme;
    s.zero.offload_param.max_in_cpu = Elements(0);
    s.zero.stage3_max_reuse_distance = Elements(0);
    // v0.5's prefetch does not stop at NVMe partitions: its swap_in needs a
    // buffer per prefetched group (else "Not enough buffers").
    s.zero.offload_param.buffer_count = 32;
    s.policy.deepspeed_stage3 = v;
    s.policy.aligned_trace = true;  // v0.5's prefetch as written
    const Plan p = MustPlanValid(s);
    const testing::Order order(p);
    std::map<BufferId, OpId> last_read;  // per swap buffer
    std::vector<OpId> gathered_reads;    // reads of the groups fetched so far
    int waited = 0, not_waited = 0;
    for (const Op& op : p.ops) {
      if (op.phase == Phase::kStep) continue;
      if (op.kind == OpKind::kNvmeRead) last_read[op.writes.at(0)] = op.id;
      if (op.kind == OpKind::kCopyH2D && op.name.find("fetch_h2d") != std::string::npos)
        if (auto it = last_read.find(op.reads.at(0)); it != last_read.end()) gathered_reads.push_back(it->second);
      if (op.kind != OpKind::kForward) continue;
      for (OpId rd : gathered_reads) (order.HappensBefore(rd, op.id) ? waited : not_waited)++;
    }
    EXPECT_GT(waited, 0);
    if (v == DeepSpeedStage3::kV05)
      EXPECT_EQ(not_waited, 0);
    else
      EXPECT_GT(not_waited, 0);
  }
}

// v0.5 gathers a parameter into a list of per-rank views and reduce-scatters
// a gradient from one (partition_parameters.py _allgather_param, reached by
// every fetch and prefetch; _allgather_params, stage3.py _post_step's gather
// of the persistent parameters; _reduce_scatter_gradient); the PyTorch of
// the paper's stack flattens such a list into a copy of the whole first
// (ProcessGroupNCCL::allgather, reduce_scatter). Each v0.5 parameter
// allgather (the step's too) and gradient reduce-scatter holds a buffer of
// its whole bytes while it runs. Current DeepSpeed gathers into one buffer
// (no copy) and reduce-scatters a torch.cat of the bucket's gradients
// (reduce_scatter_coalesced), which it skips for one tensor that divides by
// the 2 ranks. With the default reduce bucket the gradients share
// buckets. With a bucket of 2,000 elements every gradient is reduced alone
// (each weight, 250,000 or fc6's 5,000, flushes the bucket before it, and
// its bias after it), an even tensor; with an odd last layer (501 -> 7)
// fc6's weight (3,507) and bias (7) and fc5's bias (501) do not divide.
// Persistence threshold 600: the biases stay persistent, so 14 parameter
// allgathers (Gathers), and one after each step.
std::vector<BufferId> Transient(const Op& op) {
  std::vector<BufferId> out;
  for (BufferId b : op.allocs)
    if (std::find(op.frees.begin(), op.frees.end(), b) != op.frees.end()) out.push_back(b);
  return out;
}

TEST(Coordinator, ListCollectivesHoldAFlattenedCopy) {
  for (const int64_t bucket : {int64_t{0}, int64_t{2'000}}) {
    for (const bool odd : {false, true}) {
      for (const auto v : {DeepSpeedStage3::kCurrent, DeepSpeedStage3::kV05}) {
        SCOPED_TRACE(std::string(Release(v)) + (odd ? ", odd sizes" : "") + ", bucket " + std::to_string(bucket));
        const bool v05 = v == DeepSpeedStage3::kV05;
        Scenario s = Mlp(1, 1'000'000'000, 0);
        if (odd) s.model.sizes = {500, 500, 500, 500, 500, 500, 501, 7};
        s.zero.stage3_param_persistence_threshold = Elements(600);
        if (bucket > 0) s.zero.reduce_bucket_size = Elements(bucket);
        s.policy.deepspeed_stage3 = v;
        const Plan p = MustPlanValid(s);
        int step_gathers = 0, bucketed = 0, lone_even = 0, lone_odd = 0;
        for (const Op& op : p.ops) {
          if (op.kind != OpKind::kAllGather && op.kind != OpKind::kReduceScatter) continue;
          const bool gather = op.kind == OpKind::kAllGather;
          step_gathers += gather && op.phase == Phase::kStep;
          // A reduce-scatter has one move per group; a lone one is named
          // after its group.
          const bool lone = !gather && op.moves.size() == 1;
          bool divides = true;
          if (lone) {
            const std::string g = op.name.substr(op.name.find("reduce.") + 7);
            const auto it = std::find_if(p.param_groups.begin(), p.param_groups.end(),
                                         [&](const PlanParamGroup& pg) { return pg.name == g; });
            ASSERT_NE(it, p.param_groups.end()) << op.name;
            divides = it->elements.v % 2 == 0;
          }
          bucketed += !gather && op.moves.size() > 1;
          lone_even += lone && divides;
          lone_odd += lone && !divides;
          // The copy kernels around the transfer (reads plus writes), n = 2:
          // v0.5's fetch gather: torch.zeros (P), its partition (2 P/2), the
          // copy out (2 P); the step's: its partitions, the copy out and the
          // replicated_tensor copies; a reduce-scatter: the div_ (v0.5: of
          // the whole IPG buffer and any gradient larger than it) and the
          // flattening copy.
          const int64_t P = op.bytes.v, B = s.zero.reduce_bucket_size.v;
          int64_t divided = v05 ? 2 * B : P;
          if (v05)
            for (const Move& m : op.moves) divided += m.src.bytes.v / 2 > B ? m.src.bytes.v : 0;
          const bool flattened = v05 || !lone || !divides;
          const int64_t copies = gather ? (!v05                       ? 0
                                           : op.phase == Phase::kStep ? P + 4 * P
                                                                      : 4 * P)
                                        : 2 * divided + (flattened ? 2 * P : 0);
          EXPECT_EQ(op.copy_bytes.v, copies) << op.name;
          const auto transient = Transient(op);
          if (!v05 && (gather || (lone && divides))) {
            EXPECT_TRUE(transient.empty()) << op.name;
            continue;
          }
          ASSERT_EQ(transient.size(), 1u) << op.name;
          const Buffer& flat = p.buffers[transient[0]];
          EXPECT_EQ(flat.tier, Tier::kGpu) << op.name;
          EXPECT_EQ(flat.kind, StateKind::kCommBuffer) << op.name;
          EXPECT_EQ(flat.bytes, op.bytes) << op.name;
        }
        EXPECT_EQ(Gathers(p), 14);
        EXPECT_GT(step_gathers, 0);
        if (bucket == 0) {
          EXPECT_GT(bucketed, 0);
        } else {
          EXPECT_EQ(bucketed, 0);
          EXPECT_GT(lone_even, 0);
          EXPECT_EQ(lone_odd, odd ? 3 : 0);
        }
      }
    }
  }
}

// v0.3.15-v0.5.10's fetch_sub_module (not v0.3.13's) formats every parameter of the module into
// a discarded debug message, f"... norm={param.norm()}": a norm kernel
// over the whole parameter (persistent ones too) before each pass of the
// module, charged to its compute op; current DeepSpeed has none.
TEST(Coordinator, V05DebugNormsReadEveryParameter) {
  for (const auto v : {DeepSpeedStage3::kCurrent, DeepSpeedStage3::kV05, DeepSpeedStage3::kV0313}) {
    SCOPED_TRACE(Release(v));
    const Plan p = MlpPlan(v, 0);
    int compute = 0;
    for (const Op& op : p.ops) {
      if ((op.kind != OpKind::kForward && op.kind != OpKind::kBackward) || op.module < 0) continue;
      ++compute;
      int64_t params = 0;
      for (int gi : p.modules[op.module].param_groups) params += p.param_groups[gi].elements.v * 2;
      ASSERT_GT(params, 0) << op.name;
      EXPECT_EQ(op.copy_bytes.v, v == DeepSpeedStage3::kV05 ? params : 0) << op.name;
    }
    EXPECT_GT(compute, 0);
  }
}

// ZeRO-3 Offload as released (v0.3.13) registers no reset_step pre-hook on
// the top module (PR #867 added it in April 2021), so its trace lines up
// whatever policy.aligned_trace says: the same plan either way, with
// v0.5's aligned allgathers (7, fc_j issued after compute j-2) and no debug
// norms (above: the norms' host waits are the only difference from v0.5).
TEST(Coordinator, V0313TraceIsAligned) {
  auto plan = [](DeepSpeedStage3 v, bool aligned) {
    Scenario s = Mlp(1, 1'000'000'000, 1'000'000'000);
    s.policy.deepspeed_stage3 = v;
    s.policy.aligned_trace = aligned;
    return MustPlanValid(s);
  };
  const Plan v05 = plan(DeepSpeedStage3::kV05, true);
  const Plan p = plan(DeepSpeedStage3::kV0313, false);
  EXPECT_EQ(p, plan(DeepSpeedStage3::kV0313, true));
  EXPECT_EQ(Gathers(p), 7);
  EXPECT_EQ(ForwardIssuePoints(p), ForwardIssuePoints(v05));
  EXPECT_NE(ForwardIssuePoints(p), ForwardIssuePoints(plan(DeepSpeedStage3::kV05, false)));
}

// buffer_count 1 with groups kept for reuse (distance 1e9 covers the whole
// model): the second NVMe group's read finds every buffer held, DeepSpeed's
// "Not enough buffers 0 for swapping 1". Strict: an error; lenient: recorded.
TEST(Coordinator, TooFewParameterBuffersFire) {
  Scenario s = testing::MidGpt(3, 1);
  s.zero.offload_param.device = OffloadDevice::kNvme;
  s.zero.offload_param.max_in_cpu = Elements(0);
  s.zero.offload_param.buffer_count = 1;
  s.zero.stage3_max_reuse_distance = Elements(1'000'000'000);
  auto r = BuildPlan(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("[param_swap_buffers_exhausted]"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("Not enough buffers 0 for swapping 1"), std::string::npos);
  // How many it needs: found by planning, the smallest count that does not
  // run out (one fewer does).
  const std::optional<int> needed = NeededParamSwapBuffers(s);
  ASSERT_TRUE(needed.has_value());
  EXPECT_NE(r.status().message().find("it runs with buffer_count >= " + std::to_string(*needed)), std::string::npos)
      << r.status().message();
  Scenario enough = s;
  enough.zero.offload_param.buffer_count = *needed;
  EXPECT_TRUE(BuildPlan(enough).ok());
  enough.zero.offload_param.buffer_count = *needed - 1;
  EXPECT_FALSE(BuildPlan(enough).ok());
  EXPECT_EQ(NeededParamSwapBuffers(enough), needed);
  std::vector<PlannerCheck> checks;
  PlannerOptions lenient;
  lenient.strict = false;
  lenient.checks = &checks;
  ASSERT_TRUE(BuildPlan(s, lenient).ok());
  ASSERT_EQ(checks.size(), 1u);  // once, at the first read that finds none free
  EXPECT_EQ(checks[0].id, "param_swap_buffers_exhausted");
  EXPECT_NE(checks[0].message.find("it runs with buffer_count >= "), std::string::npos);
  // Released after each use, one buffer is enough.
  s.zero.stage3_max_reuse_distance = Elements(0);
  s.zero.stage3_prefetch_bucket_size = Elements(0);
  EXPECT_TRUE(BuildPlan(s).ok());
  EXPECT_FALSE(NeededParamSwapBuffers(s).has_value());  // it does not run out
}

}  // namespace
}  // namespace strata
