// Sinusoidal absolute positions (Vaswani et al. 2017, §3.5):
//   PE(m, 2i) = sin(m / base^(2i/d)),  PE(m, 2i+1) = cos(m / base^(2i/d)),
// added to the token embeddings after scaling them by embed_scale.
#include <cmath>

#include "attention/plugins.hpp"

namespace pert {

namespace {
class Sinusoidal final : public PositionEncoding {
 public:
  Sinusoidal(int hidden, double base, double embed_scale) : hidden_(hidden), embed_scale_(float(embed_scale)) {
    for (int i = 0; 2 * i < hidden; ++i) inv_freq_.push_back(std::pow(base, -2.0 * i / hidden));
  }

  bool can_shift() const override { return false; }  // positions are in the token states

  void add_to_embeddings(float* x, int pos0, int n) const override {
    for (int t = 0; t < n; ++t) {
      float* xt = x + size_t(t) * hidden_;
      const double m = pos0 + t;
      for (size_t i = 0; i < inv_freq_.size(); ++i) {
        const double angle = m * inv_freq_[i];
        xt[2 * i] = xt[2 * i] * embed_scale_ + float(std::sin(angle));
        xt[2 * i + 1] = xt[2 * i + 1] * embed_scale_ + float(std::cos(angle));
      }
    }
  }

 private:
  int hidden_;
  float embed_scale_;
  std::vector<double> inv_freq_;  // [hidden / 2]
};

struct SinusoidalConfig final : SchemeConfig {
  double base = 10000.0;
  double embed_scale = 1.0;  // token embeddings are scaled by this first
  const char* type() const override { return "sinusoidal"; }
  SchemeKind kind() const override { return SchemeKind::Absolute; }
  nlohmann::json to_json() const override { return {{"type", type()}, {"base", base}, {"embed_scale", embed_scale}}; }
  std::string describe(int) const override {
    return "sinusoidal absolute embeddings (Vaswani et al. 2017), base " + number_text(base) +
           ", added to the token embeddings scaled by " + number_text(embed_scale);
  }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup&) const override {
    return std::make_unique<Sinusoidal>(c.hidden_size, base, embed_scale);
  }
};
}  // namespace

std::shared_ptr<const SchemeConfig> parse_sinusoidal(Fields& f, const PluginContext& context) {
  auto c = std::make_shared<SinusoidalConfig>();
  c->base = f.number("base", 10000.0, [](double x) { return x > 1.0; }, "must be > 1");
  c->embed_scale = f.number("embed_scale", 1.0, [](double x) { return x > 0; }, "must be > 0");
  if (context.model.hidden_size % 2)
    f.fail("type", "sinusoidal needs an even hidden_size, got " + std::to_string(context.model.hidden_size));
  return c;
}

}  // namespace pert
