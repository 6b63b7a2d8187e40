// KERPLE-log (Chi et al. 2022, "KERPLE: Kernelized Relative Positional Embedding for Length
// Extrapolation"): bias -r1·log(1 + r2·(m - n)) on the score of query m, key n <= m, with
// r1, r2 > 0 learned per head and per layer. As the paper's code (ParallelKerpleLog in
// chijames/KERPLE) does before every use, both are clamped to at least `eps` (0.01).
#include <algorithm>
#include <cmath>

#include "attention/plugins.hpp"
#include "model/tensor_names.hpp"

namespace pert {

namespace {

constexpr size_t kMaxTable = size_t(1) << 22;  // 16 MB of tabulated biases

std::string kerple_tensor(int layer, const char* which) {
  return tensor_names::layer_prefix(std::to_string(layer)) + "self_attn.kerple_" + which;
}

class Kerple final : public PositionEncoding {
 public:
  Kerple(const ModelConfig& c, const TensorLookup& tensors, double eps) : n_heads_(c.n_heads) {
    for (int l = 0; l < c.n_layers; ++l) {
      const float* r1 = tensors(kerple_tensor(l, "r1"));
      const float* r2 = tensors(kerple_tensor(l, "r2"));
      for (int h = 0; h < c.n_heads; ++h) {
        r1_.push_back(std::max(double(r1[h]), eps));
        r2_.push_back(std::max(double(r2[h]), eps));
      }
    }
  }
  // The bias by distance, tabulated for the context (reserve) or the distances this forward can
  // meet (at most its last position), so the kernel's inner loop reads instead of taking
  // logarithms. At most kMaxTable floats in all: distances past the table are computed.
  void reserve(int positions) override { grow(size_t(positions)); }
  void begin_forward(int, int pos0, int n) override { grow(size_t(pos0) + size_t(n)); }
  bool has_bias() const override { return true; }
  void add_bias(float* scores, int layer, int head, int query_pos, int key0, int n_keys) const override {
    const size_t lh = size_t(layer) * size_t(n_heads_) + size_t(head);
    const float* row = table_.data() + lh * distances_;
    for (int i = 0; i < n_keys; ++i) {
      const size_t d = size_t(query_pos - key0 - i);
      scores[i] += d < distances_ ? row[d] : float(bias(lh, double(d)));
    }
  }

 private:
  int n_heads_;
  std::vector<double> r1_, r2_;  // [layer][head], clamped
  size_t distances_ = 0;
  std::vector<float> table_;  // [layer][head][distances_]

  double bias(size_t lh, double distance) const { return -r1_[lh] * std::log1p(r2_[lh] * distance); }
  void grow(size_t distances) {
    const size_t cap = kMaxTable / r1_.size();
    const size_t need = std::min(distances, cap);
    if (need <= distances_) return;
    distances_ = std::min(std::max(need, 2 * distances_), cap);
    table_.resize(r1_.size() * distances_);
    for (size_t lh = 0; lh < r1_.size(); ++lh)
      for (size_t d = 0; d < distances_; ++d) table_[lh * distances_ + d] = float(bias(lh, double(d)));
  }
};

struct KerpleConfig final : SchemeConfig {
  double eps = 0.01;
  const char* type() const override { return "kerple"; }
  SchemeKind kind() const override { return SchemeKind::Bias; }
  nlohmann::json to_json() const override { return {{"type", type()}, {"eps", eps}}; }
  std::string describe(int) const override {
    return "KERPLE-log (Chi et al. 2022): bias -r1*log(1 + r2*distance), r1 and r2 learned per head and layer (at least " +
           number_text(eps) + ")";
  }
  std::vector<ExpectedTensor> tensors(const ModelConfig& c) const override {
    std::vector<ExpectedTensor> out;
    for (int l = 0; l < c.n_layers; ++l)
      for (const char* which : {"r1", "r2"}) out.push_back({kerple_tensor(l, which), {c.n_heads}});
    return out;
  }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override {
    return std::make_unique<Kerple>(c, tensors, eps);
  }
};

}  // namespace

std::shared_ptr<const SchemeConfig> parse_kerple(Fields& f, const PluginContext&) {
  auto c = std::make_shared<KerpleConfig>();
  c->eps = f.number("eps", 0.01, [](double x) { return x > 0; }, "must be > 0");
  return c;
}

}  // namespace pert
