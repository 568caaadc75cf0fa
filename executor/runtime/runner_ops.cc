// The Runner's ops (runner_impl.h): an op's work on the backend's streams
// and the Env's engines: moves, staging for pageable memory, collectives,
// the model's forward and backward.
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

#include "devmodel/device_model.h"
#include "host/convert.h"
#include "runtime/checkpoint.h"
#include "runtime/runner_impl.h"
#include "runtime/storage.h"
#include "strata/executor/backend.h"
#include "strata/executor/comm.h"
#include "strata/executor/interrupt.h"
#include "strata/executor/sha256.h"
#include "strata/plan/op_regions.h"
#include "strata/plan/write_requests.h"

namespace strata::exec::detail {

Status Runner::Execute(const Op& op) {
  switch (op.kind) {
    case OpKind::kForward:
      STRATA_RETURN_IF_ERROR(Forward(op));
      return ComputeMoves(op);
    case OpKind::kBackward:
      STRATA_RETURN_IF_ERROR(Backward(op));
      return ComputeMoves(op);
    case OpKind::kOptimizerStep:
      return Step(op);
    case OpKind::kHook:  // the modelled framework's host time: Strata's executor has no such hooks
      return Status::Ok();
    default:
      break;
  }
  if (IsPointToPoint(op.kind)) return op.moves.empty() ? Boundary(op) : TiedTransfer(op);
  if (op.operand != Operand::kNone) return TensorCollective(op);
  if (op.group >= 0 && IsSubGroupGather(p_.groups[static_cast<size_t>(op.group)])) return HpzGather(op);
  if (op.moves.empty() && op.bytes.v > 0)
    return Status::Internal("op moves bytes but the plan gives it no data layout");
  const bool collective =
      op.kind == OpKind::kAllGather || op.kind == OpKind::kReduceScatter || op.kind == OpKind::kAllReduce;
  if (op.kind == OpKind::kNvmeWrite && op.coalesce) return CoalescedWrite(op);
  // An op's file transfers go to the engine together (one queue kept full
  // across its regions), after its memory moves are issued.
  std::vector<IoRequest> io;
  bool issued = false;
  for (const Move& m : op.moves) {
    // FSDP2's casting gathers and widening reductions run as collectives
    // on one rank too (a cast, then a copy).
    if (collective && (dsize_ > 1 || m.narrow || m.widen)) {
      // An allgather runs once per rank, with that rank's move; a
      // reduction to one rank involves every rank (plan.h, Move).
      if (op.kind == OpKind::kAllGather && m.rank >= 0 && m.rank != drank_) continue;
      STRATA_RETURN_IF_ERROR(Collective(op, m));
      issued = true;
      continue;
    }
    if (m.rank >= 0 && m.rank != drank_) continue;  // another rank's slice
    STRATA_ASSIGN_OR_RETURN(auto q, DoMove(op, m));
    if (q.file != nullptr)
      io.push_back(q);
    else
      issued = true;
  }
  if (io.empty()) return Status::Ok();
  if (issued) STRATA_RETURN_IF_ERROR(Sync(op.stream));  // the stream's work done before the files see the memory
  return RunBatches(op, io);
}

Status Runner::RunBatches(const Op& op, std::span<const IoRequest> io) {
  if (op.kind == OpKind::kNvmeWrite) {
    const auto block = static_cast<size_t>(std::max<int64_t>(1, p_.run.aio.block_size.v));
    for (const IoRequest& q : io)
      nvme_write_requests_ += q.whole ? 1 : static_cast<int64_t>((q.length + block - 1) / block);
  }
  return RunIo(op.stream, io);
}

Status Runner::CoalescedWrite(const Op& op) {
  for (const Move& m : op.moves)
    if ((m.rank < 0 || m.rank == drank_) &&
        (m.src.bytes != m.dst.bytes || m.accumulate || m.widen || !store_.in_memory(m.src.buffer) ||
         !store_.host_accessible(m.src.buffer) || store_.in_memory(m.dst.buffer)))
      return Status::Internal("coalesced NVMe write with a move other than host memory to NVMe");
  auto src = [&](const WritePiece& w) { return store_.data(op.moves[static_cast<size_t>(w.move)].src) + w.offset; };
  std::vector<IoRequest> io;
  Status st;
  ForEachWriteRequest(op, drank_, p_.run.aio.block_size.v, [&](const Region& dst, std::span<const WritePiece> pieces) {
    if (!st.ok()) return;
    std::byte* mem = src(pieces[0]);
    if (pieces.size() > 1) {  // the write buffer: the pieces back to back in pinned memory
      auto staged =
          Temporary(op, op.moves[static_cast<size_t>(pieces[0].move)].src.buffer, static_cast<size_t>(dst.bytes.v));
      if (!staged.ok()) {
        st = staged.status();
        return;
      }
      mem = *staged;
      std::byte* at = mem;
      for (const WritePiece& w : pieces) at = std::copy_n(src(w), w.bytes, at);
    }
    io.push_back({IoRequest::Op::kWrite, store_.file(dst.buffer), static_cast<uint64_t>(dst.offset.v), mem,
                  static_cast<size_t>(dst.bytes.v), /*whole=*/true});
  });
  STRATA_RETURN_IF_ERROR(st);
  return RunBatches(op, io);
}

bool Runner::SharesBlock(const IoRequest& a, const IoRequest& b) {
  if (a.file != b.file || (a.op == IoRequest::Op::kRead && b.op == IoRequest::Op::kRead)) return false;
  constexpr uint64_t kBlock = 4096;
  const uint64_t a0 = a.offset / kBlock, a1 = (a.offset + a.length + kBlock - 1) / kBlock;
  const uint64_t b0 = b.offset / kBlock, b1 = (b.offset + b.length + kBlock - 1) / kBlock;
  return a0 < b1 && b0 < a1;
}

Result<std::byte*> Runner::Temporary(const Op& op, BufferId b, size_t bytes) {
  STRATA_ASSIGN_OR_RETURN(auto mem, be_->Allocate(p_.buffers[b].tier, bytes, false));
  std::byte* at = mem.data();
  temps_[static_cast<int>(op.stream)].push_back(std::move(mem));
  return at;
}

Status Runner::Collective(const Op& op, const Move& m) {
  if (!store_.in_memory(m.src.buffer) || !store_.in_memory(m.dst.buffer)) return Status::Internal("collective on NVMe");
  const int64_t N = dsize_;
  DeviceStream& st = S(op.stream);
  bool* of = &overflow_seen_[static_cast<int>(op.stream)];
  if (op.kind == OpKind::kAllGather && m.narrow) {
    // FSDP2's copy-in: this rank's fp32 shard cast as the optimizer's
    // low-precision output is, then gathered.
    const size_t n = static_cast<size_t>(m.src.bytes.v / 4);
    if (m.dst.bytes.v != N * static_cast<int64_t>(n) * lp_bytes_) return Status::Internal("narrowing allgather sizes");
    STRATA_ASSIGN_OR_RETURN(auto shard, Temporary(op, m.dst.buffer, n * static_cast<size_t>(lp_bytes_)));
    STRATA_RETURN_IF_ERROR(st.FromFloat(shard, reinterpret_cast<const float*>(store_.data(m.src)), n, prec_));
    return st.AllGather(shard, store_.data(m.dst), n * static_cast<size_t>(lp_bytes_));
  }
  if (op.kind == OpKind::kReduceScatter && m.widen) {
    // FSDP2's reduce output cast to the fp32 sharded gradient (added to it
    // from the second micro step on).
    const size_t n = static_cast<size_t>(m.dst.bytes.v / 4);
    if (m.src.bytes.v != N * static_cast<int64_t>(n) * lp_bytes_)
      return Status::Internal("widening reduce-scatter sizes");
    STRATA_ASSIGN_OR_RETURN(auto low, Temporary(op, m.dst.buffer, n * static_cast<size_t>(lp_bytes_)));
    STRATA_RETURN_IF_ERROR(st.ReduceScatter(store_.data(m.src), low, n, prec_, false, of));
    auto* dst = reinterpret_cast<float*>(store_.data(m.dst));
    if (!m.accumulate) return st.ToFloat(dst, low, n, prec_);
    STRATA_ASSIGN_OR_RETURN(auto wide, Temporary(op, m.dst.buffer, n * 4));
    STRATA_RETURN_IF_ERROR(st.ToFloat(reinterpret_cast<float*>(wide), low, n, prec_));
    return st.Accumulate(dst, wide, n, Precision::kFp32, of);
  }
  if (op.kind == OpKind::kAllGather) {
    if (m.dst.bytes != N * m.src.bytes) return Status::Internal("allgather sizes");
    if (m.src.buffer == m.dst.buffer) {
      // In place (DeepSpeed's all_gather_into_tensor of the flat buffer):
      // the shard is sent from a copy, as MPI needs disjoint buffers (in
      // the buffer's tier: device memory on a GPU backend).
      STRATA_ASSIGN_OR_RETURN(auto shard, Temporary(op, m.src.buffer, static_cast<size_t>(m.src.bytes.v)));
      STRATA_RETURN_IF_ERROR(st.Copy(shard, store_.data(m.src), static_cast<size_t>(m.src.bytes.v)));
      return st.AllGather(shard, store_.data(m.dst), static_cast<size_t>(m.src.bytes.v));
    }
    return st.AllGather(store_.data(m.src), store_.data(m.dst), static_cast<size_t>(m.src.bytes.v));
  }
  if (op.kind == OpKind::kReduceScatter) {
    if (m.src.bytes != N * m.dst.bytes) return Status::Internal("reduce-scatter sizes");
    return st.ReduceScatter(store_.data(m.src), store_.data(m.dst), static_cast<size_t>(m.dst.bytes.v / lp_bytes_),
                            prec_, m.accumulate, of);
  }
  if (m.src.bytes != m.dst.bytes) return Status::Internal("allreduce sizes");
  if (m.rank >= 0 && m.rank != drank_) {
    // A reduction to another rank: this one contributes, keeps nothing.
    STRATA_ASSIGN_OR_RETURN(auto sink, Temporary(op, m.dst.buffer, static_cast<size_t>(m.dst.bytes.v)));
    return st.AllReduce(store_.data(m.src), sink, static_cast<size_t>(m.dst.bytes.v / lp_bytes_), prec_, false, of);
  }
  return st.AllReduce(store_.data(m.src), store_.data(m.dst), static_cast<size_t>(m.dst.bytes.v / lp_bytes_), prec_,
                      m.accumulate, of);
}

Result<IoRequest> Runner::DoMove(const Op& op, const Move& m) {
  const Stream stream = op.stream;
  const bool src_mem = store_.in_memory(m.src.buffer), dst_mem = store_.in_memory(m.dst.buffer);
  if (m.widen) {
    // Low precision to fp32 (gradients for the fp32 optimizer).
    if (m.dst.bytes * lp_bytes_ != m.src.bytes * 4 || m.accumulate) return Status::Internal("widening move sizes");
    if (!src_mem || !dst_mem) return Status::Internal("widening move on NVMe");
    const size_t n = static_cast<size_t>(m.dst.bytes.v / 4);
    if (IsPageableMove(p_, op, m)) {
      // A kernel cannot write pageable memory: widened chunk by chunk into
      // the stream's pinned staging buffer, then copied over, as DeepSpeed's
      // copy_(..., non_blocking=True) of a 16-bit CUDA gradient into an fp32
      // CPU one converts on the GPU and moves 4 bytes per element.
      STRATA_RETURN_IF_ERROR(StagedWiden(reinterpret_cast<float*>(store_.data(m.dst)), store_.data(m.src), n, stream));
      return IoRequest{};
    }
    STRATA_RETURN_IF_ERROR(
        S(stream).ToFloat(reinterpret_cast<float*>(store_.data(m.dst)), store_.data(m.src), n, prec_));
    return IoRequest{};
  }
  if (m.src.bytes != m.dst.bytes) return Status::Internal("move sizes differ");
  if (!src_mem && !dst_mem) return Status::Internal("NVMe to NVMe move");
  if (m.accumulate && (!src_mem || !dst_mem)) return Status::Internal("accumulating move on NVMe");
  if (src_mem && dst_mem) {
    // The CPU side of a copy to or from the GPU in pageable memory: staged.
    if (IsPageableMove(p_, op, m)) {
      STRATA_RETURN_IF_ERROR(
          StagedCopy(store_.data(m.dst), store_.data(m.src), static_cast<size_t>(m.dst.bytes.v), m.accumulate, stream));
      return IoRequest{};
    }
    if (m.accumulate)
      STRATA_RETURN_IF_ERROR(S(stream).Accumulate(store_.data(m.dst), store_.data(m.src),
                                                  static_cast<size_t>(m.dst.bytes.v / lp_bytes_), prec_,
                                                  &overflow_seen_[static_cast<int>(stream)]));
    else
      STRATA_RETURN_IF_ERROR(
          S(stream).Copy(store_.data(m.dst), store_.data(m.src), static_cast<size_t>(m.dst.bytes.v)));
    return IoRequest{};
  }
  const BufferId mem = src_mem ? m.src.buffer : m.dst.buffer;
  if (!store_.host_accessible(mem))
    return Status::Internal("NVMe transfer with '" + p_.buffers[mem].name + "', which the host cannot address on the " +
                            be_->name() + " backend: the plan must stage NVMe traffic through CPU memory");
  if (src_mem)
    return IoRequest{IoRequest::Op::kWrite, store_.file(m.dst.buffer), static_cast<uint64_t>(m.dst.offset.v),
                     store_.data(m.src), static_cast<size_t>(m.dst.bytes.v)};
  return IoRequest{IoRequest::Op::kRead, store_.file(m.src.buffer), static_cast<uint64_t>(m.src.offset.v),
                   store_.data(m.dst), static_cast<size_t>(m.src.bytes.v)};
}

namespace {
constexpr size_t kStagingChunk = size_t{4} << 20;  // a multiple of every element size
}  // namespace

Status Runner::Staging(Stream stream, std::byte** at) {
  Memory& bounce = bounce_[static_cast<int>(stream)];
  if (bounce.data() == nullptr) {
    STRATA_ASSIGN_OR_RETURN(auto b, be_->Allocate(Tier::kCpu, kStagingChunk, /*zeroed=*/false));
    bounce = std::move(b);
  }
  *at = bounce.data();
  return Status::Ok();
}

Status Runner::StagedCopy(std::byte* dst, const std::byte* src, size_t total, bool accumulate, Stream stream) {
  std::byte* bounce = nullptr;
  STRATA_RETURN_IF_ERROR(Staging(stream, &bounce));
  DeviceStream& st = S(stream);
  for (size_t off = 0; off < total; off += kStagingChunk) {
    const size_t n = std::min(kStagingChunk, total - off);
    STRATA_RETURN_IF_ERROR(st.Copy(bounce, src + off, n));
    if (accumulate)
      STRATA_RETURN_IF_ERROR(st.Accumulate(dst + off, bounce, n / static_cast<size_t>(lp_bytes_), prec_,
                                           &overflow_seen_[static_cast<int>(stream)]));
    else
      STRATA_RETURN_IF_ERROR(st.Copy(dst + off, bounce, n));
  }
  return Status::Ok();
}

Status Runner::StagedWiden(float* dst, const std::byte* src, size_t n, Stream stream) {
  std::byte* bounce = nullptr;
  STRATA_RETURN_IF_ERROR(Staging(stream, &bounce));
  DeviceStream& st = S(stream);
  constexpr size_t kPer = kStagingChunk / 4;  // fp32 elements per chunk
  for (size_t i = 0; i < n; i += kPer) {
    const size_t k = std::min(kPer, n - i);
    STRATA_RETURN_IF_ERROR(
        st.ToFloat(reinterpret_cast<float*>(bounce), src + i * static_cast<size_t>(lp_bytes_), k, prec_));
    STRATA_RETURN_IF_ERROR(st.Copy(dst + i, bounce, k * 4));
  }
  return Status::Ok();
}

ModuleArgs Runner::Args(const Op& op) {
  ModuleArgs a;
  a.micro = op.micro_step;
  a.module = op.module;
  a.precision = prec_;
  for (const Region& r : op.params) {
    a.w.push_back(store_.data(r));
    a.w_elements.push_back(static_cast<size_t>(r.bytes.v / lp_bytes_));
  }
  for (size_t k = 0; k < op.grads.size(); ++k) {
    a.grad.push_back(store_.data(op.grads[k]));
    a.grad_fresh.push_back(StoresGrad(op, k));
  }
  return a;
}

Status Runner::Forward(const Op& op) { return model_->Forward(S(op.stream), Args(op)); }

Status Runner::Backward(const Op& op) {
  ModuleArgs a = Args(op);
  // A stored gradient's padded slot: zeros past the group (plan.h Op::grads).
  for (size_t k = 0; k < op.grads.size() && k < a.w_elements.size(); ++k) {
    const size_t group = a.w_elements[k] * static_cast<size_t>(lp_bytes_);
    const auto slot = static_cast<size_t>(op.grads[k].bytes.v);
    if (StoresGrad(op, k) && slot > group)
      STRATA_RETURN_IF_ERROR(S(op.stream).Zero(static_cast<std::byte*>(a.grad[k]) + group, slot - group));
  }
  return model_->Backward(S(op.stream), a, scale_, &loss_sum_, &overflow_seen_[static_cast<int>(op.stream)]);
}

}  // namespace strata::exec::detail
