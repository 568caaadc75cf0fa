#include "runtime/storage.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include "io/striped_file.h"
#include "strata/core/paths.h"
#include "strata/executor/interrupt.h"

namespace strata::exec {

BufferStore::BufferStore(const Plan& plan, Env* env, Backend* backend, std::string nvme_dir, int rank, bool keep_files)
    : plan_(plan),
      env_(env),
      backend_(backend),
      dir_(std::move(nvme_dir)),
      rank_(rank),
      keep_files_(keep_files),
      mem_(plan.buffers.size()),
      files_(plan.buffers.size()) {}

BufferStore::~BufferStore() {
  for (auto& f : files_) f.reset();
  for (const auto& d : run_dirs_) {
    if (d->run.empty() || keep_files_) continue;
    UnregisterStopCleanup(d->run);
    (void)env_->RemoveTree(d->run);  // best effort: nothing to report to at this point
  }
}

namespace {

// Every run directory holds this file from its creation on; a directory
// without it is never removed, whatever its name.
constexpr char kRunMarker[] = "STRATA-RUN";
constexpr char kRunMarkerText[] = "strata run directory";

bool IsStrataRunDir(Env* env, const std::string& dir) {
  auto f = env->OpenFile(dir + "/" + kRunMarker, /*create=*/false);
  if (!f.ok() || (*f)->size() > 256 || (*f)->size() < sizeof kRunMarkerText - 1) return false;
  std::string text((*f)->size(), '\0');
  if (!(*f)->Read(0, {reinterpret_cast<std::byte*>(text.data()), text.size()}).ok()) return false;
  return text.rfind(kRunMarkerText, 0) == 0;
}

std::string HostName() {
  char host[256] = {};
  return ::gethostname(host, sizeof host - 1) == 0 ? host : "unknown";
}

}  // namespace

Result<const BufferStore::RunDir*> BufferStore::RunDirOf(const Buffer& b, int stripe) {
  const std::string& dir = !dir_.empty() ? dir_
                           : stripe >= 0 ? plan_.run.nvme_dirs[static_cast<size_t>(stripe)]
                                         : plan_.SwapDirOf(b);
  if (dir.empty())
    return Status::InvalidArgument("the plan keeps '" + b.name + "' on NVMe but names no swap directory for it");
  for (const auto& d : run_dirs_)
    if (d->dir == dir) return d.get();
  // Listed before it is opened: the destructor removes what a failed open
  // left.
  run_dirs_.push_back(std::make_unique<RunDir>());
  run_dirs_.back()->dir = dir;
  STRATA_RETURN_IF_ERROR(OpenRunDir(*run_dirs_.back()));
  return run_dirs_.back().get();
}

Status BufferStore::OpenRunDir(RunDir& d) {
  const std::string& dir = d.dir;
  STRATA_RETURN_IF_ERROR(CheckUserDirectory("the swap directory", dir));
  STRATA_RETURN_IF_ERROR(env_->CreateDir(dir));
  const std::string stem = "strata-rank" + std::to_string(rank_);
  STRATA_ASSIGN_OR_RETURN(auto lock, env_->LockFile(dir + "/" + stem + ".lock"));
  d.lock = std::move(lock);
  // Holding the lock, a run directory of this rank is a killed run's: it
  // is removed if it carries the marker (a directory of someone else's
  // that happens to have the name is left alone).
  STRATA_ASSIGN_OR_RETURN(auto names, env_->ListDir(dir));
  for (const std::string& n : names)
    if (n.rfind(stem + ".run-", 0) == 0 && IsStrataRunDir(env_, dir + "/" + n))
      STRATA_RETURN_IF_ERROR(env_->RemoveTree(dir + "/" + n));
  const std::string run = dir + "/" + stem + ".run-" + std::to_string(::getpid());
  STRATA_RETURN_IF_ERROR(env_->CreateNewDir(run));
  d.run = run;
  if (!keep_files_) RegisterStopCleanup(run);
  STRATA_ASSIGN_OR_RETURN(auto marker, env_->CreateNewFile(run + "/" + kRunMarker));
  const std::string text = std::string(kRunMarkerText) + ": rank " + std::to_string(rank_) + ", process " +
                           std::to_string(::getpid()) + ", host " + HostName() + "\n";
  return (marker)->Write(0, {reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

Status BufferStore::Account(const Buffer& b, const Op* op) {
  const int t = static_cast<int>(b.tier);
  use_[t] += b.bytes;
  const Bytes node = use_[t] * plan_.NodeScale(b.tier);
  if (node > plan_.capacity[t]) {
    use_[t] -= b.bytes;
    return Status::Infeasible(
        std::string(TierName(b.tier)) + " tier over capacity " +
        (op ? "at op " + std::to_string(op->id) + " '" + op->name + "'" : std::string("for resident state")) +
        " allocating '" + b.name + "': needs " + FormatBytes(node) + ", capacity " + FormatBytes(plan_.capacity[t]) +
        ", over by " + FormatBytes(node - plan_.capacity[t]) +
        (b.tier == Tier::kGpu ? GpuReservedNote(plan_) : std::string()));
  }
  peak_[t] = std::max(peak_[t], node);
  return Status::Ok();
}

Status BufferStore::Open() {
  // A rank holds its pipeline stage's buffers only.
  const int stage = plan_.StageOf(rank_);
  // Every swap directory first, so a second run is refused before memory
  // is allocated.
  for (const Buffer& b : plan_.buffers)
    if (b.tier == Tier::kNvme && b.stage == stage)
      for (int d = 0; d < Stripes(); ++d) STRATA_RETURN_IF_ERROR(RunDirOf(b, plan_.run.striped ? d : -1).status());
  for (const Buffer& b : plan_.buffers) {
    if (!b.resident || b.stage != stage) continue;
    STRATA_RETURN_IF_ERROR(Account(b, nullptr));
    if (!b.backed) continue;  // counted, not allocated (plan.h Buffer::backed)
    if (b.tier == Tier::kNvme) {
      STRATA_RETURN_IF_ERROR(OpenSwapFile(b));
    } else {
      STRATA_ASSIGN_OR_RETURN(auto m, Allocate(b, true));
      mem_[b.id] = std::move(m);
    }
  }
  return Status::Ok();
}

Status BufferStore::OpenSwapFile(const Buffer& b) {
  // A fresh file reads as zeros: nothing of an earlier run is used.
  const auto bytes = static_cast<uint64_t>(b.bytes.v);
  if (!plan_.run.striped) {
    STRATA_ASSIGN_OR_RETURN(const RunDir* d, RunDirOf(b, -1));
    STRATA_ASSIGN_OR_RETURN(auto f, env_->CreateNewFile(d->run + "/" + b.name + ".swp"));
    STRATA_RETURN_IF_ERROR((f)->Allocate(bytes));
    sums_.AddZeroFile(f.get(), bytes);
    files_[b.id] = std::move(f);
    return Status::Ok();
  }
  // Striped (policy.stripe_paths): a part in each stripe directory.
  std::vector<std::unique_ptr<File>> parts;
  for (int d = 0; d < Stripes(); ++d) {
    STRATA_ASSIGN_OR_RETURN(const RunDir* dir, RunDirOf(b, d));
    STRATA_ASSIGN_OR_RETURN(auto f,
                            env_->CreateNewFile(dir->run + "/" + b.name + ".stripe" + std::to_string(d) + ".swp"));
    parts.push_back(std::move(f));
  }
  auto striped = std::make_unique<StripedFile>(b.name + " (striped over " + std::to_string(Stripes()) + " drives)",
                                               std::move(parts), plan_.run.aio.block_size.v, b.nvme_dir);
  STRATA_RETURN_IF_ERROR(striped->Allocate(bytes));
  for (size_t d = 0; d < striped->parts(); ++d) sums_.AddZeroFile(striped->part(d), striped->part_bytes(d));
  files_[b.id] = std::move(striped);
  return Status::Ok();
}

Status BufferStore::Reserve() {
  const int stage = plan_.StageOf(rank_);
  auto pooled = [&](const Buffer& b) {
    return !b.resident && b.backed && b.stage == stage && b.tier != Tier::kNvme && (b.tier != Tier::kCpu || b.pinned);
  };
  std::map<std::pair<Tier, int64_t>, std::pair<int, int>> sizes;  // live now, most live
  for (const Op& op : plan_.ops) {
    for (BufferId id : op.allocs) {
      const Buffer& b = plan_.buffers[id];
      if (!pooled(b)) continue;
      auto& [live, most] = sizes[{b.tier, b.bytes.v}];
      most = std::max(most, ++live);
    }
    for (BufferId id : op.frees)
      if (pooled(plan_.buffers[id])) --sizes[{plan_.buffers[id].tier, plan_.buffers[id].bytes.v}].first;
  }
  for (const auto& [key, count] : sizes)
    STRATA_RETURN_IF_ERROR(backend_->Reserve(key.first, static_cast<size_t>(key.second), count.second));
  return Status::Ok();
}

Status BufferStore::Allocate(BufferId id, const Op& op) {
  const Buffer& b = plan_.buffers[id];
  if (b.tier == Tier::kNvme) return Status::Internal("transient NVMe buffer '" + b.name + "' is not supported");
  {
    std::lock_guard<std::mutex> l(mu_);
    STRATA_RETURN_IF_ERROR(Account(b, &op));
  }
  auto m = Allocate(b, b.cleared);  // plan.h Buffer::cleared
  if (!m.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    use_[static_cast<int>(b.tier)] -= b.bytes;
    return m.status();
  }
  mem_[id] = std::move(*m);
  return Status::Ok();
}

void BufferStore::Free(BufferId id) {
  {
    std::lock_guard<std::mutex> l(mu_);
    use_[static_cast<int>(plan_.buffers[id].tier)] -= plan_.buffers[id].bytes;
  }
  mem_[id] = Memory();
}

}  // namespace strata::exec
