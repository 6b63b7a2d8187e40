#include "pert/attention_stats.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/attention.hpp"
#include "kernels/ops.hpp"

namespace pert {

const char* query_range_name(QueryRange r) {
  switch (r) {
    case QueryRange::InL: return "in_L";
    case QueryRange::PastL: return "past_L";
    case QueryRange::All: return "all";
  }
  return "?";
}

AttentionStats::AttentionStats(int layers, int heads, int max_length, int trained_length, int sink, bool sink_logits)
    : layers_(layers),
      heads_(heads),
      buckets_(distance_buckets(max_length)),
      trained_length_(trained_length),
      sink_(sink),
      sink_logits_(sink_logits),
      fields_(size_t(kMass + buckets_)),
      sums_(size_t(omp_get_max_threads()), std::vector<Fixed>(size_t(layers) * size_t(heads) * 2 * fields_, 0)),
      nonfinite_(sums_.size(), 0) {}

bool AttentionStats::nonfinite() const {
  return std::any_of(nonfinite_.begin(), nonfinite_.end(), [](char c) { return c != 0; });
}

namespace {
constexpr double kUnit = 18446744073709551616.0;  // 2^64: a sum's fixed-point unit is 2^-64
}  // namespace

void AttentionStats::softmax(int layer, int head, int m, float* row, int seen, int sinks, int lo, float sink_logit) {
  // 1. the kernel's softmax as it computes the weights (the max, the exponentials and their float
  //    sum, the sink logit's term, the scale), with Σ e·(s − max) beside the sum: over the keys
  //    (sum S, Z with the sink's term) −Σ p·ln p = (S/Z)·ln Z − Σ e·(s − max) / Z (S = Z without).
  const float max = std::max(*std::max_element(row, row + seen), sink_logit);
  double moments[16] = {};
  const float sum = exp_and_sum(row, seen, max, moments);  // the same float sum as softmax()'s
  const float sink_term = exp_nonpositive(sink_logit - max), z = sum + sink_term;  // (e^−inf = 0: none)
  double a = 0;
  for (double part : moments) a += part;
  const float inv = 1.0f / z;
  if (!std::isfinite(a) || !(z >= 1.0f) || !std::isfinite(z)) {  // NaN or inf scores: no statistics
    for (int j = 0; j < seen; ++j) row[j] *= inv;  // the weights as softmax() leaves them
    nonfinite_[size_t(omp_get_thread_num())] = 1;
    return;
  }
  const double entropy = std::max(0.0, std::log(double(z)) * (double(sum) / double(z)) - a / double(z));
  add_query(layer, head, m, row, seen, sinks, lo, inv, entropy, double(sink_term) / double(z));
}

void AttentionStats::stick_breaking(int layer, int head, int m, float* row, int seen, int sinks, int lo) {
  stick_breaking_weights(row, seen);  // the kernel's weights, its own key's the remainder: they sum to 1
  double entropy = 0;
  for (int j = 0; j < seen; ++j)
    if (row[j] > 0) entropy -= double(row[j]) * std::log(double(row[j]));
  if (!std::isfinite(entropy) || !std::isfinite(row[seen - 1])) {  // NaN scores (the remainder carries them): no statistics
    nonfinite_[size_t(omp_get_thread_num())] = 1;
    return;
  }
  add_query(layer, head, m, row, seen, sinks, lo, 1.0f, entropy, 0.0);  // (× 1.0f leaves each weight as it is)
}

void AttentionStats::add_query(int layer, int head, int m, float* row, int seen, int sinks, int lo, float inv,
                               double entropy, double sink_logit_mass) {
  // 2. the weights written, and as they are, each distance bucket's mass, Σ p·distance and the
  //    largest weight. Key of column j: j below `sinks`, else lo + j − sinks; distance m − key.
  double q[kMass + 32] = {};  // this query's fields (buckets_ <= 32: distances below 2^31)
  q[kQueries] = 1;
  q[kEntropy] = entropy;
  q[kSinkLogit] = sink_logit_mass;
  double dist = 0, sink = 0;
  float top = 0.0f;
  for (int j = 0; j < sinks; ++j) {
    const float p = row[j] *= inv;
    dist += double(p) * double(m - j);
    if (j < sink_) sink += p;
    q[kMass + distance_bucket(m - j)] += p;
    top = std::max(top, p);
  }
  // The window [lo, m] from column `sinks`: distances m − lo down to 0, a bucket's keys side by side.
  float* w = row + sinks;
  const int n = seen - sinks;  // keys lo .. lo + n − 1 (= m): column j at distance n − 1 − j
  for (int k = 0, d0 = 0; d0 < n; ++k) {  // bucket k: distances [d0, d1]
    const int d1 = std::min(k == 0 ? 0 : 2 * d0 - 1, n - 1);
    double mass = 0, moment = 0;
    float btop = 0.0f;
#pragma omp simd reduction(+ : mass, moment) reduction(max : btop)
    for (int j = n - 1 - d1; j <= n - 1 - d0; ++j) {
      const float p = w[j] * inv;
      w[j] = p;
      mass += double(p);
      moment += double(p) * double(n - 1 - j);
      btop = std::max(btop, p);
    }
    q[kMass + k] += mass;
    dist += moment;
    top = std::max(top, btop);
    d0 = d1 + 1;
  }
  for (int j = 0; j < std::min(n, sink_ - lo); ++j) sink += w[j];
  q[kSink] = sink;
  q[kDistance] = dist;
  q[kMax] = double(top);
  Fixed* s = sums(omp_get_thread_num(), layer, head, m < trained_length_ ? 0 : 1);
  for (size_t f = 0; f < fields_; ++f) s[f] += Fixed(q[f] * kUnit);  // every field >= 0, below 2^40
}

AttentionMeans AttentionStats::means(QueryRange range) const {
  AttentionMeans r;
  r.layers = layers_, r.heads = heads_, r.buckets = buckets_;
  const size_t cells = size_t(layers_) * size_t(heads_);
  r.entropy.assign(cells, 0.0), r.sink_mass.assign(cells, 0.0), r.mean_distance.assign(cells, 0.0);
  r.max_weight.assign(cells, 0.0), r.mass.assign(cells * size_t(buckets_), 0.0);
  if (sink_logits_) r.sink_logit_mass.assign(cells, 0.0);
  std::vector<Fixed> total(fields_);
  for (size_t c = 0; c < cells; ++c) {
    std::fill(total.begin(), total.end(), 0);
    for (const std::vector<Fixed>& t : sums_)
      for (int part = 0; part < 2; ++part)
        if (range == QueryRange::All || int(range) == part)
          for (size_t f = 0; f < fields_; ++f) total[f] += t[(c * 2 + size_t(part)) * fields_ + f];
    const double q = double(total[kQueries]) / kUnit, nan = std::numeric_limits<double>::quiet_NaN();
    auto mean = [&](int f) { return q > 0 ? double(total[size_t(f)]) / kUnit / q : nan; };
    r.queries = (long long)q;
    r.entropy[c] = mean(kEntropy), r.sink_mass[c] = mean(kSink), r.mean_distance[c] = mean(kDistance);
    r.max_weight[c] = mean(kMax);
    if (sink_logits_) r.sink_logit_mass[c] = mean(kSinkLogit);
    for (int k = 0; k < buckets_; ++k) r.mass[c * size_t(buckets_) + size_t(k)] = mean(kMass + k);
  }
  return r;
}

}  // namespace pert
