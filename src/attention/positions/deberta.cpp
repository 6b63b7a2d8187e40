// DeBERTa's disentangled attention (He et al. 2021, eq. (4)): the score of query m, key n is
// (q_m·k_n + q_m·K_r[i] + k_n·Q_r[i]) / √(3·head_dim), i = clamp(m − n + k, 0, 2k − 1), with
// P the relative embeddings [2k, width] shared by the layers, K_r = P·W_kr^T and
// Q_r = P·W_qr^T + b_qr per layer (HF's pos_proj and pos_q_proj; k = max_relative_positions).
// The position-to-content term is indexed as microsoft/DeBERTa's code and HF's
// DisentangledSelfAttention index it (by m − n, the index of the content-to-position term),
// which is what DeBERTa checkpoints compute; eq. (4) writes δ(n, m). In a causal decoder only
// rows k..2k−1 of P are read; distances from k − 1 on share the last.
#include <algorithm>

#include "attention/plugins.hpp"
#include "model/tensor_names.hpp"

namespace pert {

namespace {

constexpr const char* kRelative = "model.rel_embeddings.weight";  // [2k, width]

std::string proj_name(int layer, const char* which) {
  return tensor_names::layer_prefix(std::to_string(layer)) + "self_attn." + which;
}

class Deberta final : public PositionEncoding {
 public:
  Deberta(const ModelConfig& c, const TensorLookup& tensors, int span)
      : n_heads_(c.n_heads), hd_(c.head_dim), span_(span) {
    // K_r and Q_r for the rows a causal decoder reads (k..2k−1), [layer][head][k][head_dim].
    const float* P = tensors(kRelative);
    const int width = c.hidden_size;
    for (int l = 0; l < c.n_layers; ++l) {
      const float* wk = tensors(proj_name(l, "pos_key_proj.weight"));
      const float* wq = tensors(proj_name(l, "pos_query_proj.weight"));
      const float* bq = tensors(proj_name(l, "pos_query_proj.bias"));
      for (int h = 0; h < c.n_heads; ++h)
        for (int r = 0; r < span; ++r) {
          const float* p = P + size_t(span + r) * width;  // row k + r: distance r
          for (int j = 0; j < hd_; ++j) {
            const int o = h * hd_ + j;
            double key = 0, query = bq[o];
            for (int i = 0; i < width; ++i) {
              key += double(wk[size_t(o) * width + i]) * p[i];
              query += double(wq[size_t(o) * width + i]) * p[i];
            }
            key_rel_.push_back(float(key));
            query_rel_.push_back(float(query));
          }
        }
    }
  }
  bool has_relative_terms() const override { return true; }
  int score_terms() const override { return 3; }
  void add_relative_terms(float* scores, int layer, int head, int query_pos, const float* q, const float* keys, int key0,
                          int n_keys, float scale) const override {
    const size_t at = (size_t(layer) * n_heads_ + size_t(head)) * size_t(span_) * hd_;
    for (int i = 0; i < n_keys; ++i) {
      const int r = std::min(query_pos - key0 - i, span_ - 1);  // row span_ + r of P
      const float* kr = &key_rel_[at + size_t(r) * hd_];
      const float* qr = &query_rel_[at + size_t(r) * hd_];
      const float* k = keys + size_t(i) * hd_;
      float sum = 0.0f;
      for (int j = 0; j < hd_; ++j) sum += q[j] * kr[j] + k[j] * qr[j];
      scores[i] += scale * sum;
    }
  }

 private:
  int n_heads_, hd_, span_;
  std::vector<float> key_rel_, query_rel_;  // [layer][head][span][head_dim]: K_r, Q_r at distances 0..k−1
};

struct DebertaConfig final : SchemeConfig {
  int span = 0;
  const char* type() const override { return "deberta"; }
  SchemeKind kind() const override { return SchemeKind::Bias; }
  nlohmann::json to_json() const override { return {{"type", type()}, {"max_relative_positions", span}}; }
  std::string describe(int) const override {
    return "DeBERTa disentangled attention (He et al. 2021): q.k + q.K_r + k.Q_r over sqrt(3 d), relative distances "
           "clipped at " + std::to_string(span - 1);
  }
  std::vector<ExpectedTensor> tensors(const ModelConfig& c) const override {
    const int64_t out = int64_t(c.n_heads) * c.head_dim;
    std::vector<ExpectedTensor> t = {{kRelative, {2 * int64_t(span), c.hidden_size}}};
    for (int l = 0; l < c.n_layers; ++l) {
      t.push_back({proj_name(l, "pos_key_proj.weight"), {out, c.hidden_size}});
      t.push_back({proj_name(l, "pos_query_proj.weight"), {out, c.hidden_size}});
      t.push_back({proj_name(l, "pos_query_proj.bias"), {out}});
    }
    return t;
  }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override {
    return std::make_unique<Deberta>(c, tensors, span);
  }
};

}  // namespace

std::shared_ptr<const SchemeConfig> parse_deberta(Fields& f, const PluginContext& context) {
  auto c = std::make_shared<DebertaConfig>();
  c->span = f.positive("max_relative_positions", 1 << 20, context.trained);
  return c;
}

}  // namespace pert
