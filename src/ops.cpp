#include "pert/ops.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "pert/positions.hpp"

namespace pert {

void matmul(float* y, const float* x, const float* w, int T, int K, int N, bool accumulate) {
  const float beta = accumulate ? 1.0f : 0.0f;
  if (T == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w, K, x, 1, beta, y, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, x, K, w, K, beta, y, N);
}

void rmsnorm(float* out, const float* x, const float* weight, int T, int d, float eps) {
#pragma omp parallel for if (T > 16)
  for (int t = 0; t < T; ++t) {
    const float* xt = x + size_t(t) * d;
    float* ot = out + size_t(t) * d;
    double ss = 0.0;
    for (int i = 0; i < d; ++i) ss += double(xt[i]) * xt[i];
    const float inv = float(1.0 / std::sqrt(ss / d + eps));
    for (int i = 0; i < d; ++i) ot[i] = xt[i] * inv * weight[i];
  }
}

void swiglu(float* gate, const float* up, size_t n) {
  // silu(g) = g / (1 + e^-g), from e = e^-|g| <= 1 so one vectorizable exp serves both signs.
#pragma omp parallel for simd if (n > 65536)
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i], e = exp_nonpositive(g < 0.0f ? g : -g);
    gate[i] = (g < 0.0f ? g * e : g) / (1.0f + e) * up[i];
  }
}

void softmax(float* x, int n) {
  if (n <= 0) return;
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; ++i) {
    x[i] = exp_nonpositive(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void attention(float* out, const float* q, const float* keys, const float* values, const AttentionShape& s,
               float scale, const PositionEncoding& position, float* scratch, size_t scratch_per_thread) {
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, q_stride = s.n_heads * hd;
  const int n_blocks = (s.T + kQueryBlock - 1) / kQueryBlock;
  const size_t row_len = size_t(s.pos0 + s.T);  // keys the last query sees
  const bool bias = position.has_bias();
  // Each (head, block of queries) is two small GEMMs, scores = Q·Kᵀ and out = P·V, on the keys
  // the block's last query sees; BLAS runs single-threaded inside this parallel loop.
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int h = 0; h < s.n_heads; ++h)
    for (int b = 0; b < n_blocks; ++b) {
      float* scores = scratch + size_t(omp_get_thread_num()) * scratch_per_thread;  // [kQueryBlock][row_len]
      const float* k = keys + (h / group) * s.kv_head_stride;                       // [position][hd]
      const float* v = values + (h / group) * s.kv_head_stride;
      const int t0 = b * kQueryBlock, nq = std::min(s.T, t0 + kQueryBlock) - t0;
      const int n_keys_max = s.pos0 + t0 + nq;
      const float* qb = q + size_t(t0) * q_stride + size_t(h) * hd;  // [nq][hd], rows q_stride apart
      float* ob = out + size_t(t0) * q_stride + size_t(h) * hd;
      if (nq == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n_keys_max, hd, scale, k, hd, qb, 1, 0.0f, scores, 1);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, n_keys_max, hd, scale, qb, q_stride, k, hd, 0.0f,
                    scores, int(row_len));
      for (int i = 0; i < nq; ++i) {
        const int pos = s.pos0 + t0 + i, n_keys = pos + 1;  // causal: keys 0..pos
        float* row = scores + size_t(i) * row_len;
        if (bias) position.add_bias(row, h, pos, n_keys);
        softmax(row, n_keys);
        std::fill(row + n_keys, row + n_keys_max, 0.0f);
      }
      if (nq == 1)
        cblas_sgemv(CblasRowMajor, CblasTrans, n_keys_max, hd, 1.0f, v, hd, scores, 1, 0.0f, ob, 1);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hd, n_keys_max, 1.0f, scores, int(row_len), v, hd,
                    0.0f, ob, q_stride);
    }
}

}  // namespace pert
