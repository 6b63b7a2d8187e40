// What each head's attention does, as statistics of the weights every query used (after every
// bias, mask, scale, soft-cap and extend method), summed per (layer, head, query range) while
// the model runs: no weight matrix is kept. For query m with weights p(n) over the keys n it sees:
//   entropy        −Σ p(n)·ln p(n)                 (nats; 0 when one key takes everything)
//   sink mass      Σ p(n) over n < sink            (the first `sink` positions: the BOS by default)
//   mean distance  Σ p(n)·(m − n)
//   max weight     max p(n)
//   mass by distance bucket  Σ p(n) over m − n in the bucket: 0, 1, 2–3, 4–7, 8–15, ... (bucket
//                  k >= 1 holds distances [2^(k−1), 2^k − 1])
//   sink logit mass  1 − Σ p(n): the share a learned sink logit (gpt-oss, AttentionShape::sink_logits)
//                  takes, which no key gets; reported only for models with them (0 without)
// With a sink logit the weights sum to less than 1: the entropy is still −Σ p(n)·ln p(n) over the
// keys alone, and the buckets hold 1 − the sink logit mass.
// Stick-breaking attention (no softmax) reports the weights it uses: key n < m its stick, the
// query's own key (distance 0) what the sticks leave, so they sum to 1; the sink logit mass is 0.
// Queries fall in two ranges by position: [0, L) and [L, ∞), L the model's trained length.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace pert {

enum class QueryRange { InL = 0, PastL = 1, All = 2 };
const char* query_range_name(QueryRange r);  // "in_L", "past_L", "all"

// The bucket of distance d >= 0: 0 for d = 0, else 1 + ⌊log2 d⌋.
inline int distance_bucket(int64_t d) {
  int k = 0;
  while (d > 0) ++k, d >>= 1;
  return k;
}
// Buckets for queries at positions below `length`: those of distances 0 .. length − 1.
inline int distance_buckets(int length) { return distance_bucket(length > 1 ? length - 1 : 0) + 1; }

// One query range's means over its queries: [layer][head] per statistic, [layer][head][bucket]
// for the mass by distance.
struct AttentionMeans {
  long long queries = 0;  // per (layer, head)
  int layers = 0, heads = 0, buckets = 0;
  std::vector<double> entropy, sink_mass, mean_distance, max_weight;  // [layers][heads]
  std::vector<double> mass;                                           // [layers][heads][buckets]
  std::vector<double> sink_logit_mass;  // [layers][heads]; empty for a model without sink logits
};

// The running sums, one set per thread (the kernel's threads add to their own, no locks), in
// fixed point (2^-64 units in 128 bits): sums that do not depend on which thread added what, so a
// run's statistics are the same every time.
class AttentionStats {
 public:
  // Queries up to position max_length − 1; `trained_length` splits the ranges; `sink` >= 0;
  // `sink_logits`: the model has learned sink logits, whose mass means() then reports.
  AttentionStats(int layers, int heads, int max_length, int trained_length, int sink, bool sink_logits = false);

  // The kernel's softmax of query m (layer, head) with statistics: `row` holds its scores over
  // `seen` columns, −inf where masked: keys [0, sinks) in columns [0, sinks), then keys lo, lo + 1,
  // ... from column `sinks` on; `sink_logit`: the head's learned sink logit (−inf: none). Turns the
  // row into weights exactly as the kernel's softmax does and adds the query's statistics to the
  // calling thread's sums.
  void softmax(int layer, int head, int m, float* row, int seen, int sinks, int lo,
               float sink_logit = -std::numeric_limits<float>::infinity());

  // The same for stick-breaking's weights (attention.hpp: stick_breaking_weights), which it
  // writes into `row` as the kernel does.
  void stick_breaking(int layer, int head, int m, float* row, int seen, int sinks, int lo);

  // The means over every query added so far, the threads' sums joined.
  AttentionMeans means(QueryRange range) const;
  // Whether some query's scores were not finite (overflowing weights or config values): its
  // statistics were left out, and the caller has no means to report.
  bool nonfinite() const;
  int buckets() const { return buckets_; }
  int sink() const { return sink_; }
  bool sink_logits() const { return sink_logits_; }

 private:
  enum Field { kQueries, kEntropy, kSink, kDistance, kMax, kSinkLogit, kMass };  // kMass: the first of `buckets_`
  // One query's weights, row[j] · inv, written back and summed with its entropy and sink logit mass.
  void add_query(int layer, int head, int m, float* row, int seen, int sinks, int lo, float inv, double entropy,
                 double sink_logit_mass);
  __extension__ typedef __int128 Fixed;
  Fixed* sums(int thread, int layer, int head, int range) {
    return &sums_[size_t(thread)][((size_t(layer) * size_t(heads_) + size_t(head)) * 2 + size_t(range)) * fields_];
  }
  int layers_, heads_, buckets_, trained_length_, sink_;
  bool sink_logits_;
  size_t fields_;
  std::vector<std::vector<Fixed>> sums_;  // [thread][layer][head][in_L, past_L][field]
  std::vector<char> nonfinite_;           // [thread]: a query's scores were not finite
};

}  // namespace pert
