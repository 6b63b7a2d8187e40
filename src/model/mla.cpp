// Multi-head latent attention's projections (mla.hpp), from HF's DeepseekV3Attention with
// kv_b_proj absorbed: the same scores and outputs, the latent cached.
#include "model/mla.hpp"

#include <algorithm>

#include "kernels/ops.hpp"

namespace pert {

std::vector<float> mla_absorbed_keys(const float* kv_b, const ModelConfig& c) {
  const MlaConfig& m = c.mla;
  const size_t nope = size_t(m.qk_nope_head_dim), latent = size_t(m.kv_lora_rank), wide = nope + size_t(m.v_head_dim);
  std::vector<float> out(size_t(c.n_heads) * latent * nope);
  for (size_t h = 0; h < size_t(c.n_heads); ++h)
    for (size_t i = 0; i < nope; ++i)
      for (size_t j = 0; j < latent; ++j) out[(h * latent + j) * nope + i] = kv_b[(h * wide + i) * latent + j];
  return out;
}

MlaBlock::MlaBlock(const ModelConfig& c, int rows) : c_(c) {
  const MlaConfig& m = c.mla;
  const size_t R = size_t(rows), H = size_t(c.n_heads);
  q_low_.resize(R * size_t(m.q_lora_rank));
  q_full_.resize(R * H * size_t(m.qk_head_dim()));
  kv_low_.resize(R * size_t(m.kv_lora_rank + m.qk_rope_head_dim));
  head_in_.resize(R * size_t(std::max(m.qk_nope_head_dim, m.kv_lora_rank)));
  head_out_.resize(R * size_t(std::max(m.kv_lora_rank, m.v_head_dim)));
  out_.resize(R * H * size_t(m.v_head_dim));
}

void MlaBlock::project(const MlaWeights& w, const float* x, int rows, float* q, float* k, float* v) {
  const MlaConfig& m = c_.mla;
  const int d = c_.hidden_size, H = c_.n_heads, hd = c_.head_dim, qk = m.qk_head_dim();
  const int rope = m.qk_rope_head_dim, nope = m.qk_nope_head_dim, latent = m.kv_lora_rank;
  const float eps = float(c_.rms_norm_eps);
  // q: q_proj, or q_b_proj(rmsnorm(q_a_proj(x))); each head [nope | rope]
  if (m.q_lora_rank > 0) {
    matmul(q_low_.data(), x, w.q_a, rows, d, m.q_lora_rank);
    rmsnorm(q_low_.data(), q_low_.data(), w.q_a_norm, rows, m.q_lora_rank, eps);
    matmul(q_full_.data(), q_low_.data(), w.q_b, rows, m.q_lora_rank, H * qk);
  } else {
    matmul(q_full_.data(), x, w.q, rows, d, H * qk);
  }
  // the cached row: kv_a_proj_with_mqa gives [c | k_rope]; k = [k_rope | rmsnorm(c)]
  const int low = latent + rope;
  matmul(kv_low_.data(), x, w.kv_a, rows, d, low);
  for (int r = 0; r < rows; ++r) {
    const float* row = &kv_low_[size_t(r) * low];
    std::copy(row + latent, row + low, k + size_t(r) * hd);
    rmsnorm(k + size_t(r) * hd + rope, row, w.kv_a_norm, 1, latent, eps);
  }
  std::copy(k, k + size_t(rows) * hd, v);
  // each head's query: [q_rope | W_kᵀ q_nope], the nope parts of all rows through one product
  for (int h = 0; h < H; ++h) {
    for (int r = 0; r < rows; ++r) {
      const float* qh = &q_full_[(size_t(r) * H + h) * qk];
      std::copy(qh + nope, qh + qk, q + (size_t(r) * H + h) * hd);
      std::copy(qh, qh + nope, &head_in_[size_t(r) * nope]);
    }
    matmul(head_out_.data(), head_in_.data(), w.k_absorb + size_t(h) * latent * nope, rows, nope, latent);
    for (int r = 0; r < rows; ++r)
      std::copy(&head_out_[size_t(r) * latent], &head_out_[size_t(r + 1) * latent], q + (size_t(r) * H + h) * hd + rope);
  }
}

const float* MlaBlock::expand(const MlaWeights& w, const float* att, int rows) {
  const MlaConfig& m = c_.mla;
  const int H = c_.n_heads, hd = c_.head_dim, rope = m.qk_rope_head_dim, latent = m.kv_lora_rank, vd = m.v_head_dim;
  const size_t wide = size_t(m.qk_nope_head_dim + vd);
  for (int h = 0; h < H; ++h) {
    for (int r = 0; r < rows; ++r) {
      const float* latent_sum = att + (size_t(r) * H + h) * hd + rope;  // (the first rope values: rope keys' sum, dropped)
      std::copy(latent_sum, latent_sum + latent, &head_in_[size_t(r) * latent]);
    }
    const float* w_v = w.kv_b + (size_t(h) * wide + size_t(m.qk_nope_head_dim)) * size_t(latent);  // [v][latent]
    matmul(head_out_.data(), head_in_.data(), w_v, rows, latent, vd);
    for (int r = 0; r < rows; ++r)
      std::copy(&head_out_[size_t(r) * vd], &head_out_[size_t(r + 1) * vd], &out_[(size_t(r) * H + h) * vd]);
  }
  return out_.data();
}

void mla_matrices(const MlaWeights& w, const ModelConfig& c, const std::function<void(const Weight&, int, int)>& f) {
  const MlaConfig& m = c.mla;
  const int d = c.hidden_size, H = c.n_heads, qk = m.qk_head_dim();
  if (m.q_lora_rank > 0) {
    f(w.q_a, m.q_lora_rank, d);
    f(w.q_b, H * qk, m.q_lora_rank);
  } else {
    f(w.q, H * qk, d);
  }
  f(w.kv_a, m.kv_lora_rank + m.qk_rope_head_dim, d);
  f(Weight::of_f32(w.k_absorb), H * m.kv_lora_rank, m.qk_nope_head_dim);  // per head [latent][nope]
  f(Weight::of_f32(w.kv_b), H * m.v_head_dim, m.kv_lora_rank);            // per head its v rows (the k_nope rows not read)
}

}  // namespace pert
