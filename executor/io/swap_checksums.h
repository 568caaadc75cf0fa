// Checksums of what a run writes to its NVMe swap files, kept in memory
// (private to the executor). Every write request's bytes are hashed with
// XXH3-64 (libxxhash) before they go to the file; every read is checked
// against the writes it covers before the data is used, so bytes that
// changed on the device (a bit flip, another process, a truncation that
// reads back zeros) stop the run with the file, offset and length instead
// of training on them.
//
// Granularity: one checksum per write request (an op's region of a swap
// file: a partition or a sub-group's state, as the plan moves it). A read
// verifies every recorded region it contains; the plan reads back the
// regions it wrote, so in practice every byte read is checked
// (unverified_bytes() counts the rest). A fresh file is recorded as zeros,
// which any read may check in part.
//
// Thread safety: the NVMe read and write streams call concurrently; the
// plan orders a write before any read of the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "strata/core/status.h"

namespace strata::exec {

class File;

class SwapChecksums {
 public:
  // A fresh file of `bytes` zeros (as Allocate leaves it).
  void AddZeroFile(const File* f, uint64_t bytes);
  // The checksum of bytes about to be written.
  static uint64_t Hash(std::span<const std::byte> bytes);
  // Records a completed write of `bytes` bytes at `offset` whose checksum
  // is `hash`; replaces what it overlaps.
  void Wrote(const File* f, uint64_t offset, uint64_t bytes, uint64_t hash);
  // Forgets what a failed write may have left (the bytes are unknown).
  void Lost(const File* f, uint64_t offset, uint64_t bytes);
  // Checks bytes just read at `offset` against what was written there: a
  // mismatch is IOError naming the file, the region and both checksums.
  Status Verify(const File* f, uint64_t offset, std::span<const std::byte> bytes);
  uint64_t verified_bytes() const { return verified_; }
  uint64_t unverified_bytes() const { return unverified_; }

 private:
  struct Entry {
    uint64_t bytes = 0;
    uint64_t hash = 0;
    bool zeros = false;  // all zero bytes: any part of it can be checked
  };
  using Map = std::map<uint64_t, Entry>;  // by offset, disjoint
  // Removes [offset, offset+bytes) from m, keeping the zero parts outside it.
  static void Cut(Map& m, uint64_t offset, uint64_t bytes);

  std::mutex mu_;
  std::unordered_map<const File*, Map> files_;
  uint64_t verified_ = 0, unverified_ = 0;
};

}  // namespace strata::exec
