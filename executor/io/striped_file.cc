#include "io/striped_file.h"

#include "strata/plan/write_requests.h"

namespace strata::exec {

StripedFile::StripedFile(std::string path, std::vector<std::unique_ptr<File>> parts, int64_t unit, int start)
    : path_(std::move(path)), parts_(std::move(parts)), unit_(unit), start_(start) {}

void StripedFile::Split(const IoRequest& q, std::vector<IoRequest>* out) const {
  ForEachStripe(static_cast<int64_t>(q.offset), static_cast<int64_t>(q.length), unit_, start_,
                static_cast<int>(parts_.size()), [&](int d, int64_t at, int64_t offset, int64_t n) {
                  IoRequest p = q;
                  p.file = parts_[static_cast<size_t>(d)].get();
                  p.offset = static_cast<uint64_t>(at);
                  p.buffer = static_cast<std::byte*>(q.buffer) + (static_cast<uint64_t>(offset) - q.offset);
                  p.length = static_cast<size_t>(n);
                  out->push_back(p);
                });
}

Status StripedFile::Read(uint64_t offset, std::span<std::byte> out) {
  std::vector<IoRequest> pieces;
  Split({IoRequest::Op::kRead, this, offset, out.data(), out.size()}, &pieces);
  for (const IoRequest& p : pieces)
    STRATA_RETURN_IF_ERROR(p.file->Read(p.offset, {static_cast<std::byte*>(p.buffer), p.length}));
  return Status::Ok();
}

Status StripedFile::Write(uint64_t offset, std::span<const std::byte> in) {
  std::vector<IoRequest> pieces;
  Split({IoRequest::Op::kWrite, this, offset, const_cast<std::byte*>(in.data()), in.size()}, &pieces);
  for (const IoRequest& p : pieces)
    STRATA_RETURN_IF_ERROR(p.file->Write(p.offset, {static_cast<const std::byte*>(p.buffer), p.length}));
  return Status::Ok();
}

uint64_t StripedFile::part_bytes(size_t d) const {
  return static_cast<uint64_t>(StripeFileBytes(static_cast<int64_t>(size_), unit_, start_,
                                               static_cast<int>(parts_.size()), static_cast<int>(d)));
}

Status StripedFile::Allocate(uint64_t size) {
  size_ = size;
  for (size_t d = 0; d < parts_.size(); ++d)
    if (const uint64_t n = part_bytes(d); n > 0) STRATA_RETURN_IF_ERROR(parts_[d]->Allocate(n));
  return Status::Ok();
}

Status StripedFile::Sync() {
  for (auto& p : parts_) STRATA_RETURN_IF_ERROR(p->Sync());
  return Status::Ok();
}

}  // namespace strata::exec
