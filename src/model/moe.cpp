// The mixture-of-experts block of moe.hpp. Prefill: the tokens are grouped by expert (a counting
// sort of the (token, slot) pairs), each expert's tokens gathered into one matrix and run through
// its MLP in one product, the outputs scattered back by weight. Decoding (one token per
// sequence) reads only the n_used experts' rows.
#include "moe.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../kernels/ops.hpp"

namespace pert {

void route_softmax_topk(const MoeConfig& moe, const float* logits, int rows, int* chosen, float* weights) {
  const int E = moe.n_experts, k = moe.n_used;
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + size_t(r) * E;
    int* c = chosen + size_t(r) * k;
    float* w = weights + size_t(r) * k;
    // The k largest logits (softmax keeps their order), the lower index first among equals.
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < E; ++e) {
        if (std::find(c, c + j, e) != c + j) continue;
        if (best < 0 || l[e] > l[best]) best = e;
      }
      c[j] = best;
    }
    const float max = l[c[0]];
    double all = 0, kept = 0;
    for (int e = 0; e < E; ++e) all += std::exp(double(l[e]) - max);
    for (int j = 0; j < k; ++j) kept += std::exp(double(l[c[j]]) - max);
    const double norm = moe.renormalize ? kept : all;
    for (int j = 0; j < k; ++j) w[j] = float(std::exp(double(l[c[j]]) - max) / norm);
  }
}

MoeBlock::MoeBlock(const ModelConfig& c, int rows) : c_(c) {
  const MoeConfig& m = c.moe;
  const size_t R = size_t(rows), d = size_t(c.hidden_size), width = size_t(std::max(m.expert_ffn, m.shared_ffn));
  logits_.resize(R * size_t(m.n_experts));
  chosen_.resize(R * size_t(m.n_used));
  weights_.resize(R * size_t(m.n_used));
  order_.resize(R * size_t(m.n_used));
  starts_.resize(size_t(m.n_experts) + 1);
  x_.resize(R * d);
  y_.resize(R * d);
  gate_.resize(R * width);
  up_.resize(R * width);
  acc_.resize(R * d);
  shared_gate_.resize(R);
}

void MoeBlock::forward(const MoeWeights& w, const float* x, int rows, float* out, bool accumulate) {
  const MoeConfig& m = c_.moe;
  const int d = c_.hidden_size, E = m.n_experts, k = m.n_used, ff = m.expert_ffn;
  float* acc = accumulate ? out : acc_.data();
  if (!accumulate) std::fill(acc, acc + size_t(rows) * d, 0.0f);
  matmul(logits_.data(), x, w.router, rows, d, E);
  route_softmax_topk(m, logits_.data(), rows, chosen_.data(), weights_.data());
  // Group the (row, slot) pairs by expert: starts_[e] .. starts_[e + 1] in order_.
  std::fill(starts_.begin(), starts_.end(), 0);
  for (int i = 0; i < rows * k; ++i) ++starts_[size_t(chosen_[size_t(i)]) + 1];
  for (int e = 0; e < E; ++e) starts_[size_t(e) + 1] += starts_[size_t(e)];
  // starts_ as running cursors: each pair placed at its expert's next slot, which leaves starts_[e]
  // at the end of e's run; shifted back by one expert, the runs' starts again.
  for (int i = 0; i < rows * k; ++i) order_[size_t(starts_[size_t(chosen_[size_t(i)])]++)] = i;
  for (int e = E; e > 0; --e) starts_[size_t(e)] = starts_[size_t(e) - 1];
  starts_[0] = 0;
  for (int e = 0; e < E; ++e) {
    const int first = starts_[size_t(e)], n = starts_[size_t(e) + 1] - first;
    if (n == 0) continue;  // (decoding: most experts)
    for (int j = 0; j < n; ++j)
      std::memcpy(&x_[size_t(j) * d], x + size_t(order_[size_t(first + j)] / k) * d, sizeof(float) * size_t(d));
    const ExpertWeights& ex = w.experts[size_t(e)];
    matmul_shared(x_.data(), n, d, {{gate_.data(), &ex.gate, ff}, {up_.data(), &ex.up, ff}});
    swiglu(gate_.data(), up_.data(), size_t(n) * ff);
    matmul(y_.data(), gate_.data(), ex.down, n, ff, d);
    for (int j = 0; j < n; ++j) {
      const int pair = order_[size_t(first + j)];
      const float weight = weights_[size_t(pair)];
      float* dst = acc + size_t(pair / k) * d;
      const float* src = &y_[size_t(j) * d];
      for (int i = 0; i < d; ++i) dst[i] += weight * src[i];
    }
  }
  if (w.shared_gate) {  // Qwen2-MoE: every token through the shared expert, scaled by σ(x·w_gate)
    const int sff = m.shared_ffn;
    matmul_shared(x, rows, d, {{gate_.data(), &w.shared.gate, sff}, {up_.data(), &w.shared.up, sff}});
    swiglu(gate_.data(), up_.data(), size_t(rows) * sff);
    matmul(y_.data(), gate_.data(), w.shared.down, rows, sff, d);
    matmul(shared_gate_.data(), x, w.shared_gate, rows, d, 1);
    for (int r = 0; r < rows; ++r) {
      const float s = 1.0f / (1.0f + std::exp(-shared_gate_[size_t(r)]));
      for (int i = 0; i < d; ++i) acc[size_t(r) * d + i] += s * y_[size_t(r) * d + i];
    }
  }
  if (!accumulate) std::memcpy(out, acc, sizeof(float) * size_t(rows) * d);
}

}  // namespace pert
