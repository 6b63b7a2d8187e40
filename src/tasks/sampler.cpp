#include "pert/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace pert {

int Sampler::sample(float* logits, int vocab, const std::vector<int>& history) {
  if (p_.repeat_penalty != 1.0f && p_.repeat_last_n > 0) {
    if (seen_.size() < size_t(vocab)) seen_.resize(size_t(vocab), 0);  // all clear between calls
    const size_t from = history.size() > size_t(p_.repeat_last_n) ? history.size() - size_t(p_.repeat_last_n) : 0;
    for (size_t i = from; i < history.size(); ++i) {
      const int id = history[i];
      if (id < 0 || id >= vocab || seen_[size_t(id)]) continue;
      seen_[size_t(id)] = 1;
      logits[id] = logits[id] > 0 ? logits[id] / p_.repeat_penalty : logits[id] * p_.repeat_penalty;
    }
    for (size_t i = from; i < history.size(); ++i)
      if (history[i] >= 0 && history[i] < vocab) seen_[size_t(history[i])] = 0;
  }
  greedy_ = p_.temperature <= 0.0f;
  if (greedy_) return int(std::max_element(logits, logits + vocab) - logits);  // first of ties

  // Candidates best first (ties: lower id first), cut by top-k. Sized once for the vocabulary.
  if (candidates_.capacity() < size_t(vocab)) {
    candidates_.reserve(size_t(vocab));
    prob_.reserve(size_t(vocab));
    weight_.reserve(size_t(vocab));
  }
  candidates_.clear();
  for (int i = 0; i < vocab; ++i) candidates_.push_back({logits[i], i});
  auto better = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  const size_t k = p_.top_k > 0 ? std::min(size_t(p_.top_k), candidates_.size()) : candidates_.size();
  std::partial_sort(candidates_.begin(), candidates_.begin() + ptrdiff_t(k), candidates_.end(), better);
  candidates_.resize(k);

  // Probabilities at temperature 1 for top-p and min-p, as llama.cpp computes them.
  std::vector<double>& prob = prob_;
  prob.resize(candidates_.size());
  const double max = candidates_[0].first;
  double sum = 0.0;
  for (size_t i = 0; i < prob.size(); ++i) sum += prob[i] = std::exp(double(candidates_[i].first) - max);
  size_t keep = candidates_.size();
  if (p_.top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < keep; ++i)
      if ((cumulative += prob[i] / sum) >= p_.top_p) {
        keep = i + 1;
        break;
      }
  }
  if (p_.min_p > 0.0f) {
    size_t i = 1;
    while (i < keep && prob[i] >= p_.min_p * prob[0]) ++i;  // prob[0] is the largest
    keep = i;
  }
  candidates_.resize(keep);

  // Temperature, then one draw.
  std::vector<double>& weight = weight_;
  weight.resize(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += weight[i] = std::exp((double(candidates_[i].first) - max) / p_.temperature);
  const double u = double(rng_() >> 11) * 0x1.0p-53 * total;  // uniform in [0, total)
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i)
    if ((acc += weight[i]) > u) return candidates_[i].second;
  return candidates_[keep - 1].second;
}

TokenProbs Sampler::distribution(const float* logits, int vocab, int chosen, int n) const {
  const size_t want = size_t(std::max(n, 0));
  TokenProbs out;
  if (greedy_) {
    const double max = *std::max_element(logits, logits + vocab);
    double sum = 0.0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - max);
    std::vector<TokenProb> all;
    for (int i = 0; i < vocab; ++i) all.push_back({i, float(std::exp(double(logits[i]) - max) / sum)});
    if (chosen >= 0 && chosen < vocab) out.p = all[size_t(chosen)].p;
    const size_t k = std::min(all.size(), want);
    std::partial_sort(all.begin(), all.begin() + ptrdiff_t(k), all.end(), [](const TokenProb& a, const TokenProb& b) {
      return a.p != b.p ? a.p > b.p : a.id < b.id;
    });
    out.top.assign(all.begin(), all.begin() + ptrdiff_t(k));
    return out;
  }
  double total = 0.0;  // weight_: the candidates' unnormalised probabilities at the temperature, best first
  for (size_t i = 0; i < candidates_.size(); ++i) total += weight_[i];
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const float p = float(weight_[i] / total);
    if (candidates_[i].second == chosen) out.p = p;
    if (out.top.size() < want) out.top.push_back({candidates_[i].second, p});
  }
  return out;
}

}  // namespace pert
