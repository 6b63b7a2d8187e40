// Contextual position encoding, CoPE (Golovneva et al. 2024, "Contextual Position Encoding:
// Learning to Count What's Important"; the authors' code: facebookresearch/RAM, projects/cope,
// ContextPosSelfAttn). Query m counts its keys from itself back with gates
//   g_mj = σ(z_mj),  z_mj = q_m·k_j · scale (the score, 0 gate where the query does not see j),
//   p_mj = Σ_{j<=k<=m} g_mk, capped at npos_max − 1,
// and the score of key j gains scale · q_m·e(p_mj), e(p) interpolated between the learned rows
// e[⌊p⌋] and e[⌈p⌉] of the layer's table (shared by its heads, as the authors' pos_emb is). The
// scale on the position logit is the authors' default (their --cope-nodiv off: the position
// logit joins q·k before the division by √head_dim); the paper's listing adds it unscaled.
// This is hook 7: the kernel calls add_contextual_positions() on each query's row of scores in
// its mask-and-bias step. Nothing is kept with the keys: the positions are counted afresh for
// each query, so decoding gives what a prefill gives, and a context shift (which drops keys and
// moves nothing) leaves them right.
// Weights: model.layers.N.self_attn.cope_pos_emb [npos_max][head_dim], row t = e[t] (the
// authors' pos_emb is [1][head_dim][npos], the same numbers transposed).
#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/plugins.hpp"
#include "model/tensor_names.hpp"

namespace pert {

namespace {

std::string cope_tensor(int layer) {
  return tensor_names::layer_prefix(std::to_string(layer)) + "self_attn.cope_pos_emb";
}

class Cope final : public PositionEncoding {
 public:
  Cope(const ModelConfig& c, const TensorLookup& tensors, int npos) : hd_(c.head_dim), npos_(npos) {
    for (int l = 0; l < c.n_layers; ++l) table_.push_back(tensors(cope_tensor(l)));
  }
  bool has_contextual_positions() const override { return true; }

  // One pass from the query's own key outwards. The positions only grow on the way (each gate
  // is at most 1, so ⌊p⌋ by at most 1 a key), so q·e[t] is taken once for each integer t the
  // count reaches, when it reaches it: at most min(npos_max, seen + 1) dots of head_dim, the
  // paper's "once per query" without a table of them.
  void add_contextual_positions(float* row, int seen, int layer, const float* q, float scale) const override {
    const float* e = table_[size_t(layer)];
    const int last = npos_ - 1;
    auto q_dot = [&](int t) {  // scale · q·e[t]
      const float* et = e + size_t(t) * size_t(hd_);
      double sum = 0;
      for (int i = 0; i < hd_; ++i) sum += double(q[i]) * double(et[i]);
      return sum * double(scale);
    };
    int t = 0;  // ⌊p⌋, whose dot and its successor's are held
    double at_t = q_dot(0), at_next = q_dot(std::min(1, last));
    double p = 0;
    for (int j = seen - 1; j >= 0; --j) {
      const float z = row[j];
      if (z == -std::numeric_limits<float>::infinity()) continue;  // unseen: gate 0, score stays −inf
      p = std::min(p + 1.0 / (1.0 + std::exp(-double(z))), double(last));
      while (t < int(p)) {  // (once per integer position reached)
        ++t;
        at_t = at_next;
        at_next = q_dot(std::min(t + 1, last));
      }
      const double w = p - double(t);  // the weight of e[⌈p⌉]; 0 at an integer p, where ⌈p⌉ = ⌊p⌋
      row[j] = float(double(z) + at_t + w * (at_next - at_t));
    }
  }

 private:
  int hd_, npos_;
  std::vector<const float*> table_;  // [layer]: [npos_max][head_dim]
};

struct CopeConfig final : SchemeConfig {
  int npos = 0;  // e[0..npos − 1]: positions are capped at npos − 1
  const char* type() const override { return "cope"; }
  // A bias on the scores, from counts of the content rather than distances.
  SchemeKind kind() const override { return SchemeKind::Bias; }
  bool positions_from_content() const override { return true; }
  nlohmann::json to_json() const override { return {{"type", type()}, {"npos_max", npos}}; }
  std::string describe(int) const override {
    return "CoPE (Golovneva et al. 2024): query m counts keys back with gates sigmoid(score); a score gains q.e(p), e "
           "interpolated between " + std::to_string(npos) + " learned positions per layer, capped at " +
           std::to_string(npos - 1);
  }
  std::string profile_note() const override { return "CoPE's gates read these constant scores, σ(q·k/√d) each"; }
  std::vector<ExpectedTensor> tensors(const ModelConfig& c) const override {
    std::vector<ExpectedTensor> out;
    for (int l = 0; l < c.n_layers; ++l) out.push_back({cope_tensor(l), {npos, c.head_dim}});
    return out;
  }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override {
    return std::make_unique<Cope>(c, tensors, npos);
  }
};

}  // namespace

// npos_max: the number of learned positions, by default L + 1 (the authors' default, their
// block size + 1: a count runs from 0 to L).
std::shared_ptr<const SchemeConfig> parse_cope(Fields& f, const PluginContext& context) {
  auto c = std::make_shared<CopeConfig>();
  c->npos = f.positive("npos_max", 1 << 20, context.trained + 1);
  return c;
}

}  // namespace pert
