// T5 relative attention bias (Raffel et al. 2020): bias B[bucket(m - n), h] from a learned
// table shared by all layers, with HF's causal bucketing (T5Attention._relative_position_bucket,
// bidirectional=False): exact below num_buckets/2, log-spaced up to max_distance, then the last.
#include <algorithm>
#include <cmath>

#include "schemes.hpp"

namespace pert {

int t5_bucket(int distance, int num_buckets, int max_distance) {
  const int max_exact = num_buckets / 2;
  if (distance < max_exact) return distance;
  // float32 throughout, as HF computes it, so the truncation lands on the same bucket.
  const float large = std::log(float(distance) / float(max_exact)) /
                      float(std::log(double(max_distance) / max_exact)) * float(num_buckets - max_exact);
  return std::min(max_exact + int(large), num_buckets - 1);
}

namespace {
class T5 final : public PositionEncoding {
 public:
  T5(const float* table, int n_heads, int num_buckets, int max_distance) : table_(table), n_heads_(n_heads) {
    // Distances from max_distance on all fall in the last bucket; tabulate the ones below.
    for (int d = 0; d < max_distance; ++d) bucket_of_.push_back(t5_bucket(d, num_buckets, max_distance));
    last_ = num_buckets - 1;
  }
  bool has_bias() const override { return true; }
  void add_bias(float* scores, int head, int query_pos, int key0, int n_keys) const override {
    const int near = int(bucket_of_.size());
    for (int i = 0; i < n_keys; ++i) {
      const int d = query_pos - key0 - i;
      scores[i] += table_[size_t(d < near ? bucket_of_[size_t(d)] : last_) * n_heads_ + head];
    }
  }

 private:
  const float* table_;  // [num_buckets][n_heads]
  int n_heads_;
  std::vector<int> bucket_of_;  // [max_distance]
  int last_;
};
}  // namespace

std::unique_ptr<PositionEncoding> make_t5(const ModelConfig& c, const TensorLookup& tensors) {
  return std::make_unique<T5>(tensors(kT5Table), c.n_heads, c.position.num_buckets, c.position.max_distance);
}

}  // namespace pert
