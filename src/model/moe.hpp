// A mixture-of-experts block (ModelConfig::moe): the router's choice per token, then each
// expert's SwiGLU MLP over the tokens routed to it, as one product per expert (prefill groups the
// tokens; decoding reads only the routed experts' rows), summed by the router's weights.
#pragma once
#include <vector>

#include "model/weights.hpp"
#include "pert/config.hpp"

namespace pert {

// Each of `rows` tokens' chosen experts [rows][n_used] and their weights [rows][n_used], from its
// router logits [rows][n_experts] as MoeConfig::router says (the lower index first among equals);
// score_bias: DeepSeek's e_score_correction_bias [n_experts], or null. `scratch` is sized on first
// use and reused (a decoding step allocates nothing).
struct RouteScratch {
  std::vector<float> choice, group;  // [n_experts], [n_groups]: SigmoidGroups' scores
  std::vector<char> allowed;         // [n_experts]: in a kept group
  std::vector<int> kept;             // [topk_groups]
};
void route(const MoeConfig& moe, const float* logits, const float* score_bias, int rows, int* chosen, float* weights,
           RouteScratch& scratch);

// The scratch of one inference state, sized once for `rows` tokens (no allocation per step).
class MoeBlock {
 public:
  MoeBlock(const ModelConfig& config, int rows);
  // out[rows][d] (+)= the block's output for the normalised input x[rows][d].
  void forward(const MoeWeights& w, const float* x, int rows, float* out, bool accumulate);

 private:
  // y_[n][d] = e's MLP of the n rows of x (gate_, up_ as scratch).
  void mlp(const ExpertWeights& e, const float* x, int n, int width);

  const ModelConfig& c_;
  std::vector<float> logits_;             // [rows][n_experts]
  std::vector<int> chosen_;               // [rows][n_used]
  std::vector<float> weights_;            // [rows][n_used]
  std::vector<int> order_;                // [rows·n_used]: (row, slot) pairs grouped by expert
  std::vector<int> starts_;               // [n_experts + 1]: each expert's run in order_
  std::vector<float> x_, y_;              // [rows][d]: an expert's rows gathered, its output
  std::vector<float> gate_, up_;          // [rows][max(expert_ffn, shared_ffn)]
  std::vector<float> acc_;                // [rows][d]: the weighted sum, when not accumulating into out
  std::vector<float> shared_gate_;        // [rows]
  RouteScratch route_;
};

}  // namespace pert
