// The points of a memory series, stored by the state kinds they use.
//
// A point is a time and the bytes held of each of the kNumStateKinds kinds;
// a series uses few of them (a GPU 3 to 5 of 8, a node's NVMe 2 or 3), and
// a simulated run of every node holds about 0.7 points per op instance: at
// 72 bytes a point the series had been the largest part of a large
// timeline. Here a point costs 8 bytes for its time plus 8 per kind the
// series has ever held (a column, added on the first non-zero value of its
// kind; unused kinds read as 0). Points read as MemoryPoint values.
//
// The values can be shared: ranks that run the same plan hold the same
// bytes in the same order, at their own times, so a timeline of every rank
// keeps one copy of the values of alike series (ShareValues) and a time per
// point for each. A series changed after sharing copies its values first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "strata/core/units.h"
#include "strata/plan/plan.h"

namespace strata {

struct MemoryPoint {
  double t = 0;
  Bytes by_kind[kNumStateKinds];
  Bytes total() const;
  bool operator==(const MemoryPoint&) const;
};

class MemoryPoints {
 public:
  // Random access; dereferences to a MemoryPoint value (not a reference).
  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = MemoryPoint;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = MemoryPoint;
    const_iterator() = default;
    const_iterator(const MemoryPoints* p, size_t i) : p_(p), i_(static_cast<difference_type>(i)) {}
    MemoryPoint operator*() const { return (*p_)[static_cast<size_t>(i_)]; }
    MemoryPoint operator[](difference_type n) const { return (*p_)[static_cast<size_t>(i_ + n)]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      auto c = *this;
      ++i_;
      return c;
    }
    const_iterator& operator--() {
      --i_;
      return *this;
    }
    const_iterator operator--(int) {
      auto c = *this;
      --i_;
      return c;
    }
    const_iterator& operator+=(difference_type n) {
      i_ += n;
      return *this;
    }
    const_iterator& operator-=(difference_type n) {
      i_ -= n;
      return *this;
    }
    friend const_iterator operator+(const_iterator a, difference_type n) { return a += n; }
    friend const_iterator operator+(difference_type n, const_iterator a) { return a += n; }
    friend const_iterator operator-(const_iterator a, difference_type n) { return a -= n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) { return a.i_ - b.i_; }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.i_ == b.i_; }
    friend auto operator<=>(const const_iterator& a, const const_iterator& b) { return a.i_ <=> b.i_; }

   private:
    const MemoryPoints* p_ = nullptr;
    difference_type i_ = 0;
  };

  size_t size() const { return t_.size(); }
  bool empty() const { return t_.empty(); }
  MemoryPoint operator[](size_t i) const;
  MemoryPoint front() const { return (*this)[0]; }
  MemoryPoint back() const { return (*this)[size() - 1]; }
  double time(size_t i) const { return t_[i]; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

  // Room for n points of the kinds in `kinds` (bit k: state kind k), whose
  // columns are made now: a series that knows its kinds is never re-laid.
  void reserve(size_t n, unsigned kinds = 0);
  void push_back(const MemoryPoint& p);
  // Replaces the last point (REQUIRES: !empty()).
  void set_back(const MemoryPoint& p);
  // Bytes per point of the columns in use (shared values counted in full).
  size_t bytes_per_point() const { return sizeof(double) + sizeof(int64_t) * static_cast<size_t>(ncols_); }

  bool operator==(const MemoryPoints& o) const;

  // Makes this series read its values from `o`'s when they are the same
  // kinds, points and bytes (the times may differ); true if it now does.
  bool ShareValues(const MemoryPoints& o);
  bool SharesValuesWith(const MemoryPoints& o) const { return v_ != nullptr && v_ == o.v_; }
  // A hash of the values and their kinds (not the times), for finding alike series.
  uint64_t ValuesHash() const;

 private:
  const std::vector<int64_t>& values() const;
  std::vector<int64_t>& mutable_values();  // unshared first
  void AddColumns(const MemoryPoint& p);   // a column for each non-zero kind without one
  void AddColumn(int kind);

  std::vector<double> t_;
  std::shared_ptr<std::vector<int64_t>> v_;  // row-major: size() rows of ncols_; null while empty
  int ncols_ = 0;
  int8_t col_[kNumStateKinds] = {-1, -1, -1, -1, -1, -1, -1, -1};  // kind -> column, -1 if none
  int8_t kind_[kNumStateKinds] = {};                               // column -> kind
};

static_assert(kNumStateKinds == 8, "MemoryPoints::col_'s initializer lists every kind");

}  // namespace strata
