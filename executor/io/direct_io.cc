#include "io/direct_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>

namespace strata::exec {

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  const char* name = err == ENOSPC ? " (ENOSPC)" : err == EIO ? " (EIO)" : err == ENOENT ? " (ENOENT)" : "";
  return Status::IOError(what + " '" + path + "': " + std::strerror(err) + name);
}

namespace {

bool Aligned(uint64_t x) { return x % kDirectAlign == 0; }
uint64_t Down(uint64_t x) { return x / kDirectAlign * kDirectAlign; }
uint64_t Up(uint64_t x) { return (x + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }

void Split(std::vector<DirectOp>& out, IoRequest::Op op, const File* f, uint64_t off, std::byte* buf, size_t len,
           size_t block) {
  for (size_t done = 0; done < len; done += block)
    out.push_back({op, f->direct_fd(), &f->path(), off + done, buf + done, std::min(block, len - done)});
}

}  // namespace

DirectPlan PlanDirect(std::span<const IoRequest> requests, size_t block_size) {
  const size_t cut = std::max(kDirectAlign, Up(block_size));
  DirectPlan p;
  for (const IoRequest& r : requests) {
    if (r.length == 0) continue;
    const size_t block = r.whole ? Up(r.length) : cut;
    auto* user = static_cast<std::byte*>(r.buffer);
    if (Aligned(r.offset) && Aligned(r.length) && Aligned(reinterpret_cast<uintptr_t>(user))) {
      Split(p.ops, r.op, r.file, r.offset, user, r.length, block);
      continue;
    }
    const uint64_t lo = Down(r.offset), hi = Up(r.offset + r.length);
    p.bounces.emplace_back(hi - lo);
    std::byte* bounce = p.bounces.back().data();
    const size_t head = r.offset - lo;
    if (r.op == IoRequest::Op::kRead) {
      Split(p.ops, r.op, r.file, lo, bounce, hi - lo, block);
      p.copy_outs.push_back({bounce + head, user, r.length});
      continue;
    }
    // Partial first/last blocks keep their other bytes: read them first.
    if (head != 0)
      p.pre_reads.push_back({IoRequest::Op::kRead, r.file->direct_fd(), &r.file->path(), lo, bounce, kDirectAlign});
    if (!Aligned(r.offset + r.length) && (hi - kDirectAlign != lo || head == 0))
      p.pre_reads.push_back({IoRequest::Op::kRead, r.file->direct_fd(), &r.file->path(), hi - kDirectAlign,
                             bounce + (hi - kDirectAlign - lo), kDirectAlign});
    p.copy_ins.push_back({bounce + head, user, r.length});
    Split(p.ops, r.op, r.file, lo, bounce, hi - lo, block);
  }
  return p;
}

namespace {

// One thread's share: keep up to `depth` ops in flight.
Status RunOne(std::span<const DirectOp> ops, const AioConfig& cfg, AsyncQueue& q) {
  const unsigned depth = static_cast<unsigned>(std::max(1, cfg.queue_depth));
  size_t next = 0, in_flight = 0;
  Status first;
  std::vector<std::pair<size_t, long>> done;
  while (next < ops.size() || in_flight > 0) {
    // Refill: with overlap_events as soon as there is room, else only when
    // the queue has drained.
    if (first.ok() && (cfg.overlap_events || in_flight == 0)) {
      size_t added = 0;
      while (next < ops.size() && in_flight + added < depth) q.Prepare(ops[next], next), ++next, ++added;
      if (added > 0) {
        Status st = q.Submit(cfg.single_submit);
        if (!st.ok()) return st;  // nothing of this batch is in flight
        in_flight += added;
      }
    }
    if (in_flight == 0) break;
    done.clear();
    Status st = q.Reap(1, done);
    if (!st.ok()) return st;
    for (auto [tag, res] : done) {
      --in_flight;
      const DirectOp& op = ops[tag];
      if (!first.ok()) continue;
      if (res < 0)
        first = ErrnoStatus(op.op == IoRequest::Op::kRead ? "read" : "write", *op.path, static_cast<int>(-res));
      else if (static_cast<size_t>(res) != op.len)
        first = Status::IOError(std::string(op.op == IoRequest::Op::kRead ? "short read" : "short write") + " on '" +
                                *op.path + "': " + std::to_string(res) + " of " + std::to_string(op.len) +
                                " bytes at offset " + std::to_string(op.offset));
    }
  }
  return first;
}

Status RunThreads(std::span<const DirectOp> ops, const AioConfig& cfg, const std::vector<AsyncQueue*>& queues) {
  if (ops.empty()) return Status::Ok();
  const size_t threads = std::max<size_t>(1, std::min(queues.size(), ops.size()));
  if (threads == 1) return RunOne(ops, cfg, *queues[0]);
  std::vector<Status> results(threads);
  std::vector<std::thread> pool;
  const size_t per = (ops.size() + threads - 1) / threads;
  for (size_t t = 0; t < threads; ++t) {
    const size_t a = t * per, b = std::min(ops.size(), a + per);
    if (a >= b) break;
    pool.emplace_back([&, t, a, b] { results[t] = RunOne(ops.subspan(a, b - a), cfg, *queues[t]); });
  }
  for (auto& th : pool) th.join();
  for (auto& r : results)
    if (!r.ok()) return r;
  return Status::Ok();
}

}  // namespace

Status RunQueued(std::span<const DirectOp> ops, const AioConfig& cfg, const std::vector<AsyncQueue*>& queues) {
  return RunThreads(ops, cfg, queues);
}

}  // namespace strata::exec
