// The requests an NVMe write op makes (the executor's, the wear model's and
// the simulator's one account of them). Each move is cut into
// aio.block_size requests from its start, as DeepSpeed's aio handle cuts a
// tensor. A coalesced op (Op::coalesce, policy.write_buffer) first joins
// its moves whose destinations meet in one buffer into runs, and cuts each
// run: a request whose bytes come from more than one move is gathered
// through pinned memory first (the write buffer), the others go straight
// from their move's source.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "strata/plan/plan.h"

namespace strata {

// A request's bytes from one move: `bytes` of move `move` (an index into
// op.moves), starting `offset` bytes into its regions.
struct WritePiece {
  int move = 0;
  int64_t offset = 0;
  int64_t bytes = 0;
};

// Calls `fn` with each request `op` (an NVMe write) makes on data-parallel
// rank `drank` (moves naming another rank make none): its destination, in
// the buffer of the moves it writes, and its pieces in destination order.
// `block` <= 0: a request per move (per run when coalesced).
void ForEachWriteRequest(const Op& op, int drank, int64_t block,
                         const std::function<void(const Region& dst, std::span<const WritePiece> pieces)>& fn);

struct WriteCount {
  int64_t requests = 0;
  int64_t bytes = 0;
  int64_t staged_bytes = 0;  // in requests of several pieces
  double stored_bytes = 0;   // bytes x Op::stored: what the drive is sent
  double weighted = 0;       // the sum over requests of stored x weight(stored)
};
// The requests of ForEachWriteRequest, counted; `coalesced` false counts
// them as if the op were not coalesced (a move each). `weight`, if given,
// weighs each request by its size (the wear model's write amplification).
WriteCount CountWrites(const Op& op, int drank, int64_t block, bool coalesced,
                       double (*weight)(double bytes) = nullptr);

// CountWrites of every NVMe write `rank` (a rank of the world) runs, its
// pipeline stage's, summed: as planned, or `unbuffered` a move at a time.
WriteCount PlanWrites(const Plan& plan, int rank, bool unbuffered = false, double (*weight)(double bytes) = nullptr);

// Striping (RunSpec::striped): bytes [offset, offset + bytes) of a buffer
// whose unit k (of `unit` bytes) lies on drive (start + k) mod `drives`,
// at unit k / drives of that drive's file: fn(drive, file offset, offset,
// n) for each piece, in order.
void ForEachStripe(int64_t offset, int64_t bytes, int64_t unit, int start, int drives,
                   const std::function<void(int drive, int64_t file_offset, int64_t offset, int64_t n)>& fn);
// Adds weight x the bytes of [offset, offset + bytes) each drive holds to
// per_drive (its size: the drives), in O(drives) whatever the length.
void AddStripeBytes(int64_t offset, int64_t bytes, int64_t unit, int start, std::vector<double>& per_drive,
                    double weight);
// The size of `drive`'s file of a striped buffer of `bytes`.
int64_t StripeFileBytes(int64_t bytes, int64_t unit, int start, int drives, int drive);
// The bytes `rank`'s NVMe writes send to each of RunSpec::nvme_dirs in an
// iteration, as compressed (Op::stored) and raw: by the stripes when
// striped, else each buffer's to its directory.
struct DirBytes {
  std::vector<double> stored, raw;  // per directory
};
DirBytes DirWrites(const Plan& plan, int rank);

// Compression (RunSpec::compression): the element size NVMe buffer `b`'s
// bytes are shuffled and compressed as (16-bit parameters: the plan's
// precision; optimizer state and gradients: fp32).
int SwapElementBytes(const Plan& plan, BufferId b);
// The planned stored / raw bytes of NVMe op `op`'s moves (Op::stored):
// each move's PlannedRatio by its NVMe buffer's elements, weighted by bytes.
double PlannedStored(const Plan& plan, const Op& op);

}  // namespace strata
