#include "io/swap_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <thread>

namespace strata::exec {

namespace {

size_t RoundUp(size_t n) { return (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }

std::string Where(const File* f, uint64_t offset, uint64_t bytes) {
  return f->path() + " [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ")";
}

// Runs fn(codec, i) for i < n on the codecs' threads, frame i on thread
// i mod threads; the first error wins.
Status ForEachFrame(SwapCodec::Codecs codecs, size_t n, const std::function<Status(Codec&, size_t)>& fn) {
  const size_t threads = std::min(codecs.size(), n);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) STRATA_RETURN_IF_ERROR(fn(*codecs[0], i));
    return Status::Ok();
  }
  std::vector<Status> st(threads);
  auto work = [&](size_t t) {
    try {  // a frame's scratch memory may not be had: an error, not an abort
      for (size_t i = t; i < n && st[t].ok(); i += threads) st[t] = fn(*codecs[t], i);
    } catch (const std::bad_alloc&) {
      st[t] = Status::Internal("compressing NVMe frames: out of memory");
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  for (const Status& s : st) STRATA_RETURN_IF_ERROR(s);
  return Status::Ok();
}

}  // namespace

Result<SwapCodec::Batch> SwapCodec::Prepare(Codecs codecs, std::span<const IoRequest> in) {
  Batch b;
  std::vector<Pack> packs;
  for (const IoRequest& q : in)
    STRATA_RETURN_IF_ERROR(q.op == IoRequest::Op::kWrite ? PlanWrite(q, b, packs) : PrepareRead(q, b));
  STRATA_RETURN_IF_ERROR(ForEachFrame(codecs, packs.size(), [&](Codec& codec, size_t i) -> Status {
    Pack& p = packs[i];
    p.out = AlignedBuffer(RoundUp(codec.Bound(p.n)));
    const auto* src = static_cast<const std::byte*>(p.q->buffer) + p.at;
    STRATA_ASSIGN_OR_RETURN(p.compressed,
                            codec.Compress({src, p.n}, ElementOf(p.q->file), {p.out.data(), p.out.size()}));
    return Status::Ok();
  }));
  for (Pack& p : packs) {
    const IoRequest& q = *p.q;
    auto* src = static_cast<std::byte*>(q.buffer) + p.at;
    const size_t stored = RoundUp(p.compressed);
    raw_ += p.n;
    if (stored >= p.n) {  // no smaller: written as it is
      stored_ += p.n;
      b.io.push_back({IoRequest::Op::kWrite, q.file, q.offset + p.at, src, p.n, true});
      b.written.push_back({q.file, q.offset + p.at, p.n, 0});
      continue;
    }
    stored_ += stored;
    std::memset(p.out.data() + p.compressed, 0, stored - p.compressed);
    b.io.push_back({IoRequest::Op::kWrite, q.file, q.offset + p.at, p.out.data(), stored, true});
    b.written.push_back({q.file, q.offset + p.at, p.n, p.compressed});
    b.scratch.push_back(std::move(p.out));
  }
  return b;
}

uint64_t SwapCodec::NextCut(const File* f, uint64_t at) const {
  auto it = cuts_.find(f);
  if (it == cuts_.end()) return std::numeric_limits<uint64_t>::max();
  auto c = std::upper_bound(it->second.begin(), it->second.end(), at);
  return c == it->second.end() ? std::numeric_limits<uint64_t>::max() : *c;
}

uint64_t SwapCodec::LastCut(const File* f, uint64_t at, uint64_t hi) const {
  auto it = cuts_.find(f);
  if (it == cuts_.end()) return at;
  auto c = std::upper_bound(it->second.begin(), it->second.end(), hi);
  return c == it->second.begin() || *std::prev(c) <= at ? at : *std::prev(c);
}

std::vector<std::pair<uint64_t, SwapCodec::Frame>> SwapCodec::Overlapping(const Table& t, uint64_t offset,
                                                                          uint64_t length) {
  std::vector<std::pair<uint64_t, Frame>> out;
  auto it = t.upper_bound(offset);
  if (it != t.begin()) --it;
  for (; it != t.end() && it->first < offset + length; ++it)
    if (it->first + it->second.length > offset) out.emplace_back(it->first, it->second);
  return out;
}

Status SwapCodec::PlanWrite(const IoRequest& q, Batch& b, std::vector<Pack>& packs) {
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [fo, f] : Overlapping(tables_[q.file], q.offset, q.length))
      if (fo < q.offset || fo + f.length > q.offset + q.length)
        return Status::Internal("compressed NVMe write of " + Where(q.file, q.offset, q.length) +
                                " covers part of the compressed frame at " + std::to_string(fo) +
                                " (docs/endurance.md, Compression: frames end at every write's boundaries)");
  }
  b.cover.push_back({q.file, {q.offset, q.length}});
  // Frames end at the cuts, and are at most kMaxFrame from their start.
  for (uint64_t at = q.offset, end = q.offset + q.length; at < end;) {
    const uint64_t next = std::min({end, NextCut(q.file, at), at + kMaxFrame});
    packs.push_back({&q, static_cast<size_t>(at - q.offset), static_cast<size_t>(next - at), {}});
    at = next;
  }
  return Status::Ok();
}

std::vector<std::vector<IoRequest>> SwapCodec::Windows(std::span<const IoRequest> in, uint64_t limit) const {
  std::vector<std::vector<IoRequest>> out(1);
  uint64_t bytes = 0;
  for (const IoRequest& q : in) {
    for (uint64_t at = q.offset, end = q.offset + q.length; at < end;) {
      // Split only at a cut, which no frame crosses (a read split there
      // reads no frame twice): the last one within the limit, else the
      // first after it.
      uint64_t next = std::min(end, at + std::max<uint64_t>(limit, 1));
      if (next < end) {
        const uint64_t last = LastCut(q.file, at, next);
        next = last > at ? last : std::min(end, NextCut(q.file, at));
      }
      if (bytes > 0 && bytes + (next - at) > limit) out.emplace_back(), bytes = 0;
      IoRequest piece = q;
      piece.offset = at;
      piece.buffer = static_cast<std::byte*>(q.buffer) + (at - q.offset);
      piece.length = static_cast<size_t>(next - at);
      out.back().push_back(piece);
      bytes += next - at;
      at = next;
    }
  }
  return out;
}

Status SwapCodec::PrepareRead(const IoRequest& q, Batch& b) {
  std::vector<std::pair<uint64_t, Frame>> frames;  // those the read meets
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto t = tables_.find(q.file); t != tables_.end()) frames = Overlapping(t->second, q.offset, q.length);
  }
  auto* dst = static_cast<std::byte*>(q.buffer);
  const uint64_t end = q.offset + q.length;
  uint64_t at = q.offset;  // read up to here
  auto gap = [&](uint64_t to) {
    if (to > at) b.io.push_back({IoRequest::Op::kRead, q.file, at, dst + (at - q.offset), to - at});
  };
  const size_t element = ElementOf(q.file);
  for (const auto& [fo, f] : frames) {
    gap(fo);
    const size_t stored = std::min(RoundUp(f.compressed), f.length);
    AlignedBuffer in(stored);
    b.io.push_back({IoRequest::Op::kRead, q.file, fo, in.data(), stored});
    Batch::Unpack u{in.data(), f.compressed, f.length, nullptr};
    u.element = element;
    b.scratch.push_back(std::move(in));
    if (fo >= q.offset && fo + f.length <= end) {
      u.out = dst + (fo - q.offset);
    } else {  // the read wants part of the frame: unpacked aside, then copied
      AlignedBuffer whole(f.length);
      u.out = whole.data();
      const uint64_t lo = std::max<uint64_t>(fo, q.offset), hi = std::min<uint64_t>(fo + f.length, end);
      u.copy_to = dst + (lo - q.offset);
      u.copy_from = lo - fo;
      u.copy_bytes = hi - lo;
      b.scratch.push_back(std::move(whole));
    }
    b.reads.push_back(u);
    at = std::max<uint64_t>(at, fo + f.length);
  }
  gap(end);
  return Status::Ok();
}

Status SwapCodec::Finish(Codecs codecs, Batch& b, const Status& ran) {
  if (ran.ok())
    STRATA_RETURN_IF_ERROR(ForEachFrame(codecs, b.reads.size(), [&](Codec& codec, size_t i) -> Status {
      const Batch::Unpack& u = b.reads[i];
      STRATA_RETURN_IF_ERROR(codec.Decompress({u.in, u.compressed}, u.element, {u.out, u.length}));
      if (u.copy_to != nullptr) std::memcpy(u.copy_to, u.out + u.copy_from, u.copy_bytes);
      return Status::Ok();
    }));
  if (b.cover.empty()) return Status::Ok();
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [file, range] : b.cover) {
    Table& t = tables_[file];
    t.erase(t.lower_bound(range.first), t.lower_bound(range.first + range.second));
  }
  if (ran.ok())
    for (const Batch::Frame& f : b.written)
      if (f.compressed > 0) tables_[f.file][f.offset] = {f.length, f.compressed};
  return Status::Ok();
}

}  // namespace strata::exec
