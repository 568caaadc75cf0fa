// The Runner's model-parallel transfers (runner_impl.h): pipeline
// boundaries, tensor-parallel collectives on activations, tied tables'
// gradients between stages, the weights digest gathered over every stage
// and shard, and every rank's spans gathered for the timeline.
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
#include <thread>
#include <type_traits>

#include "devmodel/device_model.h"
#include "host/convert.h"
#include "runtime/checkpoint.h"
#include "runtime/runner_impl.h"
#include "runtime/storage.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"
#include "strata/executor/interrupt.h"
#include "strata/executor/sha256.h"

namespace strata::exec::detail {

Status Runner::Boundary(const Op& op) {
  const int peer = p_.PeerRank(rank_, op.peer_stage);
  const bool grad = op.phase == Phase::kBackward;
  const int tag = (2 * op.micro_step + (grad ? 1 : 0)) % kTiedTag;
  const size_t n = static_cast<size_t>(op.bytes.v / lp_bytes_);
  if (op.kind == OpKind::kSend) {
    STRATA_RETURN_IF_ERROR(Sync(op.stream));  // the work computing it is done
    STRATA_ASSIGN_OR_RETURN(auto v, model_->TakeBoundary(op.micro_step, op.layer, grad));
    if (v.size() != n)
      return Status::Internal("the workload's boundary tensor has " + std::to_string(v.size()) +
                              " elements, the plan's " + std::to_string(n));
    comm_->Send(v.data(), n * sizeof(float), peer, tag);
    return Status::Ok();
  }
  std::vector<float> v(n);
  comm_->Recv(v.data(), n * sizeof(float), peer, tag);
  return model_->PutBoundary(op.micro_step, op.layer, grad, std::move(v));
}

Status Runner::TensorCollective(const Op& op) {
  if (op.kind != OpKind::kAllReduce || tp_ == nullptr)
    return Status::InvalidArgument("tensor-parallel " + std::string(OpKindName(op.kind)) + " of the " +
                                   std::string(OperandName(op.operand)) +
                                   ": strata run executes the all-reduces of tensor parallelism without sequence "
                                   "parallelism or partitioned activations");
  STRATA_RETURN_IF_ERROR(Sync(op.stream));
  size_t total = 0;
  Status st = model_->TensorAllReduce(op.micro_step, op.module, op.operand, [&](float* data, size_t n, ReduceOp r) {
    total += n;
    if (r == ReduceOp::kMax)
      tp_->AllreduceMax(data, n);
    else
      tp_->AllreduceSum(data, n);
  });
  // The plan counts activations in its precision, the loss's statistics
  // in fp32 (core/model.cc).
  if (st.ok() && static_cast<int64_t>(total) * lp_bytes_ != op.bytes.v && static_cast<int64_t>(total) * 4 != op.bytes.v)
    return Status::Internal("the workload reduced " + std::to_string(total) + " values, the plan's all-reduce " +
                            std::to_string(op.bytes.v) + " bytes");
  return st;
}

Status Runner::HpzGather(const Op& op) {
  if (op.kind != OpKind::kAllGather || hpz_ == nullptr)
    return Status::Internal("'" + op.name + "': only allgathers run in a sub-group");
  DeviceStream& st = S(op.stream);
  for (const Move& m : op.moves) {
    if (!store_.in_memory(m.src.buffer) || !store_.in_memory(m.dst.buffer))
      return Status::Internal("hpZ gather on NVMe");
    if (m.dst.bytes.v != m.src.bytes.v * hpz_->size()) return Status::Internal("sub-group allgather sizes");
    std::vector<std::byte> mine(static_cast<size_t>(m.src.bytes.v)), all(static_cast<size_t>(m.dst.bytes.v));
    STRATA_RETURN_IF_ERROR(st.Copy(mine.data(), store_.data(m.src), mine.size()));
    STRATA_RETURN_IF_ERROR(Sync(op.stream));
    hpz_->Allgather(mine.data(), all.data(), mine.size());
    STRATA_RETURN_IF_ERROR(st.Copy(store_.data(m.dst), all.data(), all.size()));
    STRATA_RETURN_IF_ERROR(Sync(op.stream));
  }
  return Status::Ok();
}

Status Runner::ComputeMoves(const Op& op) {
  for (const Move& m : op.moves) {
    if (m.rank >= 0 && m.rank != drank_) continue;
    if (!store_.in_memory(m.src.buffer) || !store_.in_memory(m.dst.buffer) || m.src.bytes != m.dst.bytes)
      return Status::Internal("'" + op.name + "': a compute op's copy between memory regions of one size");
    STRATA_RETURN_IF_ERROR(
        S(op.stream).Copy(store_.data(m.dst), store_.data(m.src), static_cast<size_t>(m.dst.bytes.v)));
  }
  return Status::Ok();
}

Status Runner::TiedTransfer(const Op& op) {
  const int peer = p_.PeerRank(rank_, op.peer_stage);
  DeviceStream& st = S(op.stream);
  for (const Move& m : op.moves) {
    const bool send = op.kind == OpKind::kSend;
    const Region& r = send ? m.src : m.dst;
    if (!store_.in_memory(r.buffer)) return Status::Internal("point-to-point transfer on NVMe");
    std::vector<std::byte> host(static_cast<size_t>(r.bytes.v));
    if (send) {
      STRATA_RETURN_IF_ERROR(st.Copy(host.data(), store_.data(r), host.size()));
      STRATA_RETURN_IF_ERROR(Sync(op.stream));
      comm_->Send(host.data(), host.size(), peer, kTiedTag);
      continue;
    }
    comm_->Recv(host.data(), host.size(), peer, kTiedTag);
    if (!m.accumulate) {
      STRATA_RETURN_IF_ERROR(st.Copy(store_.data(r), host.data(), host.size()));
      STRATA_RETURN_IF_ERROR(Sync(op.stream));
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(auto tmp, be_->Allocate(p_.buffers[r.buffer].tier, host.size(), /*zeroed=*/false));
    STRATA_RETURN_IF_ERROR(st.Copy(tmp.data(), host.data(), host.size()));
    STRATA_RETURN_IF_ERROR(st.Accumulate(store_.data(r), tmp.data(), host.size() / static_cast<size_t>(lp_bytes_),
                                         prec_, &overflow_seen_[static_cast<int>(op.stream)]));
    STRATA_RETURN_IF_ERROR(Sync(op.stream));  // before tmp is released
  }
  return Status::Ok();
}

Result<std::string> Runner::Digest() {
  const bool sharded = p_.zero_stage >= 1 && dsize_ > 1;
  // A master region of every data-parallel rank, in rank order.
  auto gather = [&](const Region& r) -> Result<std::vector<std::byte>> {
    std::vector<std::byte> mine(static_cast<size_t>(r.bytes.v));
    STRATA_RETURN_IF_ERROR(RegionToHost(r, mine.data()));
    if (!sharded) return mine;
    std::vector<std::byte> all(mine.size() * static_cast<size_t>(dsize_));
    dp_->Allgather(mine.data(), all.data(), mine.size());
    return all;
  };
  // This stage's groups, whole.
  std::map<int, std::vector<std::byte>> whole;
  if (flat_ > 0) {
    // Stages 1-2: every rank's slice is the whole flat buffer.
    const PlanParamGroup& g0 = p_.param_groups[static_cast<size_t>(groups_.front())];
    STRATA_ASSIGN_OR_RETURN(auto all, gather({g0.master_buffer, g0.master_offset, Bytes(flat_ * 4)}));
    for (int gi : groups_) {
      const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
      const std::byte* at = all.data() + g.flat_offset.v * 4;
      whole[gi].assign(at, at + g.elements.v * 4);
    }
  } else {
    for (int gi : groups_) {
      const PlanParamGroup& g = p_.param_groups[static_cast<size_t>(gi)];
      STRATA_ASSIGN_OR_RETURN(auto all, gather({g.master_buffer, g.master_offset, g.partition_elements.bytes(4)}));
      all.resize(static_cast<size_t>(g.elements.v) * 4);
      whole[gi] = std::move(all);
    }
  }
  Sha256 h;
  std::map<std::string, int> first_stage;  // group name -> the stage first holding it
  const int T = tp_ != nullptr ? tp_->size() : 1;
  for (size_t gi = 0; gi < p_.param_groups.size(); ++gi) {
    const PlanParamGroup& g = p_.param_groups[gi];
    const int st = p_.buffers[HomeOf(g)].stage;
    if (first_stage.emplace(g.name, st).first->second != st) continue;  // a tied copy
    const size_t bytes = static_cast<size_t>(g.elements.v) * 4;
    // Each tensor-parallel rank's shard, in rank order (the group's ranks
    // are consecutive: core/parallel.h), from the stage's first ranks.
    for (int t = 0; t < T; ++t) {
      const int from = p_.PeerRank(0, st) + t;
      if (rank_ == 0 && from == 0) {
        h.Update(whole[static_cast<int>(gi)].data(), bytes);
      } else if (rank_ == 0) {
        std::vector<std::byte> got(bytes);
        comm_->Recv(got.data(), bytes, from, kDigestTag);
        h.Update(got.data(), bytes);
      } else if (rank_ == from) {
        comm_->Send(whole[static_cast<int>(gi)].data(), bytes, 0, kDigestTag);
      }
    }
  }
  comm_->FlushSends();
  return comm_->Broadcast(rank_ == 0 ? Sha256::Hex(h.Finish()) : std::string());
}

Result<std::vector<OpSpan>> Runner::GatherSpans(std::vector<OpSpan> mine, double t0) {
  if (comm_->size() == 1) return mine;
  static_assert(std::is_trivially_copyable_v<OpSpan>);
  std::string bytes(sizeof t0 + mine.size() * sizeof(OpSpan), '\0');
  std::memcpy(bytes.data(), &t0, sizeof t0);
  if (!mine.empty()) std::memcpy(bytes.data() + sizeof t0, mine.data(), mine.size() * sizeof(OpSpan));
  const bool one_host = comm_->OneHost();
  const std::vector<std::string> all = comm_->AllgatherVariable(bytes);
  std::vector<double> starts(all.size());
  for (size_t q = 0; q < all.size(); ++q) {
    if (all[q].size() < sizeof(double) || (all[q].size() - sizeof(double)) % sizeof(OpSpan) != 0)
      return Status::Internal("rank " + std::to_string(q) + " sent " + std::to_string(all[q].size()) +
                              " bytes of spans, not a start and whole spans");
    std::memcpy(&starts[q], all[q].data(), sizeof(double));
  }
  const double first = *std::min_element(starts.begin(), starts.end());
  std::vector<OpSpan> out;
  for (size_t q = 0; q < all.size(); ++q) {
    const size_t n = (all[q].size() - sizeof(double)) / sizeof(OpSpan);
    const size_t at = out.size();
    out.resize(at + n);
    if (n > 0) std::memcpy(out.data() + at, all[q].data() + sizeof(double), n * sizeof(OpSpan));
    const double shift = one_host ? starts[q] - first : 0;
    for (size_t i = at; i < out.size(); ++i) {
      if (out[i].rank != static_cast<int32_t>(q))
        return Status::Internal("rank " + std::to_string(q) + " sent a span of rank " + std::to_string(out[i].rank));
      out[i].start_s += shift;
      out[i].end_s += shift;
    }
  }
  return out;
}

}  // namespace strata::exec::detail
