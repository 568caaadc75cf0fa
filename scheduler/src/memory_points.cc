#include "strata/scheduler/memory_points.h"

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

MemoryPoint MemoryPoints::operator[](size_t i) const {
  MemoryPoint p;
  p.t = t_[i];
  const int64_t* row = v_.data() + i * static_cast<size_t>(ncols_);
  for (int c = 0; c < ncols_; ++c) p.by_kind[kind_[c]] = Bytes(row[c]);
  return p;
}

void MemoryPoints::reserve(size_t n, unsigned kinds) {
  for (int k = 0; k < kNumStateKinds; ++k)
    if ((kinds >> k) & 1u && col_[k] < 0) AddColumn(k);
  t_.reserve(n);
  v_.reserve(n * static_cast<size_t>(ncols_));
}

void MemoryPoints::AddColumn(int kind) {
  // Re-lay the rows with one more column (at most once per kind).
  const size_t rows = size();
  std::vector<int64_t> v;
  v.reserve(std::max(v_.capacity() / std::max(ncols_, 1) * static_cast<size_t>(ncols_ + 1), rows * (ncols_ + 1)));
  for (size_t r = 0; r < rows; ++r) {
    v.insert(v.end(), v_.begin() + static_cast<std::ptrdiff_t>(r * ncols_),
             v_.begin() + static_cast<std::ptrdiff_t>((r + 1) * ncols_));
    v.push_back(0);
  }
  v_.swap(v);
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
  for (int c = 0; c < ncols_; ++c) v_.push_back(p.by_kind[kind_[c]].v);
}

void MemoryPoints::set_back(const MemoryPoint& p) {
  AddColumns(p);
  t_.back() = p.t;
  int64_t* row = v_.data() + (size() - 1) * static_cast<size_t>(ncols_);
  for (int c = 0; c < ncols_; ++c) row[c] = p.by_kind[kind_[c]].v;
}

bool MemoryPoints::operator==(const MemoryPoints& o) const {
  if (size() != o.size()) return false;
  for (size_t i = 0; i < size(); ++i)
    if (!((*this)[i] == o[i])) return false;
  return true;
}

}  // namespace strata
