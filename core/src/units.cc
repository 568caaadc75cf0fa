#include "strata/core/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace strata {
namespace {

struct Split {
  double number = 0;
  double scale = 1;  // prefix multiplier
  std::string unit;  // what follows the prefix, e.g. "B", "B/s", "FLOPS"
};

// Splits "<number>[ ]<prefix><unit>" into its parts. The prefix is only taken
// when something it can prefix follows, or when it ends the text ("100M").
Result<Split> SplitQuantity(std::string_view text) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  s = s.substr(start);
  if (s.empty()) return Status::InvalidArgument("empty value");
  const char* begin = s.c_str();
  char* end = nullptr;
  double number = std::strtod(begin, &end);
  if (end == begin) return Status::InvalidArgument("'" + s + "' is not a number");
  if (!std::isfinite(number)) return Status::InvalidArgument("'" + s + "' is not finite");
  std::string rest(end);
  while (!rest.empty() && rest.front() == ' ') rest.erase(rest.begin());
  Split out;
  out.number = number;
  if (rest.empty()) return out;
  static const struct {
    const char* p;
    double scale;
  } kPrefixes[] = {{"Ki", 1024.0},
                   {"Mi", 1048576.0},
                   {"Gi", 1073741824.0},
                   {"Ti", 1099511627776.0},
                   {"Pi", 1125899906842624.0},
                   {"k", 1e3},
                   {"K", 1e3},
                   {"M", 1e6},
                   {"G", 1e9},
                   {"T", 1e12},
                   {"P", 1e15}};
  for (const auto& p : kPrefixes) {
    std::string_view pv(p.p);
    if (rest.compare(0, pv.size(), pv) == 0) {
      out.scale = p.scale;
      rest = rest.substr(pv.size());
      break;
    }
  }
  out.unit = rest;
  return out;
}

template <typename T>
Result<T> Fail(std::string_view text, const char* expected) {
  return Status::InvalidArgument("'" + std::string(text) + "' is not " + expected);
}

}  // namespace

Result<double> ParseScaledNumber(std::string_view text) {
  STRATA_ASSIGN_OR_RETURN(auto sp, SplitQuantity(text));
  if (!sp.unit.empty()) return Fail<double>(text, "a number (optionally with a k/M/G/T or Ki/Mi/Gi prefix)");
  return sp.number * sp.scale;
}

Result<Bytes> ParseBytes(std::string_view text) {
  STRATA_ASSIGN_OR_RETURN(auto sp, SplitQuantity(text));
  if (!sp.unit.empty() && sp.unit != "B") return Fail<Bytes>(text, "a size (e.g. 32GiB, 28TB, 1e9)");
  double v = sp.number * sp.scale;
  if (v < 0) return Status::InvalidArgument("size '" + std::string(text) + "' is negative");
  if (v > 9.2e18) return Status::InvalidArgument("size '" + std::string(text) + "' is too large");
  return Bytes(static_cast<int64_t>(std::llround(v)));
}

Result<Bandwidth> ParseBandwidth(std::string_view text) {
  STRATA_ASSIGN_OR_RETURN(auto sp, SplitQuantity(text));
  if (!sp.unit.empty() && sp.unit != "B/s" && sp.unit != "Bps")
    return Fail<Bandwidth>(text, "a bandwidth (e.g. 16GB/s, 900GB/s, 25e9)");
  return Bandwidth{sp.number * sp.scale};
}

Result<FlopRate> ParseFlopRate(std::string_view text) {
  STRATA_ASSIGN_OR_RETURN(auto sp, SplitQuantity(text));
  if (!sp.unit.empty() && sp.unit != "FLOPS" && sp.unit != "FLOP/s" && sp.unit != "flops")
    return Fail<FlopRate>(text, "a FLOP rate (e.g. 125TFLOPS, 1.25e14)");
  return FlopRate{sp.number * sp.scale};
}

Result<Elements> ParseElements(std::string_view text) {
  auto v = ParseScaledNumber(text);
  if (!v.ok()) return Fail<Elements>(text, "an element count (e.g. 1e8, 5e7, 100M)");
  if (*v < 0) return Status::InvalidArgument("count '" + std::string(text) + "' is negative");
  if (*v > 9.2e18) return Status::InvalidArgument("count '" + std::string(text) + "' is too large");
  return Elements(static_cast<int64_t>(std::llround(*v)));
}

Result<Seconds> ParseSeconds(std::string_view text) {
  STRATA_ASSIGN_OR_RETURN(auto sp, SplitQuantity(text));
  double scale = 0;
  if (sp.scale == 1) {
    if (sp.unit.empty() || sp.unit == "s")
      scale = 1;
    else if (sp.unit == "ms")
      scale = 1e-3;
    else if (sp.unit == "us")
      scale = 1e-6;
    else if (sp.unit == "ns")
      scale = 1e-9;
  }
  if (scale == 0) return Fail<Seconds>(text, "a duration (e.g. 100us, 2ms, 1.5s, 1e-4)");
  if (sp.number < 0) return Status::InvalidArgument("duration '" + std::string(text) + "' is negative");
  return Seconds{sp.number * scale};
}

static std::string Fmt(double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, unit);
  return buf;
}

std::string FormatDuration(double seconds) {
  if (seconds == 0) return "0 s";
  const double a = std::fabs(seconds);
  char buf[64];
  if (a >= 1)
    std::snprintf(buf, sizeof buf, "%.4g s", seconds);
  else if (a >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.4g ms", seconds * 1e3);
  else if (a >= 1e-6)
    std::snprintf(buf, sizeof buf, "%.4g \xC2\xB5s", seconds * 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.4g ns", seconds * 1e9);
  return buf;
}

std::string FormatBytes(Bytes b) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(b.v);
  int i = 0;
  while (std::fabs(v) >= 1024.0 && i < 6) {
    v /= 1024.0;
    ++i;
  }
  if (i == 0) return std::to_string(b.v) + " B";
  return Fmt(v, kUnits[i]);
}

static std::string FormatDecimal(double v, const char* const* units) {
  int i = 0;
  while (std::fabs(v) >= 1000.0 && i < 5) {
    v /= 1000.0;
    ++i;
  }
  return Fmt(v, units[i]);
}

std::string FormatBandwidth(Bandwidth bw) {
  static const char* kUnits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
  return FormatDecimal(bw.bytes_per_s, kUnits);
}

std::string FormatFlopRate(FlopRate r) {
  static const char* kUnits[] = {"FLOPS", "kFLOPS", "MFLOPS", "GFLOPS", "TFLOPS", "PFLOPS"};
  return FormatDecimal(r.flops_per_s, kUnits);
}

std::string FormatCount(double n) {
  static const char* kUnits[] = {"", "k", "M", "G", "T", "P"};
  return FormatDecimal(n, kUnits);
}

}  // namespace strata

namespace strata {

int64_t SizeMath::Fail(std::string_view what, const std::string& how) {
  if (status_.ok())
    status_ = Status::InvalidArgument(std::string(what) + " overflows a 64-bit count (" + how +
                                      "): a size or count in the scenario is far too large");
  return 0;
}

int64_t SizeMath::Mul(int64_t a, int64_t b, std::string_view what) {
  if (auto r = CheckedMul(a, b)) return *r;
  return Fail(what, std::to_string(a) + " x " + std::to_string(b));
}

int64_t SizeMath::Add(int64_t a, int64_t b, std::string_view what) {
  if (auto r = CheckedAdd(a, b)) return *r;
  return Fail(what, std::to_string(a) + " + " + std::to_string(b));
}

int64_t SizeMath::Count(double x, std::string_view what) {
  if (auto r = CheckedCount(x)) return *r;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return Fail(what, buf);
}

}  // namespace strata
