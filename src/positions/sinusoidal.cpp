// Sinusoidal absolute positions (Vaswani et al. 2017, §3.5):
//   PE(m, 2i) = sin(m / base^(2i/d)),  PE(m, 2i+1) = cos(m / base^(2i/d)),
// added to the token embeddings after scaling them by embed_scale.
#include <cmath>

#include "schemes.hpp"

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
}  // namespace

std::unique_ptr<PositionEncoding> make_sinusoidal(const ModelConfig& c, const TensorLookup&) {
  return std::make_unique<Sinusoidal>(c.hidden_size, c.position.base, c.position.embed_scale);
}

}  // namespace pert
