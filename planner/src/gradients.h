// The gradient pass (private to the planner): where each backward writes
// its gradient and how gradients are reduced and moved to the optimizer,
// as DeepSpeed does it (planner_grads.cc; stages 1-2 in planner_flat.cc).
//  - Stages 2-3 copy each gradient into an IPG bucket of reduce_bucket_size
//    (contiguous_gradients) and reduce the bucket once the next gradient
//    would overflow it: stage 3 reduce-scatters and, with offload_optimizer,
//    moves the reduced shards through a CPU accumulator to the optimizer's
//    fp32 gradient; stages 1-2 all-reduce and each rank keeps the slices it
//    owns.
//  - Stages 0-1 reduce the replica once per iteration (ReduceReplica).
// The forward/backward pass drives it: GradSlot for each backward op,
// GradientOut after it, FlushBucket at the end of a micro step's backward.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "emitter.h"
#include "layout.h"

namespace strata::detail {

class GradientPass {
 public:
  // `last_compute` is the forward/backward pass's latest compute op, read
  // whenever a reduction starts after it; `optim_slot_user` the last user
  // of each optimizer swap buffer, shared with the step pass.
  GradientPass(const Scenario& s, const ReleaseProfile& release, const ModelGraph& graph, const Layout& lay,
               Emitter& em, const OpId& last_compute, std::vector<OpId>& optim_slot_user);

  // Resets the per-micro-step state for a micro step of these positions.
  void BeginMicro();
  // The per-micro-step state, exchanged with a stash (1F1B runs other
  // micro steps' passes between a micro step's forward and its backward).
  struct MicroState {
    std::vector<BufferId> pending;  // per group: its own gradient buffer, -1 if none
    std::vector<int> last_use;      // per group: its last backward position
  };
  void SwapMicroState(MicroState& st);

  // Stages 2-3 backward of group gi at `pos` by `op`: where it writes its
  // gradient (a slot of the IPG bucket, flushing the bucket first if it does
  // not fit, or its own buffer for a group used twice or larger than the
  // bucket).
  Region GradSlot(int gi, int pos, Op& op);
  // After the backward op at `pos` wrote group gi's gradient.
  void GradientOut(int gi, int pos);
  // Reduces the bucket being filled (the end of a micro step's backward).
  void FlushBucket();
  // qgZ (coalesced_collectives.py all_to_all_quant_reduce): the bucket's
  // matrices reduced in int4 within each node, then across nodes, after
  // `prev`; returns the last op, or `prev` when none qualifies, and the
  // bytes of the groups left to the plain reduce-scatter in *plain.
  OpId QuantizedReduction(const std::string& name, const std::vector<int>& groups, const std::vector<BufferId>& bufs,
                          OpId prev, int64_t* plain);
  // The reduction the next compute must wait for (without overlap_comm),
  // -1 if none; taking it clears it.
  OpId TakeBlock() { return std::exchange(block_, -1); }
  // Stages 0-1, once per iteration after the last backward.
  void ReduceReplica();

 private:
  void OwnGradientOut(int gi);
  void FlushFlat();
  // The bucket being filled, handed to its reduction (the filling state is
  // reset): its groups, their gradients, and every buffer holding them.
  struct TakenBucket {
    std::vector<int> groups;
    std::vector<Region> src;
    std::vector<BufferId> bufs;
  };
  TakenBucket TakeBucket();
  // After the reduction of `groups` ending with `last`: the IPG buffer's
  // next filler waits for it, and without overlap_comm the next compute.
  void FinishFlush(const std::vector<int>& groups, OpId last);
  // Stages 1-2: reduces groups[k] (gradient at src[k]) to their owners and
  // moves the owned slices where the optimizer reads them; `bucket` and
  // `pending` are freed once the reduction no longer needs them.
  OpId ReduceOwned(const std::vector<int>& groups, const std::vector<Region>& src, BufferId bucket,
                   std::vector<BufferId> pending, OpId prev, const std::string& name);
  // Stage 3 with offload_optimizer: the reduced shards of a bucket go to the
  // CPU accumulator, and at the accumulation boundary as fp32 to the
  // optimizer.
  OpId OffloadGradients(const std::vector<int>& groups, const std::vector<Region>& shards,
                        const std::vector<BufferId>& reduced, OpId prev);

  const Scenario& scenario_;
  const ReleaseProfile& release_;
  const ModelGraph& graph_;
  const Layout& lay_;
  Emitter& em_;
  Plan& plan_;
  const OpId& last_compute_;
  std::vector<OpId>& optim_slot_user_;

  MicroState micro_;
  std::vector<int> bucket_;               // groups awaiting reduction
  BufferId bucket_buf_ = -1;              // the IPG bucket being filled
  int64_t bucket_fill_ = 0;               // its elements in use
  std::vector<Region> bucket_src_;        // per bucket_ entry: its gradient
  std::vector<BufferId> bucket_pending_;  // own buffers of the bucket's groups
  OpId bucket_user_[2] = {-1, -1};        // the last op of each IPG buffer's reduction
  int bucket_index_ = 0;                  // flushes so far (overlap_comm alternates two buffers)
  OpId block_ = -1;                       // reduction the next compute must wait for (!overlap_comm)
  // Per group: the last copy into the CPU accumulator (stages 1-2), and the
  // last op that read its accumulated gradient back to the GPU (stage 3;
  // the next micro step's add into the CPU accumulator follows it).
  std::vector<OpId> acc_writer_, acc_reader_;
  size_t grad_slot_next_ = 0;  // the next swap buffer that stages fp32 gradients
};

// A gradient partition that is not resident (stage 3 on the GPU under the
// release's scoped_gpu_gradient_partition): allocated by the first op that
// writes it, freed by the last that touches it.
void ScopeGradientPartition(const Layout& lay, Plan& plan);

}  // namespace strata::detail
