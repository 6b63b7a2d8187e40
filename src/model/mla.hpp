// Multi-head latent attention's front and back ends (DeepSeek V2/V3; ModelConfig::mla), around
// pert's one attention kernel, with the cache MLA is made for: per position, the rope key and
// the latent c (kv_lora_rank, normalised), one kv head [k_rope | c] that every head reads.
//   HF expands c per head, k_nope = W_k c and v = W_v c (kv_b_proj's rows), and scores
//   q_rope·k_rope + q_nope·k_nope. Since q_nope·(W_k c) = (W_kᵀ q_nope)·c, each head's query
//   becomes [q_rope | W_kᵀ q_nope] (W_k absorbed), its scores read the cached row as it is, and
//   its weighted sum of the rows' latents, expanded once by W_v, is HF's weighted sum of values.
// The kernel's values are the keys' rows (Attention reads them from the key cache): the output's
// first qk_rope_head_dim values are a sum of rope keys, dropped. RoPE turns the rope dims, which
// pert keeps first (rotary_dim = qk_rope_head_dim).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/weights.hpp"
#include "pert/config.hpp"

namespace pert {

// "model.layers.N.self_attn.<part>.weight": q_proj, q_a_proj, q_a_layernorm, q_b_proj,
// kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj.
std::string mla_tensor(int layer, const char* part);
// The tensors MLA needs in layer N (model_dir.cpp's expected tensors): name and shape.
std::vector<std::pair<std::string, std::vector<int64_t>>> mla_tensors(const ModelConfig& c, int layer);
// A config whose positions turn other dims than the rope key's (a rotary_dim of the latent's
// width) would rotate the cached latent: refused, naming `source`.
void require_mla_rotation(const ModelConfig& c, const std::string& source);

// kv_b_proj [n_heads][nope + v][kv_lora_rank] -> each head's k_nope rows transposed,
// [n_heads][kv_lora_rank][nope] (MlaWeights::k_absorb), made once at load.
std::vector<float> mla_absorbed_keys(const float* kv_b, const ModelConfig& c);

// The scratch of one inference state for `rows` tokens (no allocation per step).
class MlaBlock {
 public:
  MlaBlock(const ModelConfig& config, int rows);
  // q [rows][n_heads][head_dim] (each head's [q_rope | W_kᵀ q_nope]) and the cache's row
  // k [rows][head_dim] = [k_rope | c] from x [rows][d], normalised; v a copy of k (the values
  // when Attention keeps them apart: a method that scales keys).
  void project(const MlaWeights& w, const float* x, int rows, float* q, float* k, float* v);
  // att [rows][n_heads][head_dim] -> [rows][n_heads·v_head_dim]: each head's latent part × W_vᵀ.
  const float* expand(const MlaWeights& w, const float* att, int rows);
  int output_width() const { return c_.n_heads * c_.mla.v_head_dim; }  // o_proj's input

 private:
  const ModelConfig& c_;
  std::vector<float> q_low_, q_full_;  // [rows][q_lora_rank], [rows][n_heads·qk_head_dim] as HF orders heads (nope | rope)
  std::vector<float> kv_low_;          // [rows][kv_lora_rank + qk_rope_head_dim]
  std::vector<float> head_in_, head_out_;  // [rows][max(nope, kv_lora_rank)], [rows][max(kv_lora_rank, v)]: one head's
  std::vector<float> out_;             // [rows][n_heads·v_head_dim]
};

// The layer's MLA matrices one token multiplies, each as f(weight, N, K) (model.cpp's counts):
// q's, kv_a, and kv_b's F32 parts (k_nope rows transposed, v rows).
void mla_matrices(const MlaWeights& w, const ModelConfig& c, const std::function<void(const Weight&, int, int)>& f);

}  // namespace pert
