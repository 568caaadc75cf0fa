#include "strata/executor/io_roofline.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "io/aligned.h"

namespace strata::exec {

// One op's engine batch over the shadow files, with its scratch memory.
struct RooflineBatch {
  bool read = true;
  std::vector<size_t> after;  // the nearest NVMe batches it depends on (through any ops)
  AlignedBuffer mem;
  std::vector<IoRequest> requests;
};

struct IoRooflineProbe::Impl {
  Env* env = nullptr;
  std::vector<std::unique_ptr<File>> files;  // by BufferId; null off NVMe
  std::vector<RooflineBatch> ops;            // plan order
  std::unique_ptr<IoEngine> engines[2];      // reads, writes
  int64_t read_bytes = 0, write_bytes = 0;

  ~Impl() {
    for (auto& f : files)
      if (f) (void)env->RemoveFile(f->path());  // best effort: a leftover shadow file holds no state
  }

  // Every batch of one direction, in plan order, on its engine; with
  // `ordered`, each once the batches it depends on are done.
  Status RunDirection(bool read, bool ordered) {
    for (size_t i = 0; i < ops.size(); ++i) {
      RooflineBatch& b = ops[i];
      if (b.read != read) continue;
      if (ordered) {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] {
          if (failed) return true;
          for (size_t a : b.after)
            if (!done[a]) return false;
          return true;
        });
        if (failed) return Status::Ok();  // the other direction's error is the one reported
      }
      Status st = engines[read ? 0 : 1]->Run(b.requests);
      std::lock_guard<std::mutex> l(mu);
      if (!st.ok()) failed = true;
      done[i] = 1;
      cv.notify_all();
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  // Both directions at once, each on its own thread.
  Result<double> RunBoth(bool ordered) {
    done.assign(ops.size(), 0);
    failed = false;
    Status st[2];
    const double t0 = env->NowSeconds();
    std::thread writer([&] { st[1] = RunDirection(false, ordered); });
    st[0] = RunDirection(true, ordered);
    writer.join();
    const double t = env->NowSeconds() - t0;
    for (const Status& s : st) STRATA_RETURN_IF_ERROR(s);
    return t;
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<char> done;
  bool failed = false;
};

IoRooflineProbe::IoRooflineProbe(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IoRooflineProbe::IoRooflineProbe(IoRooflineProbe&&) noexcept = default;
IoRooflineProbe& IoRooflineProbe::operator=(IoRooflineProbe&&) noexcept = default;
IoRooflineProbe::~IoRooflineProbe() = default;

namespace {
size_t RoundUp(size_t n) { return (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }
}  // namespace

Result<IoRooflineProbe> IoRooflineProbe::Open(const Plan& plan, const IoRooflineOptions& o) {
  auto impl = std::make_unique<Impl>();
  impl->env = o.env != nullptr ? o.env : PosixEnv();
  Env* env = impl->env;
  for (auto& e : impl->engines) {
    STRATA_ASSIGN_OR_RETURN(auto made, env->NewIoEngine(o.engine, plan.run.aio));
    e = std::move(made);
  }
  // Shadow files, written through once with a pattern.
  impl->files.resize(plan.buffers.size());
  constexpr size_t kChunk = size_t{8} << 20;
  AlignedBuffer fill(kChunk);
  std::memset(fill.data(), 0x5a, kChunk);
  for (const Buffer& b : plan.buffers) {
    if (b.tier != Tier::kNvme) continue;
    // Where the run keeps this buffer's swap file (Buffer::nvme_dir).
    const std::string& dir = !o.nvme_dir.empty() ? o.nvme_dir : plan.SwapDirOf(b);
    if (dir.empty())
      return Status::InvalidArgument("the plan keeps '" + b.name + "' on NVMe but names no directory for it: give one");
    STRATA_RETURN_IF_ERROR(env->CreateDir(dir));
    const std::string path = dir + "/strata-roofline-rank" + std::to_string(o.rank) + "-" + b.name + ".swp";
    STRATA_RETURN_IF_ERROR(env->RemoveFile(path));
    STRATA_ASSIGN_OR_RETURN(auto f, env->OpenFile(path, true));
    const auto size = static_cast<uint64_t>(b.bytes.v);
    STRATA_RETURN_IF_ERROR((f)->Allocate(size));
    for (uint64_t off = 0; off < size; off += kChunk) {
      const IoRequest w{IoRequest::Op::kWrite, f.get(), off, fill.data(),
                        static_cast<size_t>(std::min<uint64_t>(kChunk, size - off))};
      STRATA_RETURN_IF_ERROR(impl->engines[1]->Run({&w, 1}));
    }
    impl->files[static_cast<size_t>(b.id)] = std::move(f);
  }
  // Each NVMe op's requests, memory side in scratch, each request on its
  // own 4 KiB-aligned stretch (as the executor's padded buffers are).
  auto on_nvme = [&](const Region& r) {
    return r.valid() && r.buffer >= 0 && impl->files[static_cast<size_t>(r.buffer)] != nullptr;
  };
  // nearest[op]: the NVMe batches an op's result waits on, nearest first
  // (deps point to earlier ops in the list).
  std::vector<std::vector<size_t>> nearest(plan.ops.size());
  for (const Op& op : plan.ops) {
    std::vector<size_t> after;
    for (OpId d : op.deps) after.insert(after.end(), nearest[d].begin(), nearest[d].end());
    std::sort(after.begin(), after.end());
    after.erase(std::unique(after.begin(), after.end()), after.end());
    if (op.kind != OpKind::kNvmeRead && op.kind != OpKind::kNvmeWrite) {
      nearest[op.id] = std::move(after);
      continue;
    }
    nearest[op.id] = {impl->ops.size()};
    RooflineBatch batch;
    batch.after = std::move(after);
    batch.read = op.kind == OpKind::kNvmeRead;
    size_t scratch = 0;
    for (const Move& m : op.moves) scratch += RoundUp(static_cast<size_t>(m.src.bytes.v));
    batch.mem = AlignedBuffer(scratch);
    size_t at = 0;
    for (const Move& m : op.moves) {
      const Region& file_side = batch.read ? m.src : m.dst;
      if (!on_nvme(file_side)) return Status::Internal("op '" + op.name + "': an NVMe op's move without an NVMe side");
      const auto bytes = static_cast<size_t>(file_side.bytes.v);
      std::memset(batch.mem.data() + at, 0x3c, bytes);
      batch.requests.push_back({batch.read ? IoRequest::Op::kRead : IoRequest::Op::kWrite,
                                impl->files[static_cast<size_t>(file_side.buffer)].get(),
                                static_cast<uint64_t>(file_side.offset.v), batch.mem.data() + at, bytes});
      (batch.read ? impl->read_bytes : impl->write_bytes) += file_side.bytes.v;
      at += RoundUp(bytes);
    }
    impl->ops.push_back(std::move(batch));
  }
  return IoRooflineProbe(std::move(impl));
}

Result<IoRoofline> IoRooflineProbe::Measure() {
  Impl& m = *impl_;
  IoRoofline r;
  r.read_bytes = m.read_bytes;
  r.write_bytes = m.write_bytes;
  STRATA_ASSIGN_OR_RETURN(auto concurrent, m.RunBoth(false));
  r.concurrent_s = concurrent;
  STRATA_ASSIGN_OR_RETURN(auto ordered, m.RunBoth(true));
  r.ordered_s = ordered;
  const double t0 = m.env->NowSeconds();
  STRATA_RETURN_IF_ERROR(m.RunDirection(true, false));
  STRATA_RETURN_IF_ERROR(m.RunDirection(false, false));
  r.turns_s = m.env->NowSeconds() - t0;
  return r;
}

}  // namespace strata::exec
