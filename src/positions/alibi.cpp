// ALiBi (Press et al. 2022): bias -slope_h * (m - n) on the score of query m, key n <= m.
// Slopes as in the paper's repository and BLOOM's build_alibi_tensor, for any head count.
#include <cmath>

#include "schemes.hpp"

namespace pert {

std::vector<double> alibi_slopes(int n_heads, double max_bias) {
  int p = 1;  // largest power of two <= n_heads
  while (p * 2 <= n_heads) p *= 2;
  const double m0 = std::pow(2.0, -max_bias / p), m1 = std::pow(2.0, -max_bias / (2.0 * p));
  std::vector<double> slopes;
  for (int h = 0; h < n_heads; ++h) slopes.push_back(h < p ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - p) + 1));
  return slopes;
}

namespace {
class Alibi final : public PositionEncoding {
 public:
  explicit Alibi(std::vector<double> slopes) : slopes_(slopes.begin(), slopes.end()) {}
  bool has_bias() const override { return true; }
  void add_bias(float* scores, int head, int query_pos, int key0, int n_keys) const override {
    const float slope = slopes_[size_t(head)];
    for (int i = 0; i < n_keys; ++i) scores[i] -= slope * float(query_pos - key0 - i);
  }

 private:
  std::vector<float> slopes_;  // [n_heads]
};
}  // namespace

std::unique_ptr<PositionEncoding> make_alibi(const ModelConfig& c, const TensorLookup&) {
  return std::make_unique<Alibi>(alibi_slopes(c.n_heads, c.position.max_bias));
}

}  // namespace pert
