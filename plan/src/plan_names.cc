// Names of the plan's enums, as they appear in JSON, traces and summaries.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "strata/core/parallel.h"
#include "strata/plan/plan.h"

namespace strata {
namespace {

constexpr std::array<std::string_view, kNumOpKinds> kOpKindNames = {
    "forward",   "backward",       "copy_h2d",  "copy_d2h",       "nvme_read", "nvme_write",
    "allgather", "reduce_scatter", "allreduce", "optimizer_step", "send",      "recv",
    "hook"};
constexpr std::array<std::string_view, kNumStreams> kStreamNames = {"compute",    "h2d",  "d2h",      "nvme_read",
                                                                    "nvme_write", "comm", "cpu_optim", "host"};
constexpr std::array<std::string_view, kNumPhases> kPhaseNames = {"forward", "backward", "step"};
constexpr std::array<std::string_view, kNumOperands> kOperandNames = {"none", "input", "output", "input_grad",
                                                                      "output_grad"};
constexpr std::array<std::string_view, kNumStateKinds> kStateKindNames = {
    "param16", "grad", "master32", "moments", "activation", "swap_buffer", "gather_buffer", "comm_buffer"};
constexpr std::array<std::string_view, kNumLinkClasses> kLinkClassNames = {
    "none", "h2d", "d2h", "nvme_read", "nvme_write", "collective", "p2p"};

template <typename E, size_t N>
bool ParseName(const std::array<std::string_view, N>& names, std::string_view s, E* out) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) {
      *out = static_cast<E>(i);
      return true;
    }
  return false;
}

}  // namespace

std::string_view OpKindName(OpKind k) { return kOpKindNames[static_cast<int>(k)]; }
std::string_view StreamName(Stream s) { return kStreamNames[static_cast<int>(s)]; }
std::string_view PhaseName(Phase p) { return kPhaseNames[static_cast<int>(p)]; }
std::string_view StateKindName(StateKind k) { return kStateKindNames[static_cast<int>(k)]; }
std::string_view LinkClassName(LinkClass c) { return kLinkClassNames[static_cast<int>(c)]; }
bool ParseOpKind(std::string_view s, OpKind* out) { return ParseName(kOpKindNames, s, out); }
bool ParseStream(std::string_view s, Stream* out) { return ParseName(kStreamNames, s, out); }
bool ParsePhase(std::string_view s, Phase* out) { return ParseName(kPhaseNames, s, out); }
std::string_view OperandName(Operand o) { return kOperandNames[static_cast<int>(o)]; }
bool ParseOperand(std::string_view s, Operand* out) { return ParseName(kOperandNames, s, out); }
bool ParseStateKind(std::string_view s, StateKind* out) { return ParseName(kStateKindNames, s, out); }

StateCategory CategoryOf(StateKind k) {
  switch (k) {
    case StateKind::kParam16:
    case StateKind::kGrad:
    case StateKind::kMaster32:
    case StateKind::kMoments:
      return StateCategory::kModelStates;
    case StateKind::kActivation:
      return StateCategory::kActivations;
    default:
      return StateCategory::kBuffers;
  }
}

LinkClass LinkClassOf(OpKind k) {
  switch (k) {
    case OpKind::kCopyH2D:
      return LinkClass::kH2D;
    case OpKind::kCopyD2H:
      return LinkClass::kD2H;
    case OpKind::kNvmeRead:
      return LinkClass::kNvmeRead;
    case OpKind::kNvmeWrite:
      return LinkClass::kNvmeWrite;
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllReduce:
      return LinkClass::kCollective;
    case OpKind::kSend:
      return LinkClass::kP2P;
    default:
      return LinkClass::kNone;
  }
}

bool IsPageableMove(const Plan& plan, const Op& op, const Move& m) {
  if (op.kind != OpKind::kCopyH2D && op.kind != OpKind::kCopyD2H) return false;
  const BufferId b = op.kind == OpKind::kCopyH2D ? m.src.buffer : m.dst.buffer;
  return b >= 0 && b < static_cast<BufferId>(plan.buffers.size()) && plan.buffers[b].tier == Tier::kCpu &&
         !plan.buffers[b].pinned;
}

bool IsPageableCopy(const Plan& plan, const Op& op) {
  for (const Move& m : op.moves)
    if (IsPageableMove(plan, op, m)) return true;
  return false;
}

std::string GpuReservedNote(const Plan& plan) {
  if (plan.gpu_reserved.v <= 0) return "";
  return "; the capacity is hardware.gpu.memory " +
         FormatBytes(plan.capacity[static_cast<int>(Tier::kGpu)] + plan.gpu_reserved) + " less " +
         FormatBytes(plan.gpu_reserved) + " of hardware.gpu.reserved_memory";
}

int64_t FreshPageBytes(const Plan& plan, const Op& op, int rank) {
  if (op.kind != OpKind::kCopyD2H) return 0;
  std::vector<BufferId> seen;
  int64_t b = 0;
  for (const Move& m : op.moves) {
    if (rank >= 0 && m.rank >= 0 && m.rank != rank) continue;
    if (!IsPageableMove(plan, op, m)) continue;
    const Buffer& buf = plan.buffers[m.dst.buffer];
    if (!IsFreshMapping(buf)) continue;
    if (std::find(op.allocs.begin(), op.allocs.end(), m.dst.buffer) == op.allocs.end()) continue;
    if (std::find(seen.begin(), seen.end(), m.dst.buffer) != seen.end()) continue;
    seen.push_back(m.dst.buffer);
    b += buf.bytes.v;  // the whole new buffer (DeepSpeed touches every page; the executor zeroes it)
  }
  return b;
}

std::vector<int> CommGroup::RanksOf(int rank) const { return ParallelLayout::Group(rank, size(), stride()); }

bool HasRankMoves(const Op& op) {
  for (const Move& m : op.moves)
    if (m.rank >= 0) return true;
  return false;
}

const std::string& Plan::SwapDirOf(const Buffer& b) const {
  static const std::string kNone;
  if (b.nvme_dir < 0 || b.nvme_dir >= static_cast<int>(run.nvme_dirs.size())) return kNone;
  return run.nvme_dirs[static_cast<size_t>(b.nvme_dir)];
}

int64_t OpBytesOnRank(const Op& op, int rank) {
  if (!HasRankMoves(op)) return op.bytes.v;
  int64_t b = 0;
  for (const Move& m : op.moves)
    if (m.rank < 0 || m.rank == rank) b += m.dst.bytes.v;
  return b;
}

}  // namespace strata
