// Compressed NVMe swap traffic (policy.compression; docs/endurance.md
// "Compression"), private to the executor: turns a batch of requests
// between memory and swap files into the requests that go to the files,
// and finishes them once they ran.
//
// Frames: a write request is cut into frames at the file's cuts (SetCuts:
// the boundaries of every write request the plan makes, so each frame
// lies inside every write that meets it) and at kMaxFrame from a frame's
// start. Each frame is compressed on its own, and its
// compressed bytes, padded with zeros to 4 KiB, go to the file at the
// frame's own offset; a frame that would not shrink goes as it is. The
// file keeps the uncompressed layout: what is saved is the drive's writes,
// not its space. A table in memory holds each compressed frame's extent
// and size. A read reads the compressed frames it overlaps (whole) and
// decompresses them into place, and the rest as it lies.
//
// A write that covers part of a compressed frame is refused (Internal):
// the old frame could no longer be read. With the plan's cuts this does not
// happen; the refusal keeps it from going unnoticed.
//
// Thread safety: the table is shared by the streams (a mutex); each call
// takes the calling stream's codecs, one per thread that compresses or
// decompresses the batch's frames side by side (policy.compression_threads:
// the caller's thread and one started per other codec). The plan orders a
// write before any read of the same bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "io/aligned.h"
#include "io/codec.h"
#include "strata/executor/env.h"

namespace strata::exec {

class SwapCodec {
 public:
  static constexpr uint64_t kMaxFrame = uint64_t{1} << 30;  // under lz4's input limit
  // The element size `f`'s bytes are shuffled as (codec.h); 1 by default.
  void SetElement(const File* f, size_t element) { element_[f] = element; }
  // Where frames of `f` must end (sorted, unique offsets). Set before the
  // run, like SetElement.
  void SetCuts(const File* f, std::vector<uint64_t> cuts) { cuts_[f] = std::move(cuts); }
  // `in` in windows of about `limit` bytes (requests split only at cuts:
  // a window may hold one frame over the limit), so a batch's scratch
  // memory stays bounded.
  std::vector<std::vector<IoRequest>> Windows(std::span<const IoRequest> in, uint64_t limit) const;

  // The requests to submit for a batch, and what remains to do after.
  struct Batch {
    std::vector<IoRequest> io;
    struct Frame {
      File* file = nullptr;
      uint64_t offset = 0;
      size_t length = 0, compressed = 0;  // compressed 0: written as it is
    };
    std::vector<Frame> written;  // the batch's write frames, in order
    struct Unpack {
      const std::byte* in;
      size_t compressed, length;  // the frame's
      std::byte* out;             // the frame's first byte, or scratch
      std::byte* copy_to = nullptr;
      size_t copy_from = 0, copy_bytes = 0;  // part of the frame the read wants
      size_t element;
    };
    std::vector<Unpack> reads;
    std::vector<AlignedBuffer> scratch;
    std::vector<std::pair<const File*, std::pair<uint64_t, uint64_t>>> cover;  // writes' ranges
  };
  using Codecs = std::span<const std::unique_ptr<Codec>>;
  Result<Batch> Prepare(Codecs codecs, std::span<const IoRequest> in);
  // After the batch ran (`ran`: its status): decompresses the reads, and
  // records the writes' frames (on failure, forgets what they covered).
  Status Finish(Codecs codecs, Batch& b, const Status& ran);

  // Bytes of write frames given, and what went to the files for them.
  uint64_t raw_written() const { return raw_.load(); }
  uint64_t stored_written() const { return stored_.load(); }

 private:
  struct Frame {
    size_t length = 0, compressed = 0;
  };
  using Table = std::map<uint64_t, Frame>;  // a file's compressed frames, by offset
  // The frames of `t` that overlap [offset, offset + length), in order.
  static std::vector<std::pair<uint64_t, Frame>> Overlapping(const Table& t, uint64_t offset, uint64_t length);
  // A write's frames: checked against the table, listed for compression.
  struct Pack {
    const IoRequest* q;
    size_t at, n;
    AlignedBuffer out;
    size_t compressed = 0;
  };
  Status PlanWrite(const IoRequest& q, Batch& b, std::vector<Pack>& packs);
  Status PrepareRead(const IoRequest& q, Batch& b);
  size_t ElementOf(const File* f) const {
    auto it = element_.find(f);
    return it == element_.end() ? 1 : it->second;
  }
  uint64_t NextCut(const File* f, uint64_t at) const;               // the first cut after `at`, or the maximum
  uint64_t LastCut(const File* f, uint64_t at, uint64_t hi) const;  // the last in (at, hi], or `at`
  std::unordered_map<const File*, size_t> element_;                 // set before the run
  std::unordered_map<const File*, std::vector<uint64_t>> cuts_;
  std::mutex mu_;  // guards tables_
  std::unordered_map<const File*, Table> tables_;
  std::atomic<uint64_t> raw_{0}, stored_{0};
};

}  // namespace strata::exec
