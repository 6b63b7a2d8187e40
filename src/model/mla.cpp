// Multi-head latent attention's projections (mla.hpp), from HF's DeepseekV3Attention.
#include "mla.hpp"

#include <algorithm>
#include <cstring>

#include "architectures/architecture.hpp"

namespace pert {

MlaBlock::MlaBlock(const ModelConfig& c, int rows) : c_(c) {
  const MlaConfig& m = c.mla;
  const size_t R = size_t(rows), H = size_t(c.n_heads);
  q_low_.resize(R * size_t(m.q_lora_rank));
  q_full_.resize(R * H * size_t(c.head_dim));
  kv_low_.resize(R * size_t(m.kv_lora_rank + m.qk_rope_head_dim));
  latent_.resize(R * size_t(m.kv_lora_rank));
  kv_full_.resize(R * H * size_t(m.qk_nope_head_dim + m.v_head_dim));
}

void MlaBlock::project(const MlaWeights& w, const float* x, int rows, float* q, float* k, float* v) {
  const MlaConfig& m = c_.mla;
  const int d = c_.hidden_size, H = c_.n_heads, hd = c_.head_dim;
  const int rope = m.qk_rope_head_dim, nope = m.qk_nope_head_dim, vd = m.v_head_dim, latent = m.kv_lora_rank;
  const float eps = float(c_.rms_norm_eps);
  // q: q_proj, or q_b_proj(rmsnorm(q_a_proj(x))); each head [nope | rope]
  if (m.q_lora_rank > 0) {
    matmul(q_low_.data(), x, w.q_a, rows, d, m.q_lora_rank);
    rmsnorm(q_low_.data(), q_low_.data(), w.q_a_norm, rows, m.q_lora_rank, eps);
    matmul(q_full_.data(), q_low_.data(), w.q_b, rows, m.q_lora_rank, H * hd);
  } else {
    matmul(q_full_.data(), x, w.q, rows, d, H * hd);
  }
  // the latent [kv_lora_rank] (normalised) and the one rope key [rope]; kv_b_proj: each head [k_nope | v]
  const int low = latent + rope, wide = nope + vd;
  matmul(kv_low_.data(), x, w.kv_a, rows, d, low);
  for (int r = 0; r < rows; ++r)  // (row by row: each row's rope key follows its latent)
    rmsnorm(&latent_[size_t(r) * latent], &kv_low_[size_t(r) * low], w.kv_a_norm, 1, latent, eps);
  matmul(kv_full_.data(), latent_.data(), w.kv_b, rows, latent, H * wide);
  for (int r = 0; r < rows; ++r) {
    const float* k_rope = &kv_low_[size_t(r) * low + latent];
    for (int h = 0; h < H; ++h) {
      const size_t head = (size_t(r) * H + h) * hd;
      const float* qh = &q_full_[head];  // HF's [nope | rope] -> pert's [rope | nope]
      std::copy(qh + nope, qh + nope + rope, q + head);
      std::copy(qh, qh + nope, q + head + rope);
      const float* kv = &kv_full_[(size_t(r) * H + h) * wide];
      std::copy(k_rope, k_rope + rope, k + head);
      std::copy(kv, kv + nope, k + head + rope);
      std::copy(kv + nope, kv + wide, v + head);
      std::fill(v + head + vd, v + head + hd, 0.0f);
    }
  }
}

void MlaBlock::compact(float* att, int rows) const {
  const int H = c_.n_heads, hd = c_.head_dim, vd = c_.mla.v_head_dim;
  if (vd == hd) return;
  // forward in place: each head's first vd values move down (never over what is still to be read)
  for (size_t i = 0; i < size_t(rows) * size_t(H); ++i) std::memmove(att + i * vd, att + i * hd, size_t(vd) * sizeof(float));
}

size_t mla_weight_bytes(const MlaWeights& w, const ModelConfig& c) {
  const MlaConfig& m = c.mla;
  const int d = c.hidden_size, H = c.n_heads, hd = c.head_dim;
  size_t bytes = m.q_lora_rank > 0 ? weight_bytes(w.q_a, m.q_lora_rank, d) + weight_bytes(w.q_b, H * hd, m.q_lora_rank)
                                   : weight_bytes(w.q, H * hd, d);
  return bytes + weight_bytes(w.kv_a, m.kv_lora_rank + m.qk_rope_head_dim, d) +
         weight_bytes(w.kv_b, H * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank);
}

}  // namespace pert
