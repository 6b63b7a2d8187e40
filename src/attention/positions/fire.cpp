// FIRE (Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long Context
// Transformers"): the score of query m, key n <= m gets f(ψ(m − n) / (ψ(max(m, L)) + eps)) in
// head h, where ψ(x) = log(|c|·x + 1), L = |threshold|, and f: R → R^heads is an MLP with one
// hidden ReLU layer shared by the heads. c, L and f are learned, per layer. Positions are
// 0-based, as in the paper's progressive interpolation (the normaliser is the query's own
// position once past L).
#include <algorithm>
#include <cmath>

#include "attention/plugins.hpp"
#include "model/tensor_names.hpp"

namespace pert {

namespace {

std::string fire_tensor(int layer, const std::string& which) {
  return tensor_names::layer_prefix(std::to_string(layer)) + "self_attn.fire." + which;
}

class Fire final : public PositionEncoding {
 public:
  Fire(const ModelConfig& c, const TensorLookup& tensors, int width, double eps)
      : width_(width), eps_(eps) {
    for (int l = 0; l < c.n_layers; ++l) {
      auto read = [&](const std::string& which, size_t n) {
        const float* t = tensors(fire_tensor(l, which));
        return std::vector<float>(t, t + n);
      };
      const size_t w = size_t(width), h = size_t(c.n_heads);
      layers_.push_back({std::fabs(double(read("c", 1)[0])), std::fabs(double(read("threshold", 1)[0])),
                         read("mlp.0.weight", w), read("mlp.0.bias", w), read("mlp.2.weight", h * w), read("mlp.2.bias", h)});
    }
  }
  bool has_bias() const override { return true; }
  void add_bias(float* scores, int layer, int head, int query_pos, int key0, int n_keys) const override {
    const Layer& p = layers_[size_t(layer)];
    const double inverse_norm = 1.0 / (std::log1p(p.c * std::max(double(query_pos), p.threshold)) + eps_);
    const float* w2 = p.w2.data() + size_t(head) * size_t(width_);
    for (int i = 0; i < n_keys; ++i) {
      const float u = float(std::log1p(p.c * double(query_pos - key0 - i)) * inverse_norm);
      float out = p.b2[size_t(head)];
      for (int j = 0; j < width_; ++j) out += w2[j] * std::max(0.0f, p.w1[size_t(j)] * u + p.b1[size_t(j)]);
      scores[i] += out;
    }
  }

 private:
  struct Layer {
    double c, threshold;             // |c|, L = |threshold|
    std::vector<float> w1, b1;       // [width] (the first layer's weight is [width][1])
    std::vector<float> w2, b2;       // [heads][width], [heads]
  };
  int width_;
  double eps_;
  std::vector<Layer> layers_;  // [layer]
};

struct FireConfig final : SchemeConfig {
  int width = 32;
  double eps = 1e-6;
  const char* type() const override { return "fire"; }
  SchemeKind kind() const override { return SchemeKind::Bias; }
  nlohmann::json to_json() const override { return {{"type", type()}, {"width", width}, {"eps", eps}}; }
  std::string describe(int) const override {
    return "FIRE (Li et al. 2023): bias f(psi(distance) / psi(max(query position, L))), psi(x) = log(|c|x + 1), f an MLP of " +
           std::to_string(width) + " ReLU units, c, L and f learned per layer";
  }
  std::vector<ExpectedTensor> tensors(const ModelConfig& c) const override {
    std::vector<ExpectedTensor> out;
    for (int l = 0; l < c.n_layers; ++l) {
      out.push_back({fire_tensor(l, "c"), {1}});
      out.push_back({fire_tensor(l, "threshold"), {1}});
      out.push_back({fire_tensor(l, "mlp.0.weight"), {width, 1}});
      out.push_back({fire_tensor(l, "mlp.0.bias"), {width}});
      out.push_back({fire_tensor(l, "mlp.2.weight"), {c.n_heads, width}});
      out.push_back({fire_tensor(l, "mlp.2.bias"), {c.n_heads}});
    }
    return out;
  }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override {
    return std::make_unique<Fire>(c, tensors, width, eps);
  }
};

}  // namespace

std::shared_ptr<const SchemeConfig> parse_fire(Fields& f, const PluginContext&) {
  auto c = std::make_shared<FireConfig>();
  c->width = f.positive("width", 4096, 32);
  c->eps = f.number("eps", 1e-6, [](double x) { return x > 0; }, "must be > 0");
  return c;
}

}  // namespace pert
