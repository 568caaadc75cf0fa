// The data-parallel group of `strata run`: MPI when launched by mpirun, a
// single rank otherwise. MPI stays private to the executor; callers only see
// these collectives. Calls are serialized by a lock (MPI is initialized with
// MPI_THREAD_SERIALIZED: stream workers may call from different threads).
#pragma once

#include <cstddef>
#include <string>

namespace strata::exec {

class Comm {
 public:
  // Initializes MPI on first use (finalized at exit).
  static Comm& World();
  int rank() const { return rank_; }
  int size() const { return size_; }

  // dst (size x bytes) = every rank's src, in rank order.
  void Allgather(const void* src, void* dst, size_t bytes);
  // dst's q-th block (bytes) = rank q's src block for this rank: every rank
  // sends its r-th block of src to rank r.
  void AllToAll(const void* src, void* dst, size_t bytes);
  void AllreduceSum(float* data, size_t count);
  double AllreduceSum(double v);
  bool AnyTrue(bool v);
  // Rank 0's string on every rank.
  std::string Broadcast(const std::string& s);
  // Ends every rank of the job with `code` (MPI_Abort): a rank that fails
  // must not leave the others blocked in a collective. Single rank: exit.
  [[noreturn]] void Abort(int code);

 private:
  Comm();
  int rank_ = 0, size_ = 1;
};

}  // namespace strata::exec
