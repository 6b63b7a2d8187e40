// Multi-head latent attention's front end (DeepSeek V2/V3; ModelConfig::mla): from the normalised
// input, each head's query and the key and value that pert's one attention kernel and cache take.
// A head's key is [k_rope | k_nope] (head_dim = qk_rope_head_dim + qk_nope_head_dim): the rope
// part first, where the model's partial RoPE (rotary_dim = qk_rope_head_dim) turns it; the query
// likewise. The value is [v | 0] padded to head_dim, so the attention's output per head is v's
// width followed by zeros, dropped (compact) before o_proj. The dot products are HF's, the
// dimensions in another order. pert caches these expanded heads, not MLA's latent (pert inspect).
#pragma once
#include <string>
#include <vector>

#include "pert/config.hpp"
#include "weights.hpp"

namespace pert {

// "model.layers.N.self_attn.<part>.weight": q_proj, q_a_proj, q_a_layernorm, q_b_proj,
// kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj.
std::string mla_tensor(int layer, const char* part);
// The tensors MLA needs in layer N (model_dir.cpp's expected tensors): name and shape.
std::vector<std::pair<std::string, std::vector<int64_t>>> mla_tensors(const ModelConfig& c, int layer);

// The scratch of one inference state for `rows` tokens (no allocation per step).
class MlaBlock {
 public:
  MlaBlock(const ModelConfig& config, int rows);
  // q [rows][n_heads][head_dim], k and v likewise (n_kv_heads = n_heads) from x [rows][d], normalised.
  void project(const MlaWeights& w, const float* x, int rows, float* q, float* k, float* v);
  // att [rows][n_heads][head_dim] -> [rows][n_heads·v_head_dim] in place (the padding dropped).
  void compact(float* att, int rows) const;
  int output_width() const { return c_.n_heads * c_.mla.v_head_dim; }  // o_proj's input

 private:
  const ModelConfig& c_;
  std::vector<float> q_low_, q_full_;  // [rows][q_lora_rank], [rows][n_heads·head_dim] as HF orders it (nope | rope)
  std::vector<float> kv_low_, kv_full_;  // [rows][kv_lora_rank + qk_rope_head_dim], [rows][n_heads·(nope + v)]
  std::vector<float> latent_;            // [rows][kv_lora_rank]: kv_low_'s latents, normalised
};

// The layer's MLA matrices and norms (model.cpp).
size_t mla_weight_bytes(const MlaWeights& w, const ModelConfig& c);

}  // namespace pert
