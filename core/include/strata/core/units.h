// Strong types for the quantities Strata plans with, and their text forms.
//
// Bytes and Elements are distinct integer types so a byte count can never be
// passed where an element count is expected (llm.c's zero.cuh bug). Rates and
// FLOPs are doubles with named types. Parsing accepts what users write in
// scenarios: plain numbers ("1e8", 1048576) or numbers with SI (k, M, G, T, P:
// powers of 1000) or IEC (Ki, Mi, Gi, Ti, Pi: powers of 1024) prefixes and a
// unit ("32GiB", "28TB", "900GB/s", "125TFLOPS").
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "strata/core/status.h"

namespace strata {

// A byte count. Signed so that differences ("over by") are natural.
struct Bytes {
  int64_t v = 0;
  constexpr Bytes() = default;
  constexpr explicit Bytes(int64_t n) : v(n) {}
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes& operator+=(Bytes o) {
    v += o.v;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    v -= o.v;
    return *this;
  }
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes(a.v + b.v); }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return Bytes(a.v - b.v); }
  friend constexpr Bytes operator*(Bytes a, int64_t k) { return Bytes(a.v * k); }
  friend constexpr Bytes operator*(int64_t k, Bytes a) { return Bytes(a.v * k); }
};

// A count of tensor elements (parameters, gradient entries, ...).
struct Elements {
  int64_t v = 0;
  constexpr Elements() = default;
  constexpr explicit Elements(int64_t n) : v(n) {}
  constexpr auto operator<=>(const Elements&) const = default;
  constexpr Elements& operator+=(Elements o) {
    v += o.v;
    return *this;
  }
  friend constexpr Elements operator+(Elements a, Elements b) { return Elements(a.v + b.v); }
  friend constexpr Elements operator-(Elements a, Elements b) { return Elements(a.v - b.v); }
  // Bytes of `n` elements of `bytes_per_element` each.
  constexpr Bytes bytes(int64_t bytes_per_element) const { return Bytes(v * bytes_per_element); }
};

// Bytes per second.
struct Bandwidth {
  double bytes_per_s = 0;
  constexpr auto operator<=>(const Bandwidth&) const = default;
};

// A duration in seconds.
struct Seconds {
  double v = 0;
  constexpr auto operator<=>(const Seconds&) const = default;
};

// Floating-point operations per second.
struct FlopRate {
  double flops_per_s = 0;
  constexpr auto operator<=>(const FlopRate&) const = default;
};

constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Checked 64-bit arithmetic for sizes and counts (__builtin_*_overflow):
// nullopt where the exact result does not fit, never a wrap.
constexpr std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
constexpr std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// A non-negative double as a count, if it fits in int64 (a cast of one
// that does not is undefined behaviour).
constexpr std::optional<int64_t> CheckedCount(double x) {
  if (!(x >= 0) || x >= 9223372036854775808.0) return std::nullopt;  // 2^63; NaN fails the first test
  return static_cast<int64_t>(x);
}

// A computation of many sizes that keeps going after an overflow (with 0)
// and remembers the first, by name: status() is then InvalidArgument
// "<what> overflows a 64-bit count (<a> x <b>)".
class SizeMath {
 public:
  int64_t Mul(int64_t a, int64_t b, std::string_view what);
  int64_t Add(int64_t a, int64_t b, std::string_view what);
  int64_t Count(double x, std::string_view what);
  const Status& status() const { return status_; }

 private:
  int64_t Fail(std::string_view what, const std::string& how);
  Status status_;
};

// Parsers. Each returns InvalidArgument with a message that names the
// offending text and what was expected; callers add the location.
Result<Bytes> ParseBytes(std::string_view text);          // "32GiB", "28TB", "1e9", 4096
Result<Bandwidth> ParseBandwidth(std::string_view text);  // "900GB/s", "16e9"
Result<FlopRate> ParseFlopRate(std::string_view text);    // "125TFLOPS", "125TFLOP/s", "1.25e14"
Result<Elements> ParseElements(std::string_view text);
Result<Seconds> ParseSeconds(
    std::string_view text);  // "100us", "2ms", "1.5s", "1e-4"    // "1e8", "5e7", "100M", 1000000000
// A plain number with an optional SI/IEC prefix and no unit ("1e9", "2k").
Result<double> ParseScaledNumber(std::string_view text);

// Human-readable forms: binary prefixes for sizes ("31.99 GiB"), decimal for
// rates ("900 GB/s", "125 TFLOPS"), seconds with an adaptive unit.
std::string FormatBytes(Bytes b);
// A duration for people: 4 significant digits in s, ms, µs or ns ("24.24 µs").
std::string FormatDuration(double seconds);
std::string FormatBandwidth(Bandwidth bw);
std::string FormatFlopRate(FlopRate r);
std::string FormatCount(double n);  // "7.5e9" -> "7.50 G"

}  // namespace strata
