// ALiBi (Press et al. 2022): bias -slope_h * (m - n) on the score of query m, key n <= m.
// Slopes as in the paper's repository and BLOOM's build_alibi_tensor, for any head count.
#include <cmath>

#include "attention/plugins.hpp"

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
  void add_bias(float* scores, int, int head, int query_pos, int key0, int n_keys) const override {
    const float slope = slopes_[size_t(head)];
    for (int i = 0; i < n_keys; ++i) scores[i] -= slope * float(query_pos - key0 - i);
  }

 private:
  std::vector<float> slopes_;  // [n_heads]
};

struct AlibiConfig final : SchemeConfig {
  double max_bias = 8.0;
  const char* type() const override { return "alibi"; }
  SchemeKind kind() const override { return SchemeKind::Bias; }
  nlohmann::json to_json() const override { return {{"type", type()}, {"max_bias", max_bias}}; }
  std::string describe(int) const override {
    return "ALiBi (Press et al. 2022): per-head linear distance bias on the scores, max_bias " + number_text(max_bias);
  }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup&) const override {
    return std::make_unique<Alibi>(alibi_slopes(c.n_heads, max_bias));
  }
};
}  // namespace

std::shared_ptr<const SchemeConfig> parse_alibi(Fields& f, const PluginContext&) {
  auto c = std::make_shared<AlibiConfig>();
  c->max_bias = f.number("max_bias", 8.0, [](double x) { return x > 0; }, "must be > 0");
  return c;
}

}  // namespace pert
