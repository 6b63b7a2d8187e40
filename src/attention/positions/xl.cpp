// Transformer-XL relative attention (Dai et al. 2019, eq. (8); XLNet's too): the score of query
// m, key n <= m is (q_m·k_n + u·k_n + q_m·W_R R_{m−n} + v·W_R R_{m−n}) / √head_dim, with R_δ the
// sinusoids of the model width at distance δ (sines of δ·10000^(−2i/d), then cosines), W_R
// (`r_net`) a projection per layer, and u, v (`r_w_bias`, `r_r_bias`) learned per head and shared
// by the layers, as Transformer-XL's code shares them by default. The kernel computes q·k; this
// hook adds the other three terms.
#include <cmath>

#include "attention/plugins.hpp"
#include "model/tensor_names.hpp"
#include "pert/memory.hpp"

namespace pert {

namespace {

constexpr const char* kU = "model.xl.r_w_bias";  // [heads, head_dim]
constexpr const char* kV = "model.xl.r_r_bias";

std::string r_net_name(int layer) { return tensor_names::layer_prefix(std::to_string(layer)) + "self_attn.xl.r_net.weight"; }

class XL final : public PositionEncoding {
 public:
  XL(const ModelConfig& c, const TensorLookup& tensors)
      : n_layers_(c.n_layers), n_heads_(c.n_heads), hd_(c.head_dim), width_(c.hidden_size),
        u_(tensors(kU)), v_(tensors(kV)) {
    for (int l = 0; l < c.n_layers; ++l) r_net_.push_back(tensors(r_net_name(l)));
  }
  // W_R R_δ for every layer, head and distance of the context (reserve), or that this forward
  // can meet (up to its last position), grown by doubling: [layer][head][distance][head_dim].
  void reserve(int positions) override { grow(size_t(positions)); }
  void begin_forward(int, int pos0, int n) override { grow(size_t(pos0) + size_t(n)); }
  bool has_relative_terms() const override { return true; }
  void add_relative_terms(float* scores, int layer, int head, int query_pos, const float* q, const float* keys, int key0,
                          int n_keys, float scale) const override {
    const float* u = u_ + size_t(head) * hd_;
    const float* v = v_ + size_t(head) * hd_;
    const float* table = table_.data() + (size_t(layer) * n_heads_ + size_t(head)) * distances_ * hd_;
    for (int i = 0; i < n_keys; ++i) {
      const float* k = keys + size_t(i) * hd_;
      const float* r = table + size_t(query_pos - key0 - i) * hd_;  // W_R R_{m−n}
      float sum = 0.0f;
      for (int j = 0; j < hd_; ++j) sum += u[j] * k[j] + (q[j] + v[j]) * r[j];
      scores[i] += scale * sum;
    }
  }

 private:
  int n_layers_, n_heads_, hd_, width_;
  const float* u_;                   // [heads][head_dim]
  const float* v_;                   // [heads][head_dim]
  std::vector<const float*> r_net_;  // [layer] -> [heads · head_dim][width]
  size_t distances_ = 0;
  std::vector<float> table_;         // [layer][head][distances_][head_dim]

  void grow(size_t need) {
    if (need <= distances_) return;
    const size_t grown = std::max(need, 2 * distances_), heads = size_t(n_layers_) * size_t(n_heads_);
    require_memory(4.0 * double(grown) * double(heads * hd_ + width_),
                   "xl's table of projected relative positions (" + std::to_string(grown) + " distances)");
    std::vector<float> r(grown * size_t(width_));  // [distance][width]: R_δ
    for (size_t d = 0; d < grown; ++d)
      for (int i = 0; i < width_ / 2; ++i) {
        const double angle = double(d) / std::pow(10000.0, 2.0 * i / width_);
        r[d * width_ + size_t(i)] = float(std::sin(angle));
        r[d * width_ + size_t(width_ / 2 + i)] = float(std::cos(angle));
      }
    // W_R R_δ: a dot product over the width per (layer, output, distance), once per context (no
    // BLAS here: the parsers' fuzz build links this file without it).
    table_.assign(heads * grown * size_t(hd_), 0.0f);
#pragma omp parallel for schedule(static)
    for (ptrdiff_t d = 0; d < ptrdiff_t(grown); ++d)
      for (int l = 0; l < n_layers_; ++l)
        for (int o = 0; o < n_heads_ * hd_; ++o) {
          const float* w = r_net_[size_t(l)] + size_t(o) * width_;
          const float* rd = &r[size_t(d) * width_];
          float sum = 0.0f;
          for (int i = 0; i < width_; ++i) sum += w[i] * rd[i];
          table_[((size_t(l) * n_heads_ + size_t(o / hd_)) * grown + size_t(d)) * hd_ + size_t(o % hd_)] = sum;
        }
    distances_ = grown;
  }
};

struct XLConfig final : SchemeConfig {
  const char* type() const override { return "xl"; }
  SchemeKind kind() const override { return SchemeKind::Bias; }
  nlohmann::json to_json() const override { return {{"type", type()}}; }
  std::string describe(int) const override {
    return "Transformer-XL relative attention (Dai et al. 2019): q.k + u.k + (q + v).W_R R(m - n), sinusoidal R, "
           "learned u, v per head and W_R per layer";
  }
  std::vector<ExpectedTensor> tensors(const ModelConfig& c) const override {
    std::vector<ExpectedTensor> out = {{kU, {c.n_heads, c.head_dim}}, {kV, {c.n_heads, c.head_dim}}};
    for (int l = 0; l < c.n_layers; ++l) out.push_back({r_net_name(l), {int64_t(c.n_heads) * c.head_dim, c.hidden_size}});
    return out;
  }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override {
    return std::make_unique<XL>(c, tensors);
  }
};

}  // namespace

std::shared_ptr<const SchemeConfig> parse_xl(Fields& f, const PluginContext& context) {
  if (context.model.hidden_size % 2 != 0)
    f.fail("type", "xl needs an even hidden_size (sines and cosines of the model width), got " +
                       std::to_string(context.model.hidden_size));
  return std::make_shared<XLConfig>();
}

}  // namespace pert
