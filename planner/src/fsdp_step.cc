// FSDP2 front end: the optimizer step (fsdp_builder.h). FSDP2 has no
// optimizer of its own: a torch.optim.AdamW over the sharded parameters
// steps each unit's fp32 shard where it lives, on the GPU (foreach kernels)
// or, under CPUOffloadPolicy, on the CPU (docs/fsdp2-source.md section 7),
// then zero_grad(set_to_none=True) drops the sharded gradients.
#include "fsdp_builder.h"

namespace strata::detail {

void FsdpBuilder::Step() {
  em_.SetMicro(plan_.micro_steps - 1);
  em_.Outside(Phase::kStep);
  const bool cpu = tier_ == Tier::kCpu;
  std::vector<OpId> ready;
  for (OpId g : grad_ops_)
    if (g >= 0) ready.push_back(g);
  // finalize_backward: the default stream waits for the reductions; under
  // offload the host synchronizes on each gradient's D2H event.
  if (cpu) em_.HostWaits(ready);
  // _multi_tensor_adam's torch._foreach_sqrt(exp_avg_sqs) allocates a new
  // fp32 tensor per parameter for the whole step (the GPU's foreach path;
  // the CPU's single-tensor loop holds one parameter's at a time).
  BufferId temp = -1;
  std::vector<int> stepped;
  for (int u = 0; u < static_cast<int>(units_.size()); ++u)
    if (units_[u].shard > 0 && grad_[u] >= 0) stepped.push_back(u);
  for (size_t i = 0; i < stepped.size(); ++i) {
    const int u = stepped[i];
    const FsdpUnit& unit = units_[u];
    const int64_t n = unit.shard;
    Op op = em_.NewOp("step.adam." + unit.name, OpKind::kOptimizerStep, cpu ? Stream::kCpuOptim : Stream::kCompute);
    if (!cpu) op.deps = ready;
    op.elements = Elements(n);
    op.flat_begin = unit.offset;
    op.flops = kAdamFlopsPerElement * static_cast<double>(n);
    op.bytes = Bytes(n * kTorchAdamBytesPerElement);
    op.master = R(shard32_, unit.offset * 4, n * 4);
    op.exp_avg = R(moments_, unit.offset * 4, n * 4);
    op.exp_avg_sq = R(moments_, (total_ + unit.offset) * 4, n * 4);
    op.grad_in = R(grad_[u], 0, n * 4);
    op.reads = {shard32_, moments_, grad_[u]};
    op.writes = {shard32_, moments_};
    op.frees = {grad_[u]};
    if (!cpu && i == 0) {
      temp = em_.NewBuffer("step.foreach_sqrt", Tier::kGpu, StateKind::kMoments, Bytes(total_ * 4));
      op.allocs.push_back(temp);
      op.writes.push_back(temp);
    }
    if (temp >= 0 && i + 1 == stepped.size()) op.frees.push_back(temp);
    em_.Emit(std::move(op));
    grad_[u] = -1;
  }
}

}  // namespace strata::detail
