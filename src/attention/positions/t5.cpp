// T5 relative attention bias (Raffel et al. 2020): bias B[bucket(m - n), h] from a learned
// table shared by all layers, with HF's causal bucketing (T5Attention._relative_position_bucket,
// bidirectional=False): exact below num_buckets/2, log-spaced up to max_distance, then the last.
#include <algorithm>
#include <cmath>

#include "attention/plugins.hpp"

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
  void add_bias(float* scores, int, int head, int query_pos, int key0, int n_keys) const override {
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

constexpr const char* kBiasTable = "model.relative_attention_bias.weight";  // [num_buckets, n_heads]

struct T5Config final : SchemeConfig {
  int num_buckets = 32;
  int max_distance = 128;
  const char* type() const override { return "t5"; }
  SchemeKind kind() const override { return SchemeKind::Bias; }
  nlohmann::json to_json() const override {
    return {{"type", type()}, {"num_buckets", num_buckets}, {"max_distance", max_distance}};
  }
  std::string describe(int) const override {
    return "T5 relative bias (Raffel et al. 2020): learned per head, " + std::to_string(num_buckets) +
           " causal buckets, log-spaced up to distance " + std::to_string(max_distance);
  }
  std::vector<ExpectedTensor> tensors(const ModelConfig& c) const override { return {{kBiasTable, {num_buckets, c.n_heads}}}; }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override {
    return std::make_unique<T5>(tensors(kBiasTable), c.n_heads, num_buckets, max_distance);
  }
};
}  // namespace

std::shared_ptr<const SchemeConfig> parse_t5(Fields& f, const PluginContext&) {
  auto c = std::make_shared<T5Config>();
  c->num_buckets = f.positive("num_buckets", 4096, 32);
  c->max_distance = f.positive("max_distance", kMaxCount, 128);
  // HF's causal bucketing: exact below num_buckets/2, log-spaced up to max_distance.
  if (c->num_buckets < 2) f.fail("num_buckets", "must be at least 2");
  if (c->max_distance <= c->num_buckets / 2)
    f.fail("max_distance", "must exceed num_buckets / 2 = " + std::to_string(c->num_buckets / 2) + ", got " +
                               std::to_string(c->max_distance));
  return c;
}

}  // namespace pert
