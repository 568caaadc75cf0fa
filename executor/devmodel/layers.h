// What both device models do the same way (private): a Linear layer's
// forward and backward on the GEMM, a parameter copy kept past its op, a
// tensor-parallel reduction through host memory, the mean of the rows'
// losses. Calls are ordered on the kernels' bound stream (model_kernels.h).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "devmodel/arena.h"
#include "devmodel/model_kernels.h"
#include "strata/executor/backend.h"

namespace strata::exec {

class DeviceLayers {
 public:
  DeviceLayers(ModelKernels* k, DeviceArena* mem) : k_(k), mem_(mem) {}

  // y [rows x out] = x [rows x in] W^T (W [out x in] in the plan's
  // precision; x's rounded copy the operand), fp32, with its own rounded
  // copy when `low`. Column-major: y^T = W x^T, W stored as W^T [in x out].
  Status Linear(const void* w, const DeviceTensor& x, size_t rows, size_t in, size_t out, DeviceTensor* y, bool low) {
    STRATA_RETURN_IF_ERROR(mem_->Make(y, rows * out, low));
    return k_->Gemm(true, false, out, rows, in, w, in, x.low(), in, y->f32(), out, mem_->fmt(), false);
  }
  // dW += dy^T x into a.grad[0] and (bias) db += dy's column sums into
  // a.grad[1]; then, unless dx is null, dx = dy W (fresh, fp32).
  Status LinearBackward(const ModuleArgs& a, const DeviceTensor& x, DeviceTensor* dy, size_t rows, size_t in,
                        size_t out, bool bias, DeviceTensor* dx) {
    const int fmt = mem_->fmt();
    STRATA_RETURN_IF_ERROR(mem_->EnsureLow(dy));
    STRATA_ASSIGN_OR_RETURN(auto dw, mem_->Get(in * out * sizeof(float)));
    float* dwf = reinterpret_cast<float*>(dw.data());
    // Column-major dW^T [in x out] = x^T dy.
    STRATA_RETURN_IF_ERROR(k_->Gemm(false, true, in, out, rows, x.low(), in, dy->low(), out, dwf, in, fmt, false));
    STRATA_RETURN_IF_ERROR(k_->AddGrad(a.grad[0], dwf, in * out, fmt, a.grad_fresh[0] != 0));
    mem_->Put(std::move(dw));
    if (bias) STRATA_RETURN_IF_ERROR(k_->ColumnSumsToGrad(a.grad[1], dy->f32(), rows, out, fmt, a.grad_fresh[1] != 0));
    if (dx == nullptr) return Status::Ok();
    STRATA_RETURN_IF_ERROR(mem_->Make(dx, rows * in, false));
    // Column-major dx^T [in x rows] = W^T dy^T.
    return k_->Gemm(false, false, in, rows, out, a.w[0], in, dy->low(), out, dx->f32(), in, fmt, false);
  }
  // A copy of n parameters of a plan buffer (which the plan may release
  // after the op), kept in device memory (a row-parallel bias until the
  // all-reduce).
  Result<Memory> KeepCopy(DeviceStream& s, const void* src, size_t n) {
    const size_t bytes = n * mem_->low_bytes();
    STRATA_ASSIGN_OR_RETURN(auto m, mem_->Get(bytes));
    STRATA_RETURN_IF_ERROR(s.Copy(m.data(), src, bytes));
    return m;
  }
  // t's n values reduced over the tensor-parallel group by `reduce` (the
  // caller's MPI, in host memory), in place; t's rounded copy is dropped as
  // stale (EnsureLow remakes it when a GEMM reads it). The reduction is a
  // collective: when `before` (what prepared t) failed, or the download
  // fails, this rank still takes part (with zeros, or what it has), so that
  // the peers are not left waiting, and then returns the failure.
  Status ReduceOnHost(const Status& before, DeviceTensor* t, size_t n, ReduceOp op, const TensorReduce& reduce) {
    std::vector<float> host(n, 0.0f);
    const Status got = before.ok() ? k_->Download(host.data(), t->f32(), n * sizeof(float)) : before;
    reduce(host.data(), n, op);
    STRATA_RETURN_IF_ERROR(got);
    STRATA_RETURN_IF_ERROR(k_->Upload(t->f32(), host.data(), n * sizeof(float)));
    mem_->Stale(t);
    return Status::Ok();
  }
  // *loss += the mean of the rows' losses (`rows` floats in device memory,
  // returned to the arena), summed in row order in fp32 as the host's
  // SoftmaxCrossEntropy<float> takes it.
  Status AddMeanLoss(Memory row_losses, size_t rows, double* loss) {
    std::vector<float> host(rows);
    STRATA_RETURN_IF_ERROR(k_->Download(host.data(), row_losses.data(), rows * sizeof(float)));
    mem_->Put(std::move(row_losses));
    float sum = 0.0f;
    for (float v : host) sum += v;
    *loss += sum / static_cast<float>(rows);
    return Status::Ok();
  }

 private:
  ModelKernels* k_;
  DeviceArena* mem_;
};

}  // namespace strata::exec
