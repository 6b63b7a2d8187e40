// Forgetting Transformer, FoX (Lin et al., ICLR 2025; github.com/zhixuan-lin/forgetting-transformer):
// per layer and head a forget gate f_t = σ(w_h·x_t + b_h), x_t the layer's normed input (the
// authors' ForgettingAttentionLayer projects the hidden states its block's attn_norm gives it,
// as q, k and v are). The score of query m on key n gains Σ_{n<l<=m} ln f_l = c_m − c_n with
// c_m = Σ_{l<=m} ln f_l; no positional embedding (the paper's default, use_rope false).
// The gate is hook 5: this file gives ln f per token; the attention (attention.cpp) keeps the
// running sums beside each cached key, and the kernel adds c_m − c_n in its mask-and-bias step.
// Weights: model.layers.N.self_attn.fgate_proj.weight [n_heads][hidden] and .bias [n_heads]
// (the authors' HF-style names are model.layers.N.attn.fgate_proj.*; pert spells the attention
// block self_attn, as every llama-layout checkpoint does).
#include <algorithm>
#include <cmath>

#include "attention/plugins.hpp"
#include "model/tensor_names.hpp"

namespace pert {

namespace {

std::string fgate_tensor(int layer, const char* kind) {
  return tensor_names::layer_prefix(std::to_string(layer)) + "self_attn.fgate_proj." + kind;
}

class Fox final : public PositionEncoding {
 public:
  Fox(const ModelConfig& c, const TensorLookup& tensors) : n_heads_(c.n_heads), hidden_(c.hidden_size) {
    for (int l = 0; l < c.n_layers; ++l) {
      weight_.push_back(tensors(fgate_tensor(l, "weight")));
      bias_.push_back(tensors(fgate_tensor(l, "bias")));
    }
  }
  bool has_forget_gates() const override { return true; }
  void log_forget_gates(float* out, const float* x, int n, int layer) const override {
    const float* w = weight_[size_t(layer)];
    const float* b = bias_[size_t(layer)];
    for (int t = 0; t < n; ++t) {
      float* row = out + size_t(t) * size_t(n_heads_);
      const float* xt = x + size_t(t) * size_t(hidden_);
      for (int h = 0; h < n_heads_; ++h) {
        // z = w_h·x + b_h, a loop of its own: the gates are a few dot products a token, and the
        // plug-ins stay apart from the kernels (the fuzzers link the parsers without them)
        double z = double(b[h]);
        for (int k = 0; k < hidden_; ++k) z += double(w[size_t(h) * size_t(hidden_) + size_t(k)]) * double(xt[k]);
        // ln σ(z) = −softplus(−z) = min(z, 0) − ln(1 + e^−|z|): no overflow for any z
        row[h] = float(std::min(z, 0.0) - std::log1p(std::exp(-std::fabs(z))));
      }
    }
  }
  // A shift would drop the discarded tokens' gates from every later key's sum; the tokens are
  // re-encoded instead (InferenceState::shift).
  bool can_shift() const override { return false; }

 private:
  int n_heads_, hidden_;
  std::vector<const float*> weight_, bias_;  // [layer]: [n_heads][hidden], [n_heads]
};

struct FoxConfig final : SchemeConfig {
  const char* type() const override { return "fox"; }
  SchemeKind kind() const override { return SchemeKind::Bias; }
  // Its distance is the gates' sum over the tokens between key and query (kept as running sums
  // over every token seen): a method that re-indexes positions would leave it as it is.
  bool positions_from_content() const override { return true; }
  nlohmann::json to_json() const override { return {{"type", type()}}; }
  std::string describe(int) const override {
    return "FoX (Lin et al. 2025): forget gates sigmoid(w.x + b) per head and layer; a score gains the sum of the log-gates "
           "between its key and query";
  }
  std::string profile_note() const override { return "FoX's gates read a zero input, σ(bias) each"; }
  std::vector<ExpectedTensor> tensors(const ModelConfig& c) const override {
    std::vector<ExpectedTensor> out;
    for (int l = 0; l < c.n_layers; ++l) {
      out.push_back({fgate_tensor(l, "weight"), {c.n_heads, c.hidden_size}});
      out.push_back({fgate_tensor(l, "bias"), {c.n_heads}});
    }
    return out;
  }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override {
    return std::make_unique<Fox>(c, tensors);
  }
};

}  // namespace

std::shared_ptr<const SchemeConfig> parse_fox(Fields&, const PluginContext&) { return std::make_shared<FoxConfig>(); }

}  // namespace pert
