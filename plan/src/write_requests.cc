// ForEachWriteRequest and CountWrites (write_requests.h).
#include "strata/plan/write_requests.h"

#include <algorithm>
#include <vector>

#include "strata/core/codec_profile.h"

namespace strata {

namespace {

// Destination bytes written back to back: one move, or (coalesced) the
// moves whose destinations meet in one buffer, in destination order.
struct Run {
  BufferId buffer = -1;
  int64_t offset = 0, bytes = 0;
  std::vector<int> moves;  // in destination order, back to back
};

std::vector<Run> RunsOf(const Op& op, int drank, bool coalesce) {
  std::vector<int> order;
  for (size_t i = 0; i < op.moves.size(); ++i) {
    const Move& m = op.moves[i];
    if ((m.rank < 0 || m.rank == drank) && m.dst.bytes.v > 0) order.push_back(static_cast<int>(i));
  }
  std::vector<Run> runs;
  if (!coalesce) {
    for (int i : order) {
      const Region& d = op.moves[static_cast<size_t>(i)].dst;
      runs.push_back({d.buffer, d.offset.v, d.bytes.v, {i}});
    }
    return runs;
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Region &x = op.moves[static_cast<size_t>(a)].dst, &y = op.moves[static_cast<size_t>(b)].dst;
    return x.buffer != y.buffer ? x.buffer < y.buffer : x.offset < y.offset;
  });
  for (int i : order) {
    const Region& d = op.moves[static_cast<size_t>(i)].dst;
    if (!runs.empty() && runs.back().buffer == d.buffer && runs.back().offset + runs.back().bytes == d.offset.v) {
      runs.back().bytes += d.bytes.v;
      runs.back().moves.push_back(i);
    } else {
      runs.push_back({d.buffer, d.offset.v, d.bytes.v, {i}});
    }
  }
  return runs;
}

// How a run is cut into requests: `step` bytes from its start; in a
// coalesced run a remainder shorter than a step joins the last request
// (a run shorter than a step is one request), so a small write joined to
// its neighbour adds none.
struct Cut {
  int64_t bytes, step, requests;
  int64_t Index(int64_t at) const { return std::min(at / step, requests - 1); }
  int64_t Begin(int64_t k) const { return k * step; }
  int64_t End(int64_t k) const { return k + 1 == requests ? bytes : (k + 1) * step; }
};

Cut CutOf(int64_t bytes, int64_t block, bool coalesced) {
  const int64_t step = block > 0 ? block : bytes;
  return {bytes, step, coalesced ? std::max<int64_t>(1, bytes / step) : (bytes + step - 1) / step};
}

}  // namespace

void ForEachWriteRequest(const Op& op, int drank, int64_t block,
                         const std::function<void(const Region& dst, std::span<const WritePiece> pieces)>& fn) {
  std::vector<WritePiece> pieces;
  for (const Run& run : RunsOf(op, drank, op.coalesce)) {
    auto len = [&](size_t j) { return op.moves[static_cast<size_t>(run.moves[j])].dst.bytes.v; };
    const Cut cut = CutOf(run.bytes, block, op.coalesce);
    size_t first = 0;   // the move holding the request's first byte
    int64_t begin = 0;  // where it starts in the run
    for (int64_t k = 0; k < cut.requests; ++k) {
      const int64_t at = cut.Begin(k), end = cut.End(k);
      while (begin + len(first) <= at) begin += len(first++);
      pieces.clear();
      int64_t b = begin;
      for (size_t j = first; b < end; b += len(j++)) {
        const int64_t lo = std::max(at, b), hi = std::min(end, b + len(j));
        pieces.push_back({run.moves[j], lo - b, hi - lo});
      }
      fn(Region{run.buffer, Bytes(run.offset + at), Bytes(end - at)}, pieces);
    }
  }
}

// Counted from the runs alone (no request visited: a plan writes up to
// millions of blocks an iteration): the request holding a boundary between
// two of a run's moves, unless the boundary starts it, is staged.
WriteCount CountWrites(const Op& op, int drank, int64_t block, bool coalesced, double (*weight)(double bytes)) {
  WriteCount c;
  for (const Run& run : RunsOf(op, drank, coalesced)) {
    const Cut cut = CutOf(run.bytes, block, coalesced);
    c.bytes += run.bytes;
    c.stored_bytes += static_cast<double>(run.bytes) * op.stored;
    c.requests += cut.requests;
    if (weight != nullptr) {  // each request as the drive sees it: compressed
      const double s = static_cast<double>(cut.step) * op.stored,
                   t = static_cast<double>(cut.End(cut.requests - 1) - cut.Begin(cut.requests - 1)) * op.stored;
      c.weighted += static_cast<double>(cut.requests - 1) * s * weight(s) + t * weight(t);
    }
    int64_t at = 0, last = -1;  // last: the staged request counted last
    for (size_t j = 0; j + 1 < run.moves.size(); ++j) {
      at += op.moves[static_cast<size_t>(run.moves[j])].dst.bytes.v;
      const int64_t k = cut.Index(at);
      if (at == cut.Begin(k) || k == last) continue;
      last = k;
      c.staged_bytes += cut.End(k) - cut.Begin(k);
    }
  }
  return c;
}

WriteCount PlanWrites(const Plan& plan, int rank, bool unbuffered, double (*weight)(double bytes)) {
  WriteCount sum;
  const int drank = plan.DataRank(rank);
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kNvmeWrite || op.stage != plan.StageOf(rank)) continue;
    const WriteCount c = CountWrites(op, drank, plan.run.aio.block_size.v, op.coalesce && !unbuffered, weight);
    sum.requests += c.requests, sum.bytes += c.bytes, sum.staged_bytes += c.staged_bytes;
    sum.stored_bytes += c.stored_bytes;
    sum.weighted += c.weighted;
  }
  return sum;
}

void ForEachStripe(int64_t offset, int64_t bytes, int64_t unit, int start, int drives,
                   const std::function<void(int drive, int64_t file_offset, int64_t offset, int64_t n)>& fn) {
  const int64_t d = std::max(1, drives), u = std::max<int64_t>(1, unit);
  for (int64_t at = offset, end = offset + bytes; at < end;) {
    const int64_t k = at / u, within = at % u, n = std::min(end - at, u - within);
    fn(static_cast<int>((start + k) % d), (k / d) * u + within, at, n);
    at += n;
  }
}

void AddStripeBytes(int64_t offset, int64_t bytes, int64_t unit, int start, std::vector<double>& per_drive,
                    double weight) {
  const int64_t d = std::max<int64_t>(1, static_cast<int64_t>(per_drive.size())), u = std::max<int64_t>(1, unit);
  auto add = [&](int64_t k, double n) { per_drive[static_cast<size_t>((start + k) % d)] += n * weight; };
  const int64_t end = offset + bytes;
  int64_t k = offset / u;
  if (offset % u != 0 || end - offset < u) {  // the head: part of unit k
    const int64_t n = std::min(end, (k + 1) * u) - offset;
    add(k, static_cast<double>(n));
    offset += n, ++k;
  }
  const int64_t whole = (end - offset) / u;  // units k .. k + whole - 1
  for (int64_t j = 0; j < std::min(whole, d); ++j) add(k + j, static_cast<double>((whole - j + d - 1) / d * u));
  if (const int64_t tail = end - offset - whole * u; tail > 0) add(k + whole, static_cast<double>(tail));
}

int64_t StripeFileBytes(int64_t bytes, int64_t unit, int start, int drives, int drive) {
  const int64_t d = std::max(1, drives), u = std::max<int64_t>(1, unit);
  const int64_t units = (bytes + u - 1) / u;
  // Units start + j d land on drive (start + j d + i) ... : drive's i-th
  // unit is the buffer's unit ((drive - start) mod d) + i d.
  const int64_t first = ((drive - start) % d + d) % d;
  if (first >= units) return 0;
  const int64_t last = first + (units - 1 - first) / d * d;  // its last unit
  return (last / d) * u + std::min(u, bytes - last * u);
}

DirBytes DirWrites(const Plan& plan, int rank) {
  const size_t dirs = std::max<size_t>(1, plan.run.nvme_dirs.size());
  DirBytes out{std::vector<double>(dirs, 0.0), std::vector<double>(dirs, 0.0)};
  const int drank = plan.DataRank(rank);
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kNvmeWrite || op.stage != plan.StageOf(rank)) continue;
    for (const Move& m : op.moves) {
      if (m.rank >= 0 && m.rank != drank) continue;
      const Buffer& b = plan.buffers[static_cast<size_t>(m.dst.buffer)];
      const int dir = std::clamp(b.nvme_dir, 0, static_cast<int>(dirs) - 1);
      for (auto [to, ratio] : {std::pair{&out.stored, op.stored}, std::pair{&out.raw, 1.0}}) {
        if (plan.run.striped)
          AddStripeBytes(m.dst.offset.v, m.dst.bytes.v, plan.run.aio.block_size.v, dir, *to, ratio);
        else
          (*to)[static_cast<size_t>(dir)] += static_cast<double>(m.dst.bytes.v) * ratio;
      }
    }
  }
  return out;
}

int SwapElementBytes(const Plan& plan, BufferId b) {
  return plan.buffers[static_cast<size_t>(b)].kind == StateKind::kParam16 ? BytesPerElement(plan.run.precision) : 4;
}

double PlannedStored(const Plan& plan, const Op& op) {
  if (plan.run.compression.codec == CodecKind::kNone || (op.kind != OpKind::kNvmeWrite && op.kind != OpKind::kNvmeRead))
    return 1;
  double raw = 0, stored = 0;
  for (const Move& m : op.moves) {
    const BufferId nvme = op.kind == OpKind::kNvmeWrite ? m.dst.buffer : m.src.buffer;
    const auto bytes = static_cast<double>(m.dst.bytes.v);
    raw += bytes;
    stored += bytes * PlannedRatio(plan.run.compression, SwapElementBytes(plan, nvme));
  }
  return raw > 0 ? std::min(1.0, stored / raw) : 1;
}

}  // namespace strata
