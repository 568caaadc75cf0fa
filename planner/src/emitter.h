// Emitter: the plan being written (private to the planner). Every pass
// creates its buffers and ops here, and nowhere else touches the plan's
// lists; the emitter keeps what appending an op needs to know:
//  - the stamp of new ops (micro step, phase, module), set by the pass
//    that is emitting;
//  - the last op of each stream (streams are FIFO);
//  - the host's waits: after HostWaits, the first op emitted on each
//    stream depends on what the host waited for, as everything issued
//    after a torch.cuda.synchronize() does.
#pragma once

#include <string>
#include <vector>

#include "strata/core/model.h"
#include "strata/plan/plan.h"

namespace strata::detail {

// How a new buffer is marked: what DeepSpeed pins in CPU memory, and which
// swap directory (RunSpec::nvme_dirs, -1: none) each NVMe state goes to.
struct BufferRules {
  bool pin_params = false;      // offload_param.pin_memory: CPU low-precision parameters
  bool pin_optimizer = false;   // offload_optimizer.pin_memory: CPU gradients and optimizer states
  bool pin_checkpoints = true;  // CPU checkpoints (pageable on DeepSpeed's blocking path)
  int param_nvme_dir = -1, optim_nvme_dir = -1;
};

class Emitter {
 public:
  Emitter(const ModelGraph& graph, BufferRules rules);
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;

  Plan& plan() { return plan_; }
  const Plan& plan() const { return plan_; }
  Plan Take() { return std::move(plan_); }

  BufferId NewBuffer(std::string name, Tier tier, StateKind kind, Bytes bytes, bool resident = false);
  // A GPU buffer that lives for op `op` alone (a collective's flattened
  // copy of its input or output): allocated when it starts, freed when it
  // ends.
  BufferId Transient(Op& op, std::string name, StateKind kind, Bytes bytes);
  // A gradient buffer that lives for op `op` alone (the step's flattened or
  // fp32 copies of the gradient): allocated, written and freed by it.
  BufferId StepTransient(Op& op, std::string name, Bytes bytes);

  // A new op with the current stamp; Emit appends it (dropping -1 and
  // repeated dependencies) and returns its id.
  Op NewOp(std::string name, OpKind kind, Stream stream) const;
  // The compute op of `module`'s forward, recomputation or backward
  // ("m0.fwd.NAME", "m0.recompute.NAME", "m0.bwd.NAME"), on the compute
  // stream, with the current stamp.
  Op NewComputeOp(int module, bool backward, bool recompute) const;
  OpId Emit(Op op);
  // An op the host issued before its pending waits (Strata's early reads,
  // planned after them): it takes none of them, and leaves them pending.
  OpId EmitBeforeWaits(Op op);
  OpId LastOn(Stream s) const { return last_[static_cast<int>(s)]; }

  // The stamp of new ops.
  int micro() const { return micro_; }
  void SetMicro(int micro) {
    micro_ = micro;
    tag_ = "m" + std::to_string(micro) + ".";
  }
  void SetPhase(Phase p) { phase_ = p; }
  void SetModule(int module) { module_ = module; }
  // Ops outside any module (reductions, the step): phase p, module -1.
  void Outside(Phase p) {
    phase_ = p;
    module_ = -1;
  }
  // The micro step's prefix of op and buffer names ("m3."), made once per
  // micro step: every op's name starts with it.
  const std::string& Tag() const { return tag_; }

  // Everything the host issues from now on waits for `ops`.
  void HostWaits(const std::vector<OpId>& ops);
  // torch.cuda.synchronize(): the host waits for the last op of every GPU
  // stream (compute, allgathers and reductions, copies).
  void DeviceSynchronize();
  // A host op (a hook) that what the host launches next on the GPU streams
  // (compute, copies, collectives) waits for: the first op emitted on each
  // of them after it depends on it. The NVMe and CPU optimizer streams,
  // driven by their own threads and swappers, do not.
  void HostIssuesAfter(OpId host_op);

 private:
  const ModelGraph& graph_;
  const BufferRules rules_;
  Plan plan_;
  int micro_ = 0;
  std::string tag_ = "m0.";
  Phase phase_ = Phase::kForward;
  int module_ = -1;
  OpId last_[kNumStreams];  // last op emitted per stream
  // The GPU streams' ops the host last waited for; the first op emitted on
  // each stream after the wait depends on them (Emit).
  std::vector<OpId> sync_deps_;
  bool sync_pending_[kNumStreams] = {};
  OpId host_op_ = -1;  // the last HostIssuesAfter's op
  bool host_pending_[kNumStreams] = {};
  OpId waited_[kNumStreams];  // per stream: the latest op the host waited for (-1: none)
};

}  // namespace strata::detail
