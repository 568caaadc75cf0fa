// A swap file striped over drives (policy.stripe_paths; docs/endurance.md
// "Striping"), private to the executor: one File per drive, the buffer's
// unit k (of `unit` bytes) on part (start + k) mod parts, at unit k / parts
// of that part (plan/write_requests.h ForEachStripe, the same arithmetic
// the wear model counts with). Reads and writes through this File are
// split over the parts; the runner splits its engine requests the same
// way (Split), so each reaches a part's own O_DIRECT descriptor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "strata/executor/env.h"

namespace strata::exec {

class StripedFile : public File {
 public:
  // `path` names it in errors (the parts name their own).
  StripedFile(std::string path, std::vector<std::unique_ptr<File>> parts, int64_t unit, int start);
  Status Read(uint64_t offset, std::span<std::byte> out) override;
  Status Write(uint64_t offset, std::span<const std::byte> in) override;
  // Each part its share of `size` (StripeFileBytes).
  Status Allocate(uint64_t size) override;
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  Status Sync() override;
  // `q`, a request on this file, as requests on the parts (appended).
  void Split(const IoRequest& q, std::vector<IoRequest>* out) const;
  size_t parts() const { return parts_.size(); }
  File* part(size_t d) const { return parts_[d].get(); }
  // Part d's share of the file's size (StripeFileBytes).
  uint64_t part_bytes(size_t d) const;

 private:
  std::string path_;
  std::vector<std::unique_ptr<File>> parts_;
  int64_t unit_;
  int start_;
  uint64_t size_ = 0;
};

}  // namespace strata::exec
