// The MLP's weights and samples from the seed (mlp_data.h).
#include "workloads/mlp_data.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "workloads/workload.h"

namespace strata::exec {

MlpData::MlpData(const Plan& p, uint64_t seed, int rank, int tensor_rank)
    : sizes_(p.run.model.sizes),
      batch_(static_cast<size_t>(p.run.micro_batch_size)),
      micro_steps_(std::max(1, p.micro_steps)),
      seed_(seed),
      rank_(rank),
      tp_(static_cast<size_t>(std::max(1, p.tensor_parallel()))),
      tp_rank_(static_cast<size_t>(tensor_rank)) {
  // The teacher is fixed: drawn once.
  const size_t I = FullIn(0), C = FullOut(Layers() - 1);
  std::mt19937_64 trng(seed_ + 99);
  std::normal_distribution<float> n(0.0f, 1.0f);
  teacher_.resize(C * I);
  for (float& v : teacher_) v = n(trng);
}

std::vector<float> MlpData::InitGroup(int g) const {
  const int m = g / 2;
  if (g % 2 == 1) return std::vector<float>(Out(m), 0.0f);
  const size_t in = FullIn(m), out = FullOut(m);
  std::vector<float> w(in * out);
  std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(m));
  const float k = 1.0f / std::sqrt(static_cast<float>(in));
  std::uniform_real_distribution<float> u(-k, k);
  for (float& v : w) v = u(rng);
  switch (SplitOf(m)) {
    case Split::kWhole:
      return w;
    case Split::kColumn:
      return ShardRows(w, in, Out(m), tp_rank_ * Out(m));
    case Split::kRow:
      return ShardColumns(w, in, In(m), tp_rank_ * In(m));
  }
  return w;
}

void MlpData::Draw(int step, int micro, std::vector<float>* x, std::vector<int32_t>* labels) const {
  const size_t I = FullIn(0), C = FullOut(Layers() - 1);
  std::mt19937_64 rng(seed_ ^ (static_cast<uint64_t>(step) * 1000003 + static_cast<uint64_t>(micro) * 7919 +
                               static_cast<uint64_t>(rank_) * 104729 + 17));
  std::normal_distribution<float> n(0.0f, 1.0f);
  x->resize(batch_ * I);
  for (float& v : *x) v = n(rng);
  labels->resize(batch_);
  for (size_t b = 0; b < batch_; ++b) {
    float best = -1e30f;
    for (size_t c = 0; c < C; ++c) {
      float dot = 0;
      for (size_t i = 0; i < I; ++i) dot += teacher_[c * I + i] * (*x)[b * I + i];
      if (dot > best) best = dot, (*labels)[b] = static_cast<int32_t>(c);
    }
  }
}

}  // namespace strata::exec
