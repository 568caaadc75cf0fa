// The device model's activations (private): a tensor in device memory, fp32
// with (in 16-bit precisions) its copy rounded to the precision, the GEMMs'
// operand; and the free list they come from and go back to. Everything is
// used on the compute stream only, so a block returned is reused in stream
// order.
#pragma once

#include <cstddef>
#include <map>
#include <utility>

#include "devmodel/model_kernels.h"
#include "strata/executor/model_math.h"

namespace strata::exec {

struct DeviceTensor {
  Memory f32_mem, low_mem;
  float* f32() const { return reinterpret_cast<float*>(f32_mem.data()); }
  int32_t* i32() const { return reinterpret_cast<int32_t*>(f32_mem.data()); }
  // The GEMM operand: the rounded copy, or in fp32 the tensor itself.
  const void* low() const { return low_mem.data() != nullptr ? static_cast<const void*>(low_mem.data()) : f32(); }
  void* low_out() const { return low_mem.data(); }  // where to write the rounded copy (null in fp32)
  size_t size() const { return f32_mem.size() / sizeof(float); }
  bool empty() const { return f32_mem.data() == nullptr; }
};

class DeviceArena {
 public:
  explicit DeviceArena(ModelKernels* k) : k_(k) {}
  // The plan's precision (model_math.h's format), set by each module call.
  void set_fmt(int fmt) { fmt_ = fmt; }
  int fmt() const { return fmt_; }
  size_t low_bytes() const { return fmt_ == dm::kFp32 ? 4 : 2; }

  Result<Memory> Get(size_t bytes) {
    auto it = free_.find(bytes);
    if (it != free_.end()) {
      Memory m = std::move(it->second);
      free_.erase(it);
      return m;
    }
    return k_->Alloc(bytes);
  }
  void Put(Memory m) {
    if (m.data() != nullptr) free_.emplace(m.size(), std::move(m));
  }
  void Drop(DeviceTensor& t) {
    Put(std::move(t.f32_mem));
    Put(std::move(t.low_mem));
  }
  // t = n fp32 values (what t held goes back first), with a rounded copy
  // when `low` and the precision is 16-bit; `zero`: the values zeroed.
  Status Make(DeviceTensor* t, size_t n, bool low, bool zero = false) {
    Drop(*t);
    STRATA_ASSIGN_OR_RETURN(auto f, Get(n * sizeof(float)));
    t->f32_mem = std::move(f);
    if (zero) STRATA_RETURN_IF_ERROR(k_->Zero(t->f32_mem.data(), n * sizeof(float)));
    if (low && fmt_ != dm::kFp32) {
      STRATA_ASSIGN_OR_RETURN(auto l, Get(n * low_bytes()));
      t->low_mem = std::move(l);
    }
    return Status::Ok();
  }
  // Room for t's rounded copy (16-bit precisions), for a kernel to write.
  Status AddLow(DeviceTensor* t) {
    if (fmt_ == dm::kFp32 || t->low_mem.data() != nullptr) return Status::Ok();
    STRATA_ASSIGN_OR_RETURN(auto l, Get(t->size() * low_bytes()));
    t->low_mem = std::move(l);
    return Status::Ok();
  }
  // The rounded copy of t's current values, made if missing (a tensor
  // received, or one a kernel wrote in fp32 only).
  Status EnsureLow(DeviceTensor* t) {
    if (fmt_ == dm::kFp32 || t->low_mem.data() != nullptr) return Status::Ok();
    STRATA_RETURN_IF_ERROR(AddLow(t));
    return k_->Round(t->low_mem.data(), t->f32(), t->size(), fmt_);
  }
  // t's fp32 values changed: its rounded copy goes (EnsureLow remakes it
  // where a GEMM reads it; a tensor read in fp32 only never pays for one).
  void Stale(DeviceTensor* t) { Put(std::move(t->low_mem)); }

 private:
  ModelKernels* k_;
  int fmt_ = dm::kFp32;
  std::multimap<size_t, Memory> free_;
};

}  // namespace strata::exec
