// Emitter: buffers and ops appended to the plan being written (emitter.h).
#include "emitter.h"

#include <algorithm>

namespace strata::detail {

Emitter::Emitter(const ModelGraph& graph, BufferRules rules) : graph_(graph), rules_(rules) {
  std::fill(std::begin(last_), std::end(last_), -1);
  std::fill(std::begin(waited_), std::end(waited_), -1);
}

BufferId Emitter::NewBuffer(std::string name, Tier tier, StateKind kind, Bytes bytes, bool resident) {
  Buffer b;
  b.id = static_cast<BufferId>(plan_.buffers.size());
  b.name = std::move(name);
  b.tier = tier;
  b.kind = kind;
  b.bytes = bytes;
  b.resident = resident;
  // What DeepSpeed pins: swap and staging buffers always; the CPU copies of
  // offloaded state as the offload's pin_memory says (parameters for
  // offload_param, gradients and optimizer states for offload_optimizer).
  if (tier == Tier::kCpu) {
    if (kind == StateKind::kParam16) b.pinned = rules_.pin_params;
    if (kind == StateKind::kGrad || kind == StateKind::kMaster32 || kind == StateKind::kMoments)
      b.pinned = rules_.pin_optimizer;
    // CPU checkpoints: pageable on DeepSpeed's blocking path (checkpointing.py
    // new_empty on the CPU), pinned by its offload engine and by Strata's.
    if (kind == StateKind::kActivation) b.pinned = rules_.pin_checkpoints;
  }
  if (tier == Tier::kNvme) b.nvme_dir = kind == StateKind::kParam16 ? rules_.param_nvme_dir : rules_.optim_nvme_dir;
  plan_.buffers.push_back(std::move(b));
  return plan_.buffers.back().id;
}

BufferId Emitter::Transient(Op& op, std::string name, StateKind kind, Bytes bytes) {
  const BufferId b = NewBuffer(std::move(name), Tier::kGpu, kind, bytes);
  op.allocs.push_back(b);
  op.frees.push_back(b);
  return b;
}

BufferId Emitter::StepTransient(Op& op, std::string name, Bytes bytes) {
  const BufferId b = Transient(op, std::move(name), StateKind::kGrad, bytes);
  op.writes.push_back(b);
  return b;
}

Op Emitter::NewComputeOp(int module, bool backward, bool recompute) const {
  const char* pass = backward ? "bwd." : recompute ? "recompute." : "fwd.";
  return NewOp(tag_ + pass + graph_.modules[module].name, backward ? OpKind::kBackward : OpKind::kForward,
               Stream::kCompute);
}

Op Emitter::NewOp(std::string name, OpKind kind, Stream stream) const {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.stream = stream;
  op.micro_step = micro_;
  op.phase = phase_;
  op.module = module_;
  op.layer = module_ >= 0 ? graph_.modules[module_].layer : -1;
  return op;
}

OpId Emitter::Emit(Op op) {
  op.id = static_cast<OpId>(plan_.ops.size());
  // Drop "no dependency" markers and duplicates; keep the order stable.
  std::vector<OpId> deps;
  for (OpId d : op.deps)
    if (d >= 0 && std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
  op.deps = std::move(deps);
  if (bool& pending = sync_pending_[static_cast<int>(op.stream)]; pending) {
    for (OpId d : sync_deps_)
      if (std::find(op.deps.begin(), op.deps.end(), d) == op.deps.end()) op.deps.push_back(d);
    pending = false;
  }
  if (bool& pending = host_pending_[static_cast<int>(op.stream)]; pending) {
    if (std::find(op.deps.begin(), op.deps.end(), host_op_) == op.deps.end()) op.deps.push_back(host_op_);
    pending = false;
  }
  last_[static_cast<int>(op.stream)] = op.id;
  plan_.ops.push_back(std::move(op));
  return plan_.ops.back().id;
}

OpId Emitter::EmitBeforeWaits(Op op) {
  const int s = static_cast<int>(op.stream);
  const bool sync = sync_pending_[s], host = host_pending_[s];
  sync_pending_[s] = host_pending_[s] = false;
  const OpId id = Emit(std::move(op));
  sync_pending_[s] = sync, host_pending_[s] = host;
  return id;
}

void Emitter::HostWaits(const std::vector<OpId>& ops) {
  // Per stream, the latest op waited for: it implies the earlier ones
  // (streams are FIFO), so the barrier stays at most one op per stream.
  for (OpId op : ops) {
    if (op < 0) continue;
    OpId& w = waited_[static_cast<int>(plan_.ops[op].stream)];
    w = std::max(w, op);
  }
  sync_deps_.clear();
  for (OpId w : waited_)
    if (w >= 0) sync_deps_.push_back(w);
  std::fill(std::begin(sync_pending_), std::end(sync_pending_), true);
}

void Emitter::HostIssuesAfter(OpId host_op) {
  host_op_ = host_op;
  for (Stream st : {Stream::kCompute, Stream::kComm, Stream::kH2D, Stream::kD2H})
    host_pending_[static_cast<int>(st)] = true;
}

void Emitter::DeviceSynchronize() {
  std::vector<OpId> last;
  for (Stream st : {Stream::kCompute, Stream::kComm, Stream::kH2D, Stream::kD2H})
    if (LastOn(st) >= 0) last.push_back(LastOn(st));
  HostWaits(last);
}

}  // namespace strata::detail
