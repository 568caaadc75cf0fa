#include "strata/core/units.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace strata {
namespace {

TEST(Units, CheckedArithmeticRefusesWhatDoesNotFit) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(CheckedMul(3'000'000'000, 3'000'000'000), 9'000'000'000'000'000'000);
  EXPECT_FALSE(CheckedMul(3'000'000'000, 4'000'000'000));
  EXPECT_FALSE(CheckedMul(-kMax, 2));
  EXPECT_EQ(CheckedAdd(kMax - 1, 1), kMax);
  EXPECT_FALSE(CheckedAdd(kMax, 1));
  EXPECT_EQ(CheckedCount(1e18), 1'000'000'000'000'000'000);
  EXPECT_FALSE(CheckedCount(9.3e18));
  EXPECT_FALSE(CheckedCount(-1));
  EXPECT_FALSE(CheckedCount(std::nan("")));
  SizeMath m;
  EXPECT_EQ(m.Mul(6, 7, "six sevens"), 42);
  EXPECT_TRUE(m.status().ok());
  EXPECT_EQ(m.Add(kMax, 1, "the total"), 0);  // keeps going with 0
  EXPECT_EQ(m.Mul(kMax, 2, "a later one"), 0);
  EXPECT_EQ(
      m.status().message(),
      "the total overflows a 64-bit count (9223372036854775807 + 1): a size or count in the scenario is far too large");
}

TEST(Units, ParsesSizesWithSiAndIecPrefixes) {
  EXPECT_EQ(ParseBytes("32GiB")->v, 32LL << 30);
  EXPECT_EQ(ParseBytes("28TB")->v, 28'000'000'000'000LL);
  EXPECT_EQ(ParseBytes("1.5TiB")->v, 3LL << 39);
  EXPECT_EQ(ParseBytes("1e9")->v, 1'000'000'000LL);
  EXPECT_EQ(ParseBytes("4096")->v, 4096);
  EXPECT_EQ(ParseBytes("64 MiB")->v, 64LL << 20);
  EXPECT_EQ(ParseBytes("512B")->v, 512);
}

TEST(Units, ParsesRatesAndFlops) {
  EXPECT_DOUBLE_EQ(ParseBandwidth("900GB/s")->bytes_per_s, 900e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("16GB/s")->bytes_per_s, 16e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("25e9")->bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(ParseFlopRate("125TFLOPS")->flops_per_s, 125e12);
  EXPECT_DOUBLE_EQ(ParseFlopRate("312 TFLOP/s")->flops_per_s, 312e12);
  EXPECT_EQ(ParseElements("1e8")->v, 100'000'000);
  EXPECT_EQ(ParseElements("5e7")->v, 50'000'000);
  EXPECT_EQ(ParseElements("100M")->v, 100'000'000);
}

TEST(Units, ParsesDurations) {
  EXPECT_DOUBLE_EQ(ParseSeconds("100us")->v, 100e-6);
  EXPECT_DOUBLE_EQ(ParseSeconds("2ms")->v, 2e-3);
  EXPECT_DOUBLE_EQ(ParseSeconds("1.5s")->v, 1.5);
  EXPECT_DOUBLE_EQ(ParseSeconds("1e-4")->v, 1e-4);
  EXPECT_DOUBLE_EQ(ParseSeconds("0")->v, 0);
  EXPECT_FALSE(ParseSeconds("-1ms").ok());
  EXPECT_FALSE(ParseSeconds("3GB").ok());
  EXPECT_FALSE(ParseSeconds("5 fortnights").ok());
}

TEST(Units, RejectsWrongUnitsAndGarbage) {
  EXPECT_FALSE(ParseBytes("32GB/s").ok());
  EXPECT_FALSE(ParseBytes("lots").ok());
  EXPECT_FALSE(ParseBytes("-1GiB").ok());
  EXPECT_FALSE(ParseBandwidth("16GiB").ok());
  EXPECT_FALSE(ParseFlopRate("125TB").ok());
  EXPECT_FALSE(ParseElements("1e8B").ok());
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_NE(ParseBytes("12 parsecs").status().message().find("12 parsecs"), std::string::npos);
}

TEST(Units, NegativeRatesParseSoTheCheckerCanNameTheKey) {
  // Negative bandwidths are rejected by CheckScenario with the key's location.
  EXPECT_DOUBLE_EQ(ParseBandwidth("-16GB/s")->bytes_per_s, -16e9);
}

TEST(Units, Formats) {
  EXPECT_EQ(FormatBytes(Bytes(512)), "512 B");
  EXPECT_EQ(FormatBytes(Bytes(32LL << 30)), "32.00 GiB");
  EXPECT_EQ(FormatBandwidth(Bandwidth{900e9}), "900.00 GB/s");
  EXPECT_EQ(FormatFlopRate(FlopRate{125e12}), "125.00 TFLOPS");
}

TEST(Units, StrongTypesDoNotMix) {
  static_assert(!std::is_convertible_v<Bytes, Elements>);
  static_assert(!std::is_convertible_v<Elements, Bytes>);
  static_assert(!std::is_convertible_v<int64_t, Bytes>);
  EXPECT_EQ(Elements(10).bytes(2), Bytes(20));
}

}  // namespace
}  // namespace strata
