#include "io/swap_checksums.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "strata/executor/env.h"

namespace strata::exec {
namespace {

bool AllZero(std::span<const std::byte> b) {
  // Word at a time; the tail byte by byte.
  size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, b.data() + i, 8);
    if (w != 0) return false;
  }
  for (; i < b.size(); ++i)
    if (b[i] != std::byte{0}) return false;
  return true;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t SwapChecksums::Hash(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

void SwapChecksums::AddZeroFile(const File* f, uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  Map& m = files_[f];
  m.clear();
  if (bytes > 0) m[0] = Entry{bytes, 0, true};
}

void SwapChecksums::Cut(Map& m, uint64_t offset, uint64_t bytes) {
  const uint64_t end = offset + bytes;
  auto it = m.upper_bound(offset);
  if (it != m.begin()) --it;
  while (it != m.end() && it->first < end) {
    const uint64_t a = it->first, e = a + it->second.bytes;
    if (e <= offset) {
      ++it;
      continue;
    }
    const Entry old = it->second;
    it = m.erase(it);
    // The parts of a zero region outside the cut stay zeros; a written
    // region's checksum covers all of it, so its remains are forgotten.
    if (old.zeros) {
      if (a < offset) m[a] = Entry{offset - a, 0, true};
      if (e > end) it = m.emplace(end, Entry{e - end, 0, true}).first;
    }
  }
}

void SwapChecksums::Wrote(const File* f, uint64_t offset, uint64_t bytes, uint64_t hash) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  Map& m = files_[f];
  Cut(m, offset, bytes);
  m[offset] = Entry{bytes, hash, false};
}

void SwapChecksums::Lost(const File* f, uint64_t offset, uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  Cut(files_[f], offset, bytes);
}

Status SwapChecksums::Verify(const File* f, uint64_t offset, std::span<const std::byte> bytes) {
  const uint64_t end = offset + bytes.size();
  std::vector<std::pair<uint64_t, Entry>> hits;
  {
    std::lock_guard<std::mutex> l(mu_);
    Map& m = files_[f];
    auto it = m.upper_bound(offset);
    if (it != m.begin()) --it;
    for (; it != m.end() && it->first < end; ++it)
      if (it->first + it->second.bytes > offset) hits.emplace_back(*it);
  }
  uint64_t checked = 0;
  for (const auto& [a, e] : hits) {
    const uint64_t from = std::max(a, offset), to = std::min(a + e.bytes, end);
    const auto part = bytes.subspan(from - offset, to - from);
    if (e.zeros) {
      if (!AllZero(part))
        return Status::IOError("checksum mismatch reading '" + f->path() + "': bytes " + std::to_string(from) + "-" +
                               std::to_string(to) +
                               " were never written and must read as zeros; the swap file "
                               "changed under the run (the data is not used)");
      checked += to - from;
      continue;
    }
    if (from != a || to != a + e.bytes) continue;  // part of a written region: not checkable
    const uint64_t got = Hash(part);
    if (got != e.hash)
      return Status::IOError("checksum mismatch reading '" + f->path() + "' at offset " + std::to_string(a) + " (" +
                             std::to_string(e.bytes) + " bytes): XXH3 " + Hex(got) + ", written as " + Hex(e.hash) +
                             "; the swap file changed under the run (the data is not used)");
    checked += e.bytes;
  }
  std::lock_guard<std::mutex> l(mu_);
  verified_ += checked;
  unverified_ += bytes.size() - checked;
  return Status::Ok();
}

}  // namespace strata::exec
