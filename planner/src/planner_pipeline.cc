// Pipeline parallelism: one plan of every stage (plan.h, "Pipeline stages").
// Each stage is planned on its own graph (PipelineStageGraph) by the same
// builder, in 1F1B order (PlanBuilder::PipelineSteps); MergeStages joins the
// stage plans into one list that a single thread can run in order.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "plan_builder.h"

namespace strata::detail {
namespace {

void Shift(Region& r, BufferId offset) {
  if (r.buffer >= 0) r.buffer += offset;
}

// The send a receive pairs with: the same name with "recv" as "send" on the
// peer stage ("m3.recv.act" <- "m3.send.act"; "tied.recv.embed.wte").
std::string SendName(const std::string& recv) {
  std::string s = recv;
  const size_t at = s.find("recv");
  if (at != std::string::npos) s.replace(at, 4, "send");
  return s;
}

}  // namespace

Result<Plan> MergeStages(std::vector<Plan> stages, const std::vector<int>& parts) {
  const int P = static_cast<int>(stages.size());
  Plan out;
  {
    const Plan& h = stages[0];
    out.scenario = h.scenario;
    out.world_size = h.world_size;
    out.nodes = h.nodes;
    out.gpus_per_node = h.gpus_per_node;
    out.zero_stage = h.zero_stage;
    out.micro_steps = h.micro_steps;
    out.flat_partition = h.flat_partition;
    for (int t = 0; t < kNumTiers; ++t) out.capacity[t] = h.capacity[t];
    out.gpu_reserved = h.gpu_reserved;
    out.total_params = h.total_params;
    out.samples_per_iteration = h.samples_per_iteration;
    out.tokens_per_sample = h.tokens_per_sample;
    out.groups = h.groups;
    out.run = h.run;
    out.cache.eviction = h.cache.eviction;
    out.cache.gpu_capacity = h.cache.gpu_capacity;
    out.cache.cpu_capacity = h.cache.cpu_capacity;
  }
  out.pipeline = P;
  out.stage_layers = parts;
  // The pipeline group of rank 0: one rank per stage, world / P apart.
  std::vector<int> pp;
  for (int s = 0; s < P; ++s) pp.push_back(s * (out.world_size / P));
  out.groups.push_back({"pp", pp});

  std::vector<BufferId> buffer_base(P);
  std::vector<int> module_base(P), group_base(P);
  for (int s = 0; s < P; ++s) {
    Plan& st = stages[static_cast<size_t>(s)];
    const std::string prefix = "s" + std::to_string(s) + ".";
    buffer_base[s] = static_cast<BufferId>(out.buffers.size());
    module_base[s] = static_cast<int>(out.modules.size());
    group_base[s] = static_cast<int>(out.param_groups.size());
    out.model_flops += st.model_flops / P;
    out.stage_flat_partition.push_back(st.flat_partition);
    const CacheStats& c = st.cache;
    out.cache.gpu_accesses += c.gpu_accesses, out.cache.gpu_hits += c.gpu_hits;
    out.cache.cpu_accesses += c.cpu_accesses, out.cache.cpu_hits += c.cpu_hits;
    out.cache.fetch_nvme_read += c.fetch_nvme_read, out.cache.fetch_h2d += c.fetch_h2d;
    out.cache.fetch_allgather += c.fetch_allgather;
    out.cache.compulsory_nvme_read += c.compulsory_nvme_read, out.cache.compulsory_h2d += c.compulsory_h2d;
    out.cache.compulsory_allgather += c.compulsory_allgather;
    out.cache.window_nvme_reads = std::max(out.cache.window_nvme_reads, c.window_nvme_reads);
    for (Buffer b : st.buffers) {
      b.id += buffer_base[s];
      b.stage = s;
      b.name = prefix + b.name;
      out.buffers.push_back(std::move(b));
    }
    for (PlanParamGroup g : st.param_groups) {
      for (BufferId* b : {&g.home_buffer, &g.master_buffer, &g.exp_avg_buffer, &g.exp_avg_sq_buffer})
        if (*b >= 0) *b += buffer_base[s];
      out.param_groups.push_back(std::move(g));
    }
    for (PlanModule m : st.modules) {
      if (m.layer >= 0) m.layer += parts[static_cast<size_t>(s)];
      for (int& g : m.param_groups) g += group_base[s];
      out.modules.push_back(std::move(m));
    }
  }

  // Interleave the stages' lists: take each stage's ops in its order until
  // a receive whose send is not out yet, then the next stage; 1F1B (and the
  // tied exchange, sends first) never leaves every stage waiting.
  std::vector<std::unordered_map<std::string, OpId>> sends(P);  // per stage: name -> its op
  for (int s = 0; s < P; ++s)
    for (const Op& op : stages[static_cast<size_t>(s)].ops)
      if (op.kind == OpKind::kSend) sends[s][op.name] = op.id;
  std::vector<std::vector<OpId>> global(P);
  for (int s = 0; s < P; ++s) global[s].assign(stages[static_cast<size_t>(s)].ops.size(), -1);
  std::vector<size_t> next(P, 0);
  size_t total = 0, placed = 0;
  for (const Plan& st : stages) total += st.ops.size();
  while (placed < total) {
    bool progress = false;
    for (int s = 0; s < P; ++s) {
      std::vector<Op>& ops = stages[static_cast<size_t>(s)].ops;
      while (next[s] < ops.size()) {
        Op& op = ops[next[s]];
        OpId send = -1;
        if (op.kind == OpKind::kRecv) {
          if (op.peer_stage < 0 || op.peer_stage >= P)
            return Status::Internal("pipeline: receive " + op.name + " names no stage");
          const auto it = sends[op.peer_stage].find(SendName(op.name));
          if (it == sends[op.peer_stage].end())
            return Status::Internal("pipeline: stage " + std::to_string(s) + "'s " + op.name + " has no matching send");
          send = global[op.peer_stage][static_cast<size_t>(it->second)];
          if (send < 0) break;  // not out yet
        }
        Op g = std::move(op);
        const OpId id = static_cast<OpId>(out.ops.size());
        global[s][next[s]] = id;
        g.id = id;
        g.stage = s;
        g.name = "s" + std::to_string(s) + "." + g.name;
        if (g.module >= 0) g.module += module_base[s];
        if (g.layer >= 0) g.layer += parts[static_cast<size_t>(s)];
        // A stage boundary's transfer names the last layer before the
        // boundary (plan.h, Op::layer): the executor's workload passes
        // that layer's output, or its gradient.
        if (IsPointToPoint(g.kind) && g.moves.empty())
          g.layer = parts[static_cast<size_t>(g.peer_stage > s ? s + 1 : s)] - 1;
        for (OpId& d : g.deps) d = global[s][static_cast<size_t>(d)];
        if (send >= 0) g.deps.push_back(send);
        for (auto* list : {&g.allocs, &g.frees, &g.reads, &g.writes})
          for (BufferId& b : *list) b += buffer_base[s];
        for (Move& m : g.moves) Shift(m.src, buffer_base[s]), Shift(m.dst, buffer_base[s]);
        for (Region& r : g.params) Shift(r, buffer_base[s]);
        for (Region& r : g.grads) Shift(r, buffer_base[s]);
        for (Region* r : {&g.master, &g.exp_avg, &g.exp_avg_sq, &g.grad_in}) Shift(*r, buffer_base[s]);
        out.ops.push_back(std::move(g));
        ++next[s];
        ++placed;
        progress = true;
      }
    }
    if (!progress)
      return Status::Internal("pipeline: the stages' schedules wait on each other (no receive can proceed)");
  }
  return out;
}

// A pipeline stage's iteration: Megatron-LM's 1F1B schedule
// (schedules.py forward_backward_pipelining_without_interleaving; DeepSpeed's
// TrainSchedule runs the same order): stage s of P runs min(P - s - 1, m)
// warm-up forwards, then alternates one forward and one backward, then
// drains the remaining backwards. Each forward first receives its input
// from the previous stage and ends by sending its output to the next; each
// backward receives its output's gradient and sends its input's.
Status PlanBuilder::PipelineSteps() {
  const int m = plan_.micro_steps, P = pp_.stages, s = pp_.stage;
  const int warmup = std::min(P - s - 1, m);
  std::vector<MicroState> stash(static_cast<size_t>(m));
  Status status;  // the first fetch policy error
  auto emit = [&](int lo, int hi) {
    const Status st = policy_->Emit(*this, lo, hi);
    if (status.ok()) status = st;
  };
  auto forward = [&](int k) {
    em_.SetMicro(k);
    BeginMicro();
    em_.SetPhase(Phase::kForward);
    if (s > 0) PointToPoint(OpKind::kRecv, "recv.act", graph_.stage_input_bytes, s - 1);
    emit(0, lay_.num_modules);
    if (s + 1 < P) PointToPoint(OpKind::kSend, "send.act", graph_.stage_output_bytes, s + 1);
    SwapMicroState(stash[static_cast<size_t>(k)]);
  };
  auto backward = [&](int k) {
    em_.SetMicro(k);
    SwapMicroState(stash[static_cast<size_t>(k)]);
    em_.SetPhase(Phase::kBackward);
    if (s + 1 < P) PointToPoint(OpKind::kRecv, "recv.grad", graph_.stage_output_bytes, s + 1);
    emit(lay_.num_modules, Positions());
    grads_->FlushBucket();
    if (s > 0) PointToPoint(OpKind::kSend, "send.grad", graph_.stage_input_bytes, s - 1);
  };
  for (int k = 0; k < warmup; ++k) forward(k);
  for (int i = 0; i < m - warmup; ++i) {
    forward(warmup + i);
    backward(i);
  }
  for (int i = m - warmup; i < m; ++i) backward(i);
  return status;
}

// One half of a point-to-point transfer on the compute stream: Megatron's
// p2p_communicate waits for its sends and receives before the next compute
// (wait_on_reqs), and DeepSpeed's PipelineEngine runs its Send/RecvActivation
// and Send/RecvGrad instructions between computes. The received tensor is
// the first module's input, counted in its saved activations.
OpId PlanBuilder::PointToPoint(OpKind kind, const std::string& what, Bytes bytes, int peer) {
  em_.SetModule(-1);
  Op op = em_.NewOp(em_.Tag() + what, kind, Stream::kCompute);
  op.bytes = bytes;
  op.peer_stage = peer;
  op.deps = {last_compute_};
  const OpId id = em_.Emit(std::move(op));
  last_compute_ = id;
  return id;
}

// Groups two stages hold (a tied token table): each sends its gradient to
// the other and adds the one it receives, before the data-parallel
// reduction; the same bytes as the allreduce over the two stages that
// Megatron-LM's _allreduce_word_embedding_grads and DeepSpeed's
// _exec_reduce_tied_grads run (a two-rank ring sends each rank's whole
// buffer once).
void PlanBuilder::ExchangeTiedGradients() {
  const int s = pp_.stage, P = pp_.stages;
  if (P == 1 || graph_.tied_groups.empty()) return;
  const int peer = s == 0 ? P - 1 : 0;
  em_.SetPhase(Phase::kStep);
  OpId last = last_compute_;
  for (const char* what : {"send", "recv"})
    for (int gi : graph_.tied_groups) {
      em_.SetModule(-1);
      const bool send = what[0] == 's';
      Op op = em_.NewOp(std::string("tied.") + what + "." + graph_.param_groups[gi].name,
                        send ? OpKind::kSend : OpKind::kRecv, Stream::kComm);
      op.bytes = lay_.groups[gi].elements.bytes(lay_.lp_bytes);
      op.peer_stage = peer;
      op.deps = {last_compute_};
      // The group's gradient in the replica (stages 0-1), as the backward
      // wrote it: sent whole, and the peer's added into it.
      const Region grad = R(lay_.grad, lay_.groups[gi].home_offset.v, op.bytes.v);
      if (send) {
        op.reads = {lay_.grad};
        op.moves = {{grad, Region{}}};
      } else {
        op.writes = {lay_.grad};
        op.moves = {{Region{}, grad, /*accumulate=*/true}};
      }
      last = em_.Emit(std::move(op));
    }
  // The data-parallel reduction and the step read the summed gradients.
  last_compute_ = last;
}

}  // namespace strata::detail
