// The process groups of `strata run`: MPI when launched by mpirun, a single
// rank otherwise. MPI stays private to the executor; callers only see these
// calls. MPI is initialized with MPI_THREAD_SERIALIZED (stream workers may
// call from different threads), so every MPI call is made under one lock.
// A call never blocks while holding it: each is posted nonblocking and
// completed by polling, the lock released between polls. (A blocking
// collective under the lock deadlocks a pipeline: one stream of a rank
// waits in it for a peer which waits for a send this rank's other stream
// cannot post.)
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace strata::exec {

class Comm {
 public:
  // Initializes MPI on first use (finalized at exit).
  static Comm& World();
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

  // The sub-communicator of the ranks passing the same `color`, ordered by
  // `key` (MPI_Comm_split); collective over this communicator. With one
  // rank in the color it is a communicator of one.
  std::unique_ptr<Comm> Split(int color, int key);

  // dst (size x bytes) = every rank's src, in rank order.
  void Allgather(const void* src, void* dst, size_t bytes);
  // dst's q-th block (bytes) = rank q's src block for this rank: every rank
  // sends its r-th block of src to rank r.
  void AllToAll(const void* src, void* dst, size_t bytes);
  void AllreduceSum(float* data, size_t count);
  void AllreduceMax(float* data, size_t count);
  double AllreduceSum(double v);
  bool AnyTrue(bool v);
  // Rank 0's string on every rank.
  std::string Broadcast(const std::string& s);
  // Every rank's `bytes` (of any length, each rank its own), in rank order,
  // on every rank.
  std::vector<std::string> AllgatherVariable(const std::string& bytes);
  // Whether every rank of this communicator runs on this host (the same
  // host name), so that their steady clocks are one clock.
  bool OneHost();

  // Point to point with rank `peer` of this communicator. Send is buffered
  // (MPI_Bsend's contract): the bytes are copied and the call returns once
  // the transfer is posted; FlushSends waits for every posted send. Two
  // ranks may thus send to each other before either receives. Messages
  // between two ranks with the same tag arrive in the order sent.
  void Send(const void* data, size_t bytes, int peer, int tag);
  void Recv(void* data, size_t bytes, int peer, int tag);
  void FlushSends();

  // Ends every rank of the job with `code` (MPI_Abort): a rank that fails
  // must not leave the others blocked in a collective. Single rank: exit.
  [[noreturn]] void Abort(int code);

  // A collective, receive or send that waits longer than `seconds` ends
  // the job (Abort(1)), naming this rank, the call and the Label of the
  // waiting thread: a peer that stopped (SIGSTOP, a hang, a lost node)
  // would otherwise hold every rank for good. 0: wait forever. Default
  // kDefaultTimeoutS, torch.distributed's default_pg_timeout (which
  // DeepSpeed's init_distributed passes on).
  static constexpr double kDefaultTimeoutS = 1800;
  static void SetTimeout(double seconds);
  // What the calling thread's collectives serve (a plan op), for that
  // message; the previous label is restored when it goes.
  class Label {
   public:
    explicit Label(std::string what);
    ~Label();
    Label(const Label&) = delete;
    Label& operator=(const Label&) = delete;

   private:
    std::string previous_;
  };

 private:
  Comm(void* handle, bool owned);
  struct Pending;
  void* handle_;  // the MPI_Comm
  bool owned_;
  int rank_ = 0, size_ = 1;
  std::vector<std::unique_ptr<Pending>> sends_;  // posted, not known complete
};

}  // namespace strata::exec
