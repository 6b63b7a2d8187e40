// The mixture-of-experts block of moe.hpp. Prefill: the tokens are grouped by expert (a counting
// sort of the (token, slot) pairs), each expert's tokens gathered into one matrix and run through
// its MLP in one product, the outputs scattered back by weight. Decoding (one token per
// sequence) reads only the n_used experts' rows.
#include "model/moe.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.hpp"

namespace pert {

namespace {

// The k largest of v[0..n) (the lower index first among equals) into c[0..k), those in `allowed`
// only when it is given.
void top_k(const float* v, int n, int k, int* c, const std::vector<char>* allowed = nullptr) {
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < n; ++e) {
      if ((allowed && !(*allowed)[size_t(e)]) || std::find(c, c + j, e) != c + j) continue;
      if (best < 0 || v[e] > v[best]) best = e;
    }
    c[j] = best;
  }
}

}  // namespace

void route(const MoeConfig& moe, const float* logits, const float* score_bias, int rows, int* chosen, float* weights,
           RouteScratch& scratch) {
  const int E = moe.n_experts, k = moe.n_used;
  std::vector<float>& choice = scratch.choice;
  std::vector<float>& group = scratch.group;
  std::vector<char>& allowed = scratch.allowed;
  std::vector<int>& kept = scratch.kept;
  const int per = E / moe.n_groups;  // experts per group
  if (moe.n_groups > 1) allowed.resize(size_t(E)), group.resize(size_t(moe.n_groups)), kept.resize(size_t(moe.topk_groups));
  if (moe.router == MoeConfig::Router::SigmoidGroups) choice.resize(size_t(E));
  // the experts of the topk_groups best groups, each group scored by `score`
  auto allow_best_groups = [&](const float* s, auto score) {
    for (int g = 0; g < moe.n_groups; ++g) group[size_t(g)] = score(s + size_t(g) * per);
    top_k(group.data(), moe.n_groups, moe.topk_groups, kept.data());
    std::fill(allowed.begin(), allowed.end(), 0);
    for (int g : kept) std::fill(allowed.begin() + g * per, allowed.begin() + (g + 1) * per, 1);
  };
  for (int r = 0; r < rows; ++r) {
    const float* l = logits + size_t(r) * E;
    int* c = chosen + size_t(r) * k;
    float* w = weights + size_t(r) * k;
    if (moe.router == MoeConfig::Router::SigmoidGroups) {
      // s = σ(l); the groups scored by the sum of their two best s + bias, the best topk_groups
      // kept, the k best s + bias within them; weights the chosen s
      for (int e = 0; e < E; ++e) choice[size_t(e)] = float(1.0 / (1.0 + std::exp(-double(l[e])))) + (score_bias ? score_bias[e] : 0.0f);
      if (moe.n_groups > 1)
        allow_best_groups(choice.data(), [&](const float* s) {
          int two[2] = {0, 0};
          top_k(s, per, std::min(2, per), two);
          return s[two[0]] + (per > 1 ? s[two[1]] : 0.0f);
        });
      top_k(choice.data(), E, k, c, moe.n_groups > 1 ? &allowed : nullptr);
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += w[j] = float(1.0 / (1.0 + std::exp(-double(l[c[j]]))));
      for (int j = 0; j < k; ++j) w[j] = float((moe.renormalize ? w[j] / (sum + 1e-20) : w[j]) * moe.routed_scale);
      continue;
    }
    // (softmax keeps the logits' order: a group's best probability is its largest logit)
    if (moe.n_groups > 1) allow_best_groups(l, [&](const float* s) { return *std::max_element(s, s + per); });
    top_k(l, E, k, c, moe.n_groups > 1 ? &allowed : nullptr);
    const float max = l[c[0]];  // (the largest of all: its group is kept)
    // softmax over all experts (without renormalisation), else over the k chosen
    const bool over_all = moe.router == MoeConfig::Router::Softmax && !moe.renormalize;
    double norm = 0;
    for (int e = 0; e < (over_all ? E : k); ++e) norm += std::exp(double(l[over_all ? e : c[e]]) - max);
    for (int j = 0; j < k; ++j) w[j] = float(std::exp(double(l[c[j]]) - max) / norm * moe.routed_scale);
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

void MoeBlock::mlp(const ExpertWeights& e, const float* x, int n, int width) {
  const int d = c_.hidden_size;
  matmul_shared(x, n, d, {{gate_.data(), &e.gate, width}, {up_.data(), &e.up, width}});
  if (e.b_gate) add_rows(gate_.data(), e.b_gate, n, width), add_rows(up_.data(), e.b_up, n, width);
  const size_t cells = size_t(n) * size_t(width);
  if (c_.moe.clamped_swiglu) {  // gpt-oss: (up + 1)·gate·σ(α·gate), gate ≤ limit, |up| ≤ limit
    const float alpha = float(c_.moe.swiglu_alpha), limit = float(c_.moe.swiglu_limit);
    for (size_t i = 0; i < cells; ++i) {
      const float g = std::min(gate_[i], limit), u = std::clamp(up_[i], -limit, limit);
      gate_[i] = (u + 1.0f) * g / (1.0f + std::exp(-alpha * g));
    }
  } else {
    swiglu(gate_.data(), up_.data(), cells);
  }
  matmul(y_.data(), gate_.data(), e.down, n, width, d);
  if (e.b_down) add_rows(y_.data(), e.b_down, n, d);
}

void MoeBlock::forward(const MoeWeights& w, const float* x, int rows, float* out, bool accumulate) {
  const MoeConfig& m = c_.moe;
  const int d = c_.hidden_size, E = m.n_experts, k = m.n_used, ff = m.expert_ffn;
  float* acc = accumulate ? out : acc_.data();
  if (!accumulate) std::fill(acc, acc + size_t(rows) * d, 0.0f);
  matmul(logits_.data(), x, w.router, rows, d, E);
  if (w.router_bias) add_rows(logits_.data(), w.router_bias, rows, E);
  route(m, logits_.data(), w.score_bias, rows, chosen_.data(), weights_.data(), route_);
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
    mlp(w.experts[size_t(e)], x_.data(), n, ff);
    for (int j = 0; j < n; ++j) {
      const int pair = order_[size_t(first + j)];
      const float weight = weights_[size_t(pair)];
      float* dst = acc + size_t(pair / k) * d;
      const float* src = &y_[size_t(j) * d];
      for (int i = 0; i < d; ++i) dst[i] += weight * src[i];
    }
  }
  if (m.shared_ffn > 0) {  // every token through the shared expert (Qwen2-MoE: scaled by σ(x·w_gate))
    mlp(w.shared, x, rows, m.shared_ffn);
    if (w.shared_gate) matmul(shared_gate_.data(), x, w.shared_gate, rows, d, 1);
    for (int r = 0; r < rows; ++r) {
      const float s = w.shared_gate ? 1.0f / (1.0f + std::exp(-shared_gate_[size_t(r)])) : 1.0f;
      for (int i = 0; i < d; ++i) acc[size_t(r) * d + i] += s * y_[size_t(r) * d + i];
    }
  }
  if (!accumulate) std::memcpy(out, acc, sizeof(float) * size_t(rows) * d);
}

}  // namespace pert
