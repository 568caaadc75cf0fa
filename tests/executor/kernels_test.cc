// MLP kernels against central finite differences (in double), and SHA-256
// against FIPS 180-4 test vectors.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "strata/executor/mlp_kernels.h"
#include "strata/executor/sha256.h"

namespace strata::exec {
namespace {

// A two-layer MLP's loss as a function of everything, in double.
struct Net {
  size_t B = 3, I = 5, H = 4, C = 3;
  std::vector<double> x, w1, b1, w2, b2;
  std::vector<int32_t> labels{0, 2, 1};

  Net() {
    std::mt19937 rng(5);
    std::normal_distribution<double> n(0, 0.7);
    for (auto* v : {&x, &w1, &b1, &w2, &b2}) v->clear();
    x.resize(B * I);
    w1.resize(H * I);
    b1.resize(H);
    w2.resize(C * H);
    b2.resize(C);
    for (auto* v : {&x, &w1, &b1, &w2, &b2})
      for (double& e : *v) e = n(rng);
  }
  // Forward and, with grads, backward. Returns the loss.
  double Run(std::vector<double>* gx = nullptr, std::vector<double>* gw1 = nullptr, std::vector<double>* gb1 = nullptr,
             std::vector<double>* gw2 = nullptr, std::vector<double>* gb2 = nullptr) const {
    std::vector<double> h(B * H), z(B * C), dz(B * C), dh(B * H), dx(B * I);
    LinearForward(x.data(), w1.data(), b1.data(), h.data(), B, I, H);
    ReluForward(h.data(), h.size());
    LinearForward(h.data(), w2.data(), b2.data(), z.data(), B, H, C);
    const double loss = SoftmaxCrossEntropy(z.data(), labels.data(), dz.data(), B, C);
    if (gw1 == nullptr) return loss;
    gw1->assign(w1.size(), 0);
    gb1->assign(b1.size(), 0);
    gw2->assign(w2.size(), 0);
    gb2->assign(b2.size(), 0);
    LinearBackward(h.data(), w2.data(), dz.data(), dh.data(), gw2->data(), gb2->data(), B, H, C);
    ReluBackward(h.data(), dh.data(), dh.size());
    LinearBackward(x.data(), w1.data(), dh.data(), dx.data(), gw1->data(), gb1->data(), B, I, H);
    *gx = dx;
    return loss;
  }
};

TEST(MlpKernels, GradientsMatchFiniteDifferences) {
  Net net;
  std::vector<double> gx, gw1, gb1, gw2, gb2;
  net.Run(&gx, &gw1, &gb1, &gw2, &gb2);
  const double eps = 1e-6;
  auto check = [&](std::vector<double>& param, const std::vector<double>& grad, const char* name) {
    for (size_t i = 0; i < param.size(); ++i) {
      const double keep = param[i];
      param[i] = keep + eps;
      const double up = net.Run();
      param[i] = keep - eps;
      const double down = net.Run();
      param[i] = keep;
      EXPECT_NEAR(grad[i], (up - down) / (2 * eps), 1e-7) << name << "[" << i << "]";
    }
  };
  check(net.w1, gw1, "w1");
  check(net.b1, gb1, "b1");
  check(net.w2, gw2, "w2");
  check(net.b2, gb2, "b2");
  check(net.x, gx, "x");
}

TEST(MlpKernels, FloatAgreesWithDouble) {
  const size_t B = 4, I = 64, O = 10;
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> x(B * I), w(O * I), b(O), y(B * O);
  for (auto* v : {&x, &w, &b})
    for (float& e : *v) e = n(rng);
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()), yd(B * O);
  LinearForward(x.data(), w.data(), b.data(), y.data(), B, I, O);
  LinearForward(xd.data(), wd.data(), bd.data(), yd.data(), B, I, O);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], yd[i], 1e-4 * (1 + std::abs(yd[i])));
}

std::string Hash(const std::string& s) {
  Sha256 h;
  h.Update(s.data(), s.size());
  return Sha256::Hex(h.Finish());
}

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(Hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 h;
  const std::string a(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.Update(a.data(), a.size());  // one million 'a'
  EXPECT_EQ(Sha256::Hex(h.Finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace strata::exec

#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "strata/executor/copy_engine.h"

namespace strata::exec {
namespace {

TEST(CopyEngine, CopiesEveryByteWhateverTheSplit) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4097}, size_t{9} << 20, (size_t{13} << 20) + 5}) {
    std::vector<unsigned char> src(n), dst(n, 0);
    for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
    for (int threads : {1, 2, 3}) {
      std::fill(dst.begin(), dst.end(), 0);
      CopyBytes(dst.data(), src.data(), n, threads);
      EXPECT_EQ(dst, src) << n << " bytes, " << threads << " threads";
    }
  }
}

// Large copies keep their workers (a pool per calling thread): a thread
// started and joined per copy cost 20-37% of an 8 MiB copy's time here
// (bench/copy_bench). On a thread of its own (the pool is the caller's),
// the first large copy leaves one worker behind, and 64 more copies start
// no other: the process's threads (/proc/self/task) stay the same.
std::set<std::string> ThreadIds() {
  std::set<std::string> ids;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ids.insert(e.path().filename().string());
  return ids;
}

TEST(CopyEngine, WarmCopiesStartNoThreads) {
  constexpr size_t n = size_t{16} << 20;
  std::vector<unsigned char> src(n, 1), dst(n, 0);
  std::thread caller([&] {
    const std::set<std::string> before = ThreadIds();
    CopyBytes(dst.data(), src.data(), n, 2);
    const std::set<std::string> warm = ThreadIds();
    for (int i = 0; i < 64; ++i) CopyBytes(dst.data(), src.data(), n, 2);
    const std::set<std::string> after = ThreadIds();
    // Threads of other tests may end meanwhile (an io_uring worker's idle
    // exit, when the binary runs whole): only new ones and the kept worker
    // count.
    std::set<std::string> kept, started;
    for (const std::string& id : warm)
      if (!before.contains(id) && after.contains(id)) kept.insert(id);
    for (const std::string& id : after)
      if (!warm.contains(id)) started.insert(id);
    EXPECT_TRUE(started.empty()) << started.size() << " threads started by warm copies";
    EXPECT_EQ(kept.size(), 1u) << "the first copy kept no worker, or more than one";
  });
  caller.join();
  EXPECT_EQ(dst, src);
}

}  // namespace
}  // namespace strata::exec
