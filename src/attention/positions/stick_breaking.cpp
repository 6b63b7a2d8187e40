// Stick-breaking attention (Tan et al., ICLR 2025, "Scaling Stick-Breaking Attention"; the
// authors' code: github.com/shawntan/stickbreaking-attention). No softmax and no positional
// embedding: with β_mn = σ(z_mn), z the scaled score, key n < m of query m weighs
//   β_mn · Π_{n<k<m} (1 − β_mk)
// so the nearest key that matches takes the mass first. As the authors' kernel runs by default
// (sb_attn's attend_current = False; their decoding reads k[..., :-1]) the query's own key is
// not one of the sticks, and what the sticks leave, Π_{k<m} (1 − β_mk) (their `rem`), goes to
// the query's own value, as their reference test composes the output (o + rem·v). So a
// query's weights sum to 1, its own key taking the remainder. (IBM's dolomite models give the
// remainder to a learned vector per head instead and GroupNorm the heads: not this scheme.)
// The weights are hook 6: the kernel calls stick_breaking_weights() where it would take a softmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/attention.hpp"
#include "attention/plugins.hpp"

namespace pert {

// One pass from the nearest key outwards, in log space: `left` = ln Π (1 − β) over the keys
// passed so far (the stick still unbroken), ln σ(±z) = min(±z, 0) − ln(1 + e^−|z|) (no overflow).
void stick_breaking_weights(float* row, int seen) {
  double left = 0.0;
  for (int j = seen - 2; j >= 0; --j) {
    const float z = row[j];
    if (z == -std::numeric_limits<float>::infinity()) {  // a key the query does not see: β = 0
      row[j] = 0.0f;
      continue;
    }
    const float t = std::log1p(std::exp(-std::fabs(z)));
    row[j] = float(std::exp(double(std::min(z, 0.0f) - t) + left));
    left += double(std::min(-z, 0.0f) - t);
  }
  row[seen - 1] = float(std::exp(left));  // the query's own key: what is left
}

namespace {

class StickBreaking final : public PositionEncoding {
 public:
  bool stick_breaking() const override { return true; }
};

struct StickBreakingConfig final : SchemeConfig {
  const char* type() const override { return "stick_breaking"; }
  // No positions: order comes from the breaking, nearest key first (like NoPE for "extend").
  SchemeKind kind() const override { return SchemeKind::None; }
  nlohmann::json to_json() const override { return {{"type", type()}}; }
  std::string describe(int) const override {
    return "stick-breaking attention (Tan et al. 2025): key n takes sigmoid(score) of what nearer keys left; the query's "
           "own key takes the rest";
  }
  std::string profile_note() const override { return "stick-breaking's weights are not a softmax of these logits"; }
  std::unique_ptr<PositionEncoding> make(const ModelConfig&, const TensorLookup&) const override {
    return std::make_unique<StickBreaking>();
  }
};

}  // namespace

std::shared_ptr<const SchemeConfig> parse_stick_breaking(Fields&, const PluginContext&) {
  return std::make_shared<StickBreakingConfig>();
}

}  // namespace pert
