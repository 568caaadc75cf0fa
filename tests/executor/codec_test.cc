// NVMe swap compression (policy.compression; docs/endurance.md
// "Compression"): the codecs give back every byte, the byte shuffle is its
// own inverse's input, and the swap codec's frames read back whole, in
// part and around gaps, on the in-memory Env.
#include "io/codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "io/swap_codec.h"
#include "strata/executor/env.h"

namespace strata::exec {
namespace {

// fp32 weights N(0, 0.02): what Strata swaps, compressible in its exponents.
std::vector<std::byte> Weights(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 0.02f);
  std::vector<float> w(n);
  for (float& x : w) x = d(rng);
  std::vector<std::byte> b(n * 4);
  std::memcpy(b.data(), w.data(), b.size());
  return b;
}

std::vector<CodecKind> BuiltIn() {
  std::vector<CodecKind> k;
  for (CodecKind c : {CodecKind::kLz4, CodecKind::kZstd})
    if (CodecBuiltIn(c)) k.push_back(c);
  return k;
}

TEST(Codec, ShuffleGroupsEachByteOfTheElements) {
  std::vector<std::byte> in(12), out(12), back(12);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::byte(i);
  Shuffle(in.data(), out.data(), 12, 4);
  // Elements 0,1,2 of 4 bytes: byte 0 of each, then byte 1 of each, ...
  const int want[] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(std::to_integer<int>(out[i]), want[i]) << i;
  Unshuffle(out.data(), back.data(), 12, 4);
  EXPECT_EQ(back, in);
  for (size_t e : {2, 3, 6}) {
    Shuffle(in.data(), out.data(), 12, e);
    Unshuffle(out.data(), back.data(), 12, e);
    EXPECT_EQ(back, in) << e;
  }
  // The vector path (16 elements at a time) against the definition, with
  // a tail of 7 elements.
  for (size_t e : {2, 4}) {
    const size_t count = 16 * 40 + 7, n = count * e;
    std::vector<std::byte> a(n), want(n), got(n), again(n);
    std::mt19937 rng(7);
    for (auto& x : a) x = std::byte(rng());
    for (size_t i = 0; i < count; ++i)
      for (size_t k = 0; k < e; ++k) want[k * count + i] = a[i * e + k];
    Shuffle(a.data(), got.data(), n, e);
    EXPECT_EQ(got, want) << e;
    Unshuffle(got.data(), again.data(), n, e);
    EXPECT_EQ(again, a) << e;
  }
}

TEST(Codec, EveryCodecGivesBackEveryByte) {
  if (BuiltIn().empty()) GTEST_SKIP() << "no codec library in this build";
  const auto data = Weights(50'001, 1);  // not a multiple of the frame or of 8
  for (CodecKind k : BuiltIn())
    for (int level : {0, 3})
      for (size_t element : {1, 2, 4}) {
        auto c = Codec::New(k, level);
        ASSERT_TRUE(c.ok()) << c.status().ToString();
        for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, data.size()}) {
          std::vector<std::byte> z((*c)->Bound(n)), back(n);
          auto size = (*c)->Compress({data.data(), n}, element, z);
          ASSERT_TRUE(size.ok()) << size.status().ToString();
          ASSERT_TRUE((*c)->Decompress({z.data(), *size}, element, back).ok());
          EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin())) << int(k) << " " << element << " " << n;
        }
      }
}

TEST(Codec, ShuffledFloatsCompressAndACorruptFrameIsAnError) {
  if (BuiltIn().empty()) GTEST_SKIP() << "no codec library in this build";
  const auto data = Weights(1 << 18, 2);
  for (CodecKind k : BuiltIn()) {
    auto c = Codec::New(k, 0).value();
    std::vector<std::byte> plain(c->Bound(data.size())), shuffled(plain.size());
    const size_t p = *c->Compress(data, 1, plain), s = *c->Compress(data, 4, shuffled);
    // The exponent bytes alike from element to element: the shuffle finds them.
    EXPECT_LT(s, p) << int(k);
    EXPECT_LT(s, data.size() * 95 / 100) << int(k);
    std::vector<std::byte> back(data.size());
    EXPECT_FALSE(c->Decompress({shuffled.data(), s / 2}, 4, back).ok()) << "a truncated frame";
    EXPECT_FALSE(c->Decompress({shuffled.data(), s}, 4, {back.data(), back.size() - 4}).ok()) << "a wrong size";
  }
}

TEST(Codec, LevelsOutsideTheCodecsAreRefused) {
  for (CodecKind k : BuiltIn()) EXPECT_FALSE(Codec::New(k, 99).ok());
  EXPECT_FALSE(Codec::New(CodecKind::kNone, 0).ok());
}

// Writes through the swap codec, then reads in every shape the plan could.
class SwapCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (BuiltIn().empty()) GTEST_SKIP() << "no codec library in this build";
    env_ = NewMemEnv();
    file_ = env_->CreateNewFile("/swap").value();
    ASSERT_TRUE(file_->Allocate(kBytes).ok());
    engine_ = NewSyncEngine();
    for (int t = 0; t < 3; ++t) codecs_.push_back(Codec::New(BuiltIn().back(), 0).value());
    swap_.SetElement(file_.get(), 4);
    std::vector<uint64_t> grid;  // frames end every 64 KiB (the plan's requests would)
    for (uint64_t at = kFrame; at < kBytes; at += kFrame) grid.push_back(at);
    swap_.SetCuts(file_.get(), grid);
  }
  Status Run(std::vector<IoRequest> io) {
    // One codec, then three threads: the same bytes either way.
    const auto codecs = std::span(codecs_).first(threads_);
    STRATA_ASSIGN_OR_RETURN(auto b, swap_.Prepare(codecs, io));
    const Status st = engine_->Run(b.io);
    STRATA_RETURN_IF_ERROR(swap_.Finish(codecs, b, st));
    return st;
  }
  static constexpr size_t kFrame = 64 << 10, kBytes = 1 << 20;
  std::unique_ptr<Env> env_;
  std::unique_ptr<File> file_;
  std::unique_ptr<IoEngine> engine_;
  std::vector<std::unique_ptr<Codec>> codecs_;
  size_t threads_ = 1;
  SwapCodec swap_;
};

TEST_F(SwapCodecTest, ReadsGiveBackWhatWasWrittenInAnyShape) {
  auto data = Weights(kBytes / 4, 3);
  threads_ = 3;  // frames compressed and decompressed on three threads
  // Two writes: [0, 300 KiB) and [400 KiB, 1 MiB), in frames to the cuts.
  auto* d = data.data();
  const size_t a = 300 << 10, b0 = 400 << 10;
  ASSERT_TRUE(Run({{IoRequest::Op::kWrite, file_.get(), 0, d, a},
                   {IoRequest::Op::kWrite, file_.get(), b0, d + b0, kBytes - b0}})
                  .ok());
  EXPECT_EQ(swap_.raw_written(), a + kBytes - b0);
  EXPECT_LT(swap_.stored_written(), swap_.raw_written());
  std::vector<std::byte> back(kBytes);
  // The whole file: frames, the gap of zeros between them, frames.
  ASSERT_TRUE(Run({{IoRequest::Op::kRead, file_.get(), 0, back.data(), kBytes}}).ok());
  EXPECT_EQ(0, std::memcmp(back.data(), d, a));
  EXPECT_EQ(std::vector<std::byte>(b0 - a), std::vector<std::byte>(back.begin() + a, back.begin() + b0));
  EXPECT_EQ(0, std::memcmp(back.data() + b0, d + b0, kBytes - b0));
  // Part of a frame, and a range across two frames' edges.
  for (auto [at, n] : {std::pair<size_t, size_t>{1000, 5000}, {60 << 10, 10 << 10}, {500 << 10, 7}}) {
    std::vector<std::byte> part(n);
    ASSERT_TRUE(Run({{IoRequest::Op::kRead, file_.get(), at, part.data(), n}}).ok());
    EXPECT_EQ(0, std::memcmp(part.data(), d + at, n)) << at;
  }
  // The files hold the compressed bytes: a raw read of the first frame differs.
  std::vector<std::byte> raw(kFrame);
  ASSERT_TRUE(file_->Read(0, raw).ok());
  EXPECT_NE(0, std::memcmp(raw.data(), d, kFrame));
}

TEST_F(SwapCodecTest, ARewriteReplacesItsFramesAndAPartialOneIsRefused) {
  auto one = Weights(kFrame * 2 / 4, 4), two = Weights(kFrame * 2 / 4, 5);
  ASSERT_TRUE(Run({{IoRequest::Op::kWrite, file_.get(), 0, one.data(), one.size()}}).ok());
  ASSERT_TRUE(Run({{IoRequest::Op::kWrite, file_.get(), 0, two.data(), two.size()}}).ok());
  std::vector<std::byte> back(two.size());
  ASSERT_TRUE(Run({{IoRequest::Op::kRead, file_.get(), 0, back.data(), back.size()}}).ok());
  EXPECT_EQ(back, two);
  // Half of the second frame: it could not be read back, so it is refused.
  const Status st = Run({{IoRequest::Op::kWrite, file_.get(), kFrame + kFrame / 2, one.data(), kFrame}});
  EXPECT_EQ(st.code(), Status::Code::kInternal) << st.ToString();
  EXPECT_NE(st.ToString().find("covers part of the compressed frame"), std::string::npos) << st.ToString();
}

// Windows bound a batch's bytes, splitting requests only at cuts.
TEST_F(SwapCodecTest, WindowsSplitAtCutsWithinTheLimit) {
  std::vector<std::byte> mem(kBytes);
  const IoRequest q{IoRequest::Op::kWrite, file_.get(), 1000, mem.data(), kBytes - 1000};
  const auto windows = swap_.Windows({&q, 1}, 200 << 10);
  uint64_t at = 1000;
  for (const auto& w : windows) {
    uint64_t bytes = 0;
    for (const IoRequest& p : w) {
      EXPECT_EQ(p.offset, at);
      EXPECT_EQ(static_cast<std::byte*>(p.buffer), mem.data() + (at - 1000));
      bytes += p.length, at += p.length;
    }
    EXPECT_LE(bytes, 200u << 10);
    if (at < kBytes) {
      EXPECT_EQ(at % kFrame, 0u) << "a split off the cuts";
    }
  }
  EXPECT_EQ(at, kBytes);
  EXPECT_GT(windows.size(), 4u);
}

TEST_F(SwapCodecTest, IncompressibleFramesGoAsTheyAre) {
  std::vector<std::byte> noise(kFrame);
  std::mt19937 rng(6);
  for (auto& x : noise) x = std::byte(rng());
  ASSERT_TRUE(Run({{IoRequest::Op::kWrite, file_.get(), 0, noise.data(), noise.size()}}).ok());
  EXPECT_EQ(swap_.stored_written(), kFrame);
  std::vector<std::byte> raw(kFrame), back(kFrame);
  ASSERT_TRUE(file_->Read(0, raw).ok());
  EXPECT_EQ(raw, noise);
  ASSERT_TRUE(Run({{IoRequest::Op::kRead, file_.get(), 0, back.data(), back.size()}}).ok());
  EXPECT_EQ(back, noise);
}

}  // namespace
}  // namespace strata::exec
