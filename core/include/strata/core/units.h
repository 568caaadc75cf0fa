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
  constexpr Bytes& operator+=(Bytes o) { v += o.v; return *this; }
  constexpr Bytes& operator-=(Bytes o) { v -= o.v; return *this; }
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
  constexpr Elements& operator+=(Elements o) { v += o.v; return *this; }
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

// Parsers. Each returns InvalidArgument with a message that names the
// offending text and what was expected; callers add the location.
Result<Bytes> ParseBytes(std::string_view text);          // "32GiB", "28TB", "1e9", 4096
Result<Bandwidth> ParseBandwidth(std::string_view text);  // "900GB/s", "16e9"
Result<FlopRate> ParseFlopRate(std::string_view text);    // "125TFLOPS", "125TFLOP/s", "1.25e14"
Result<Elements> ParseElements(std::string_view text);
Result<Seconds> ParseSeconds(std::string_view text);      // "100us", "2ms", "1.5s", "1e-4"    // "1e8", "5e7", "100M", 1000000000
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
