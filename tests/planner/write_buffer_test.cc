// Write buffering (policy.write_buffer; docs/endurance.md): how an NVMe
// write's requests are cut (plan/write_requests.h), and the planner's
// merging of small writes into their neighbours.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "strata/config/scenario_loader.h"
#include "strata/core/codec_profile.h"
#include "strata/cost/bound.h"
#include "strata/cost/endurance.h"
#include "strata/cost/op_cost.h"
#include "strata/plan/validator.h"
#include "strata/plan/write_requests.h"
#include "strata/planner/planner.h"
#include "test_paths.h"

namespace strata {
namespace {

Move M(BufferId src, int64_t src_off, BufferId dst, int64_t dst_off, int64_t bytes) {
  return Move{{src, Bytes(src_off), Bytes(bytes)}, {dst, Bytes(dst_off), Bytes(bytes)}};
}

struct Seen {
  int64_t offset, bytes;
  std::vector<std::vector<int64_t>> pieces;  // move, offset, bytes
};

std::vector<Seen> Requests(const Op& op, int64_t block) {
  std::vector<Seen> out;
  ForEachWriteRequest(op, 0, block, [&](const Region& dst, std::span<const WritePiece> pieces) {
    Seen s{dst.offset.v, dst.bytes.v, {}};
    for (const WritePiece& w : pieces) s.pieces.push_back({w.move, w.offset, w.bytes});
    out.push_back(s);
  });
  return out;
}

// Three moves into one buffer, back to back out of order (6, 2 and 3 KiB at
// 2, 0 and 8 KiB), and one into another buffer, in 4 KiB blocks.
TEST(WriteRequests, CoalescedRunsAreCutFromTheirStartWithTheRemainderInTheLast) {
  constexpr int64_t K = 1024;
  Op op;
  op.kind = OpKind::kNvmeWrite;
  op.moves = {M(1, 0, 9, 2 * K, 6 * K), M(2, 0, 9, 0, 2 * K), M(3, 0, 9, 8 * K, 3 * K), M(4, 0, 8, 0, 5 * K)};
  // Unbuffered: each move on its own, cut at 4 KiB from its start.
  std::vector<Seen> plain = Requests(op, 4 * K);
  ASSERT_EQ(plain.size(), 6u);  // 2 + 1 + 1 + 2
  EXPECT_EQ(plain[0].offset, 2 * K);
  EXPECT_EQ(plain[0].bytes, 4 * K);
  EXPECT_EQ(plain[1].bytes, 2 * K);
  WriteCount c = CountWrites(op, 0, 4 * K, false);
  EXPECT_EQ(c.requests, 6);
  EXPECT_EQ(c.bytes, 16 * K);
  EXPECT_EQ(c.staged_bytes, 0);
  // Coalesced: buffer 8's 5 KiB is one request (the remainder joins it);
  // buffer 9's 11 KiB run [2 K of move 1, 6 K of move 0, 3 K of move 2] is
  // 4 KiB, then 7 KiB holding the rest.
  op.coalesce = true;
  std::vector<Seen> runs = Requests(op, 4 * K);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].offset, 0);
  EXPECT_EQ(runs[0].bytes, 5 * K);
  EXPECT_EQ(runs[0].pieces, (std::vector<std::vector<int64_t>>{{3, 0, 5 * K}}));
  EXPECT_EQ(runs[1].offset, 0);
  EXPECT_EQ(runs[1].bytes, 4 * K);
  EXPECT_EQ(runs[1].pieces, (std::vector<std::vector<int64_t>>{{1, 0, 2 * K}, {0, 0, 2 * K}}));
  EXPECT_EQ(runs[2].offset, 4 * K);
  EXPECT_EQ(runs[2].bytes, 7 * K);
  EXPECT_EQ(runs[2].pieces, (std::vector<std::vector<int64_t>>{{0, 2 * K, 4 * K}, {2, 0, 3 * K}}));
  c = CountWrites(op, 0, 4 * K, true);
  EXPECT_EQ(c.requests, 3);
  EXPECT_EQ(c.bytes, 16 * K);
  EXPECT_EQ(c.staged_bytes, 11 * K);  // both of buffer 9's requests take two moves
  // Weighted by size: what the wear model amplifies each request by.
  c = CountWrites(op, 0, 4 * K, true, [](double b) { return b; });
  EXPECT_DOUBLE_EQ(c.weighted, 25.0 * K * K + 16.0 * K * K + 49.0 * K * K);
  // A move naming another rank writes nothing on this one.
  op.moves[3].rank = 1;
  EXPECT_EQ(CountWrites(op, 0, 4 * K, true).requests, 2);
}

// Llama-2-13B under ZeRO-Infinity writes each LayerNorm's 24 KiB fp32
// gradient on its own; buffered, each joins the next gradient write, whose
// region it meets, and adds no request. Same bytes, valid plan.
TEST(WriteBuffer, SmallGradientWritesJoinTheirNeighbours) {
  auto s = config::LoadScenarioFile(std::string(testing::SourceDir()) + "/scenarios/studies/llama2-13b-a100.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto plain = BuildPlan(*s);
  s->policy.write_buffer = Bytes(1 << 20);
  auto buffered = BuildPlan(*s);
  ASSERT_TRUE(plain.ok() && buffered.ok());
  auto tally = [](const Plan& p, bool coalesced) {
    WriteCount t;
    int ops = 0, small = 0;
    for (const Op& op : p.ops) {
      if (op.kind != OpKind::kNvmeWrite) continue;
      EXPECT_EQ(op.coalesce, coalesced);
      const WriteCount c = CountWrites(op, 0, p.run.aio.block_size.v, op.coalesce);
      t.requests += c.requests, t.bytes += c.bytes, ++ops;
      small += op.moves.size() == 1 && op.moves[0].dst.bytes.v < (1 << 20);
    }
    return std::tuple{t, ops, small};
  };
  const auto [before, ops_before, small_before] = tally(*plain, false);
  const auto [after, ops_after, small_after] = tally(*buffered, true);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(small_before, 81);  // the LayerNorms' and the final norm's
  EXPECT_EQ(small_after, 0);
  EXPECT_EQ(ops_after, ops_before - 81);
  EXPECT_LT(after.requests, before.requests);
  EXPECT_EQ(buffered->ops.size(), plain->ops.size() - 81);
  for (size_t i = 0; i < buffered->ops.size(); ++i) ASSERT_EQ(buffered->ops[i].id, static_cast<OpId>(i));
  EXPECT_TRUE(ValidatePlan(*buffered).ok());
  // The wear model counts the buffered requests, and says how many the
  // same bytes would be unbuffered.
  const DriveWear w = NvmeWear(*buffered, s->hardware.nvme, 0);
  EXPECT_EQ(w.writes, after.requests);
  EXPECT_EQ(w.unbuffered_writes, before.requests);
}

// Compression (policy.compression): every NVMe op carries its planned
// stored ratio, by its buffers' elements (the profile's, or the scenario's
// ratio), and the drive's bytes in the wear model shrink by it; the codec's
// time and the smaller bytes reach the resource bound.
TEST(Compression, EachNvmeOpCarriesItsStoredRatio) {
  auto s = config::LoadScenarioFile(std::string(testing::SourceDir()) + "/scenarios/studies/llama2-13b-a100.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto plain = BuildPlan(*s);
  s->policy.compression.codec = CodecKind::kZstd;
  auto profile = BuildPlan(*s);
  s->policy.compression.ratio = 0.5;
  auto half = BuildPlan(*s);
  ASSERT_TRUE(plain.ok() && profile.ok() && half.ok());
  EXPECT_TRUE(ValidatePlan(*half).ok());
  EXPECT_EQ(half->run.compression, s->policy.compression);
  int nvme = 0;
  for (size_t i = 0; i < half->ops.size(); ++i) {
    const Op& op = half->ops[i];
    EXPECT_EQ(plain->ops[i].stored, 1);
    if (op.kind != OpKind::kNvmeRead && op.kind != OpKind::kNvmeWrite) {
      EXPECT_EQ(op.stored, 1) << op.name;
      continue;
    }
    ++nvme;
    EXPECT_DOUBLE_EQ(op.stored, 0.5) << op.name;
    // The profile's: fp32 state at its fp32 ratio, 16-bit parameters at theirs.
    const CodecProfile& p = ProfileOf(CodecKind::kZstd);
    const double lo = std::min(p.ratio_fp32, p.ratio_16), hi = std::max(p.ratio_fp32, p.ratio_16);
    EXPECT_GE(profile->ops[i].stored, lo - 1e-12) << op.name;
    EXPECT_LE(profile->ops[i].stored, hi + 1e-12) << op.name;
  }
  EXPECT_GT(nvme, 100);
  const DriveWear before = NvmeWear(*plain, s->hardware.nvme, 0), after = NvmeWear(*half, s->hardware.nvme, 0);
  EXPECT_DOUBLE_EQ(after.host_bytes, before.host_bytes / 2);
  EXPECT_DOUBLE_EQ(after.raw_bytes, before.host_bytes);
  EXPECT_EQ(after.writes, before.writes);
  EXPECT_NE(WearText(after).find("compressed from"), std::string::npos) << WearText(after);
  // The bound: the NVMe streams move half the bytes, plus the codec's time
  // over all of them, split over the compression threads. One thread (1 GB/s)
  // is slower than the drives; 32 are not.
  auto seconds = [&](const Plan& p, const char* r) {
    for (const ResourceTime& t : ComputeResourceBound(p, s->hardware).resources)
      if (t.resource == r) return t.seconds;
    return -1.0;
  };
  double codec = 0, lat = 0;  // each write's latency: the same in both
  for (const Op& op : half->ops)
    if (op.kind == OpKind::kNvmeWrite) codec += CodecSeconds(*half, op, 0), lat += s->hardware.nvme.latency.v;
  const double wr = seconds(*plain, "nvme_write");
  EXPECT_NEAR(seconds(*half, "nvme_write"), (wr - lat) / 2 + lat + codec, 1e-6 * wr);
  EXPECT_GT(seconds(*half, "nvme_write"), wr);
  s->policy.compression.threads = 32;
  auto threaded = BuildPlan(*s);
  ASSERT_TRUE(threaded.ok());
  EXPECT_LT(seconds(*threaded, "nvme_write"), wr);
}

// Striping (policy.stripe_paths): the unit arithmetic by hand, and the
// planner's placement of each file's first unit.
TEST(Striping, UnitsLandOnTheirDrivesAndParts) {
  // 10 units of 4 over 3 drives from drive 2: units 0..9 on drives
  // 2,0,1,2,0,1,2,0,1,2; bytes [6, 15) are unit 1 from byte 2 (drive 0,
  // its unit 0), unit 2 (drive 1, its unit 0), unit 3 to byte 3 (drive 2,
  // its unit 1).
  std::vector<std::vector<int64_t>> got;
  ForEachStripe(6, 9, 4, 2, 3, [&](int d, int64_t at, int64_t offset, int64_t n) {
    got.push_back({d, at, offset, n});
  });
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{0, 2, 6, 2}, {1, 0, 8, 4}, {2, 4, 12, 3}}));
  // 38 bytes: drive 2 holds units 0, 3, 6, 9 (the last 2 bytes long).
  EXPECT_EQ(StripeFileBytes(38, 4, 2, 3, 2), 3 * 4 + 2);
  EXPECT_EQ(StripeFileBytes(38, 4, 2, 3, 0), 3 * 4);
  EXPECT_EQ(StripeFileBytes(38, 4, 2, 3, 1), 3 * 4);
  EXPECT_EQ(StripeFileBytes(3, 4, 2, 3, 0), 0);
  // AddStripeBytes (whole rounds at once) gives ForEachStripe's sums.
  for (int64_t offset : {0, 3, 4, 17})
    for (int64_t bytes : {0, 1, 4, 5, 11, 12, 40, 41})
      for (int start : {0, 2}) {
        std::vector<double> quick(3, 0.0), slow(3, 0.0);
        AddStripeBytes(offset, bytes, 4, start, quick, 0.5);
        ForEachStripe(offset, bytes, 4, start, 3, [&](int d, int64_t, int64_t, int64_t n) { slow[d] += n * 0.5; });
        EXPECT_EQ(quick, slow) << offset << " " << bytes << " " << start;
      }
}

TEST(Striping, FirstUnitsBalanceTheDrives) {
  auto s = config::LoadScenarioFile(std::string(testing::SourceDir()) + "/scenarios/studies/llama2-13b-a100.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto plain = BuildPlan(*s);
  s->policy.stripe_paths = {"/mnt/nvme0", "/mnt/nvme1", "/mnt/nvme2"};
  s->hardware.nvme.drives = 3;
  auto striped = BuildPlan(*s);
  ASSERT_TRUE(plain.ok() && striped.ok()) << striped.status().message();
  EXPECT_TRUE(striped->run.striped);
  EXPECT_EQ(striped->run.nvme_dirs, s->policy.stripe_paths);
  EXPECT_TRUE(ValidatePlan(*striped).ok());
  const std::vector<double> dirs = DirWrites(*striped, 0).stored;
  ASSERT_EQ(dirs.size(), 3u);
  double total = 0;
  for (double d : dirs) total += d;
  EXPECT_DOUBLE_EQ(total, static_cast<double>(PlanWrites(*plain, 0).bytes));
  // Every drive within one unit per file of the mean.
  int files = 0;
  for (const Buffer& b : striped->buffers) files += b.tier == Tier::kNvme;
  for (double d : dirs) EXPECT_NEAR(d, total / 3, files * static_cast<double>(striped->run.aio.block_size.v)) << d;
  // The wear model reports the busiest drive.
  const DriveWear w = NvmeWear(*striped, s->hardware.nvme, 0);
  EXPECT_DOUBLE_EQ(w.host_bytes, *std::max_element(dirs.begin(), dirs.end()));
  EXPECT_NEAR(w.mean_host_bytes, total / 3, 1);
  EXPECT_NE(WearText(w).find("busiest of 3 striped drives"), std::string::npos) << WearText(w);
}

}  // namespace
}  // namespace strata
