#include "strata/timeline/memory_points.h"

#include <algorithm>

namespace strata {

Bytes MemoryPoint::total() const {
  Bytes b;
  for (const Bytes& k : by_kind) b += k;
  return b;
}

bool MemoryPoint::operator==(const MemoryPoint& o) const {
  return t == o.t && std::equal(std::begin(by_kind), std::end(by_kind), std::begin(o.by_kind));
}

const std::vector<int64_t>& MemoryPoints::values() const {
  static const std::vector<int64_t> kNone;
  return v_ ? *v_ : kNone;
}

std::vector<int64_t>& MemoryPoints::mutable_values() {
  if (!v_)
    v_ = std::make_shared<std::vector<int64_t>>();
  else if (v_.use_count() > 1)
    v_ = std::make_shared<std::vector<int64_t>>(*v_);  // shared: copy, then change
  return *v_;
}

MemoryPoint MemoryPoints::operator[](size_t i) const {
  MemoryPoint p;
  p.t = t_[i];
  const int64_t* row = values().data() + i * static_cast<size_t>(ncols_);
  for (int c = 0; c < ncols_; ++c) p.by_kind[kind_[c]] = Bytes(row[c]);
  return p;
}

void MemoryPoints::reserve(size_t n, unsigned kinds) {
  t_.reserve(n);
  for (int k = 0; k < kNumStateKinds; ++k)
    if ((kinds >> k) & 1u && col_[k] < 0) AddColumn(k);
  mutable_values().reserve(n * static_cast<size_t>(ncols_));
}

void MemoryPoints::AddColumn(int kind) {
  // Re-lay the rows with one more column (at most once per kind), with room
  // for the rows the times have room for.
  const size_t rows = size();
  const std::vector<int64_t>& old = values();
  std::vector<int64_t> v;
  v.reserve(t_.capacity() * static_cast<size_t>(ncols_ + 1));
  for (size_t r = 0; r < rows; ++r) {
    v.insert(v.end(), old.begin() + static_cast<std::ptrdiff_t>(r * ncols_),
             old.begin() + static_cast<std::ptrdiff_t>((r + 1) * ncols_));
    v.push_back(0);
  }
  v_ = std::make_shared<std::vector<int64_t>>(std::move(v));
  col_[kind] = static_cast<int8_t>(ncols_);
  kind_[ncols_] = static_cast<int8_t>(kind);
  ++ncols_;
}

void MemoryPoints::AddColumns(const MemoryPoint& p) {
  for (int k = 0; k < kNumStateKinds; ++k)
    if (p.by_kind[k].v != 0 && col_[k] < 0) AddColumn(k);
}

void MemoryPoints::push_back(const MemoryPoint& p) {
  AddColumns(p);
  t_.push_back(p.t);
  std::vector<int64_t>& v = mutable_values();
  for (int c = 0; c < ncols_; ++c) v.push_back(p.by_kind[kind_[c]].v);
}

void MemoryPoints::set_back(const MemoryPoint& p) {
  AddColumns(p);
  t_.back() = p.t;
  int64_t* row = mutable_values().data() + (size() - 1) * static_cast<size_t>(ncols_);
  for (int c = 0; c < ncols_; ++c) row[c] = p.by_kind[kind_[c]].v;
}

bool MemoryPoints::operator==(const MemoryPoints& o) const {
  if (size() != o.size()) return false;
  for (size_t i = 0; i < size(); ++i)
    if (!((*this)[i] == o[i])) return false;
  return true;
}

bool MemoryPoints::ShareValues(const MemoryPoints& o) {
  if (SharesValuesWith(o)) return true;
  if (!o.v_ || size() != o.size() || ncols_ != o.ncols_ ||
      !std::equal(std::begin(kind_), std::begin(kind_) + ncols_, std::begin(o.kind_)) || values() != o.values())
    return false;
  v_ = o.v_;
  return true;
}

uint64_t MemoryPoints::ValuesHash() const {
  uint64_t h = 1469598103934665603ull;  // a word at a time: finding alike series, not an adversary's
  auto mix = [&h](uint64_t x) {
    h = (h ^ x) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  };
  mix(size());
  for (int c = 0; c < ncols_; ++c) mix(static_cast<uint64_t>(kind_[c]));
  for (int64_t v : values()) mix(static_cast<uint64_t>(v));
  return h;
}

}  // namespace strata
