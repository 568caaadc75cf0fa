// NVMe swap compression (policy.compression; docs/endurance.md
// "Compression"): each codec at its levels, with and without the byte
// shuffle, on the data Strata swaps, in 1 MiB frames (aio.block_size) as
// the executor compresses them. Per data set and codec: the stored / raw
// ratio (frames padded to 4 KiB, as written) and one thread's compress and
// decompress rates, interleaved round by round with memcpy of the same
// frames (the ratio column: per-round rate / memcpy's).
//
// Data: fp32 weights N(0, 0.02), Adam's first moment N(0, 1e-3), its second
// moment (the square of one), and the weights in fp16 and bf16, 32 MiB each
// (a fixed seed); and each file named in STRATA_CODEC_FILES
// (path[:element bytes], comma separated, element 4 by default), e.g. the
// swap files `strata run --keep-swap-files` leaves.
// Run: build/bench/codec_bench
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "interleave.h"
#include "io/codec.h"
#include "strata/core/codec_profile.h"

namespace {

using strata::CodecKind;
using strata::exec::Codec;

constexpr size_t kFrame = size_t{1} << 20;

struct DataSet {
  std::string name;
  size_t element = 4;
  std::vector<std::byte> bytes;
};

uint16_t ToHalf(float f) {  // round to nearest even, normal range (the data's)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  uint32_t mant = x & 0x7fffffu;
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}

std::vector<DataSet> Synthetic() {
  constexpr size_t n = (size_t{32} << 20) / 4;
  std::mt19937_64 rng(42);
  std::normal_distribution<float> w(0, 0.02f), m(0, 1e-3f);
  std::vector<float> weights(n), m1(n), m2(n);
  for (size_t i = 0; i < n; ++i) {
    weights[i] = w(rng);
    m1[i] = m(rng);
    const float g = m(rng);
    m2[i] = g * g;
  }
  auto as_bytes = [](const auto& v) {
    std::vector<std::byte> b(v.size() * sizeof v[0]);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  std::vector<uint16_t> half(n), bf(n);
  for (size_t i = 0; i < n; ++i) {
    half[i] = ToHalf(weights[i]);
    uint32_t x;
    std::memcpy(&x, &weights[i], 4);
    bf[i] = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  return {{"fp32 weights", 4, as_bytes(weights)},
          {"adam exp_avg", 4, as_bytes(m1)},
          {"adam exp_avg_sq", 4, as_bytes(m2)},
          {"fp16 weights", 2, as_bytes(half)},
          {"bf16 weights", 2, as_bytes(bf)}};
}

std::vector<DataSet> FromFiles() {
  std::vector<DataSet> out;
  const char* env = std::getenv("STRATA_CODEC_FILES");
  if (env == nullptr) return out;
  std::stringstream list(env);
  std::string item;
  while (std::getline(list, item, ',')) {
    DataSet d;
    const size_t colon = item.rfind(':');
    d.name = item;
    if (colon != std::string::npos) {
      d.element = std::stoul(item.substr(colon + 1));
      d.name = item.substr(0, colon);
    }
    std::ifstream f(d.name, std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    s.resize(s.size() / kFrame * kFrame);  // whole frames
    if (s.empty()) {
      std::fprintf(stderr, "codec_bench: %s: unreadable or under 1 MiB, skipped\n", d.name.c_str());
      continue;
    }
    d.bytes.resize(s.size());
    std::memcpy(d.bytes.data(), s.data(), s.size());
    out.push_back(std::move(d));
  }
  return out;
}

struct Config {
  CodecKind kind;
  int level;
  bool shuffle;
  std::string name() const {
    return std::string(strata::ProfileOf(kind).name) + " " + std::to_string(level) + (shuffle ? " shuf" : "");
  }
};

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void BM_Codecs(benchmark::State& state) {
  std::vector<Config> configs;
  for (CodecKind k : {CodecKind::kLz4, CodecKind::kZstd}) {
    if (!strata::exec::CodecBuiltIn(k)) continue;
    for (int level : k == CodecKind::kLz4 ? std::vector<int>{1} : std::vector<int>{1, 3})
      for (bool shuffle : {false, true}) configs.push_back({k, level, shuffle});
  }
  auto sets = Synthetic();
  for (auto& d : FromFiles()) sets.push_back(std::move(d));
  for (auto _ : state) {
    for (const DataSet& d : sets) {
      const size_t frames = d.bytes.size() / kFrame;
      std::vector<std::byte> out(d.bytes.size());
      std::printf("\n== %s: %zu MiB, %zu-byte elements\n", d.name.c_str(), d.bytes.size() >> 20, d.element);
      std::vector<strata::bench::Variant> comp{{"memcpy", [&] {
                                                  const auto t0 = std::chrono::steady_clock::now();
                                                  std::memcpy(out.data(), d.bytes.data(), d.bytes.size());
                                                  benchmark::DoNotOptimize(out.data());
                                                  return static_cast<double>(d.bytes.size()) / Seconds(t0) / 1e9;
                                                }}};
      auto decomp = comp;
      std::vector<std::vector<std::vector<std::byte>>> stored(configs.size());
      std::vector<std::unique_ptr<Codec>> codecs;
      for (size_t c = 0; c < configs.size(); ++c) {
        codecs.push_back(Codec::New(configs[c].kind, configs[c].level).value());
        Codec& codec = *codecs.back();
        const size_t element = configs[c].shuffle ? d.element : 1;
        stored[c].resize(frames);
        for (size_t f = 0; f < frames; ++f) {
          stored[c][f].resize(codec.Bound(kFrame));
          const size_t n = *codec.Compress({d.bytes.data() + f * kFrame, kFrame}, element, stored[c][f]);
          stored[c][f].resize(n);
        }
        comp.push_back(
            {configs[c].name(), [&, c, element] {
               std::vector<std::byte> buf(codecs[c]->Bound(kFrame));
               const auto t0 = std::chrono::steady_clock::now();
               for (size_t f = 0; f < frames; ++f)
                 benchmark::DoNotOptimize(*codecs[c]->Compress({d.bytes.data() + f * kFrame, kFrame}, element, buf));
               return static_cast<double>(d.bytes.size()) / Seconds(t0) / 1e9;
             }});
        decomp.push_back({configs[c].name(), [&, c, element] {
                            const auto t0 = std::chrono::steady_clock::now();
                            for (size_t f = 0; f < frames; ++f)
                              if (!codecs[c]->Decompress(stored[c][f], element, {out.data() + f * kFrame, kFrame}).ok())
                                std::abort();
                            return static_cast<double>(d.bytes.size()) / Seconds(t0) / 1e9;
                          }});
      }
      for (size_t c = 0; c < configs.size(); ++c) {
        size_t raw = 0, padded = 0;
        for (const auto& s : stored[c]) {
          raw += s.size();
          padded += std::min(kFrame, (s.size() + 4095) / 4096 * 4096);
        }
        std::printf("  %-16s stored/raw %.4f (unpadded %.4f)\n", configs[c].name().c_str(),
                    static_cast<double>(padded) / static_cast<double>(d.bytes.size()),
                    static_cast<double>(raw) / static_cast<double>(d.bytes.size()));
      }
      const int rounds = strata::bench::Rounds();
      strata::bench::Report(state, d.name + ": compress",
                            strata::bench::Interleave(comp, rounds, 0, "GB/s of raw bytes, one thread"));
      strata::bench::Report(state, d.name + ": decompress",
                            strata::bench::Interleave(decomp, rounds, 0, "GB/s of raw bytes, one thread"));
      // Lossless: each codec's frames give back the bytes.
      for (size_t c = 0; c < configs.size(); ++c) {
        const size_t element = configs[c].shuffle ? d.element : 1;
        for (size_t f = 0; f < frames; ++f)
          if (!codecs[c]->Decompress(stored[c][f], element, {out.data() + f * kFrame, kFrame}).ok()) std::abort();
        if (std::memcmp(out.data(), d.bytes.data(), d.bytes.size()) != 0) {
          std::fprintf(stderr, "codec_bench: %s does not give back %s\n", configs[c].name().c_str(), d.name.c_str());
          std::abort();
        }
      }
    }
  }
}
BENCHMARK(BM_Codecs)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
