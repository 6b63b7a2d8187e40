#include "pert/ops.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "parallel.hpp"
#include "pert/positions.hpp"

namespace pert {

#if defined(__AVX512F__)
namespace {

// y[N] (+)= W[N][K]·x, 4 rows per step, the threads taking contiguous runs of rows so each
// streams its part of W once. Prefetching W two steps ahead with the non-temporal hint keeps
// it from evicting what the cache holds: on stories15M the layers (24 MB) then stay in the
// 32 MB L3 while the 37 MB classifier streams past them (tg128 +19% over OpenBLAS sgemv).
void gemv(float* y, const float* w, const float* x, int N, int K, bool accumulate) {
  const int full = K - K % 16;
  const __mmask16 tail = __mmask16((1u << (K % 16)) - 1);
  const size_t size = size_t(N) * K;
  parallel_for_if(size > 32768, (N + 3) / 4, [&](int step) {
    const int n0 = step * 4, rows = std::min(4, N - n0);
    const float* row[4];  // a short last step repeats its last row
    for (int i = 0; i < 4; ++i) row[i] = w + size_t(n0 + std::min(i, rows - 1)) * K;
    const size_t ahead = size_t(n0 + 8) * K;  // two steps on
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int k = 0; k < full; k += 16) {
      const __m512 xv = _mm512_loadu_ps(x + k);
      for (int i = 0; i < 4; ++i) {
        const size_t at = ahead + size_t(i) * K + size_t(k);
        if (at < size) _mm_prefetch(reinterpret_cast<const char*>(w + at), _MM_HINT_NTA);
        acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(row[i] + k), xv, acc[i]);
      }
    }
    if (tail) {
      const __m512 xv = _mm512_maskz_loadu_ps(tail, x + full);
      for (int i = 0; i < 4; ++i) acc[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, row[i] + full), xv, acc[i]);
    }
    for (int i = 0; i < rows; ++i) {
      alignas(64) float lanes[16];  // (_mm512_reduce_add_ps trips a false GCC 12 warning)
      _mm512_store_ps(lanes, acc[i]);
      float dot = 0.0f;
      for (float lane : lanes) dot += lane;
      y[n0 + i] = accumulate ? y[n0 + i] + dot : dot;
    }
  });
}

}  // namespace
#endif

void matmul(float* y, const float* x, const float* w, int T, int K, int N, bool accumulate) {
#if defined(__AVX512F__)
  if (T == 1) return gemv(y, w, x, N, K, accumulate);
#endif
  const float beta = accumulate ? 1.0f : 0.0f;
  if (T == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w, K, x, 1, beta, y, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, x, K, w, K, beta, y, N);
}

void rmsnorm(float* out, const float* x, const float* weight, int T, int d, float eps) {
  parallel_for_if(T > 16, T, [&](int t) {
    const float* xt = x + size_t(t) * d;
    float* ot = out + size_t(t) * d;
    double ss = 0.0;
    for (int i = 0; i < d; ++i) ss += double(xt[i]) * xt[i];
    const float inv = float(1.0 / std::sqrt(ss / d + eps));
    for (int i = 0; i < d; ++i) ot[i] = xt[i] * inv * weight[i];
  });
}

void swiglu(float* gate, const float* up, size_t n) {
  // silu(g) = g / (1 + e^-g), from e = e^-|g| <= 1 so one vectorizable exp serves both signs.
  constexpr size_t kChunk = 16384;
  parallel_for_if(n > 65536, (n + kChunk - 1) / kChunk, [&](size_t c) {
    const size_t end = std::min(n, (c + 1) * kChunk);
#pragma omp simd
    for (size_t i = c * kChunk; i < end; ++i) {
      const float g = gate[i], e = exp_nonpositive(g < 0.0f ? g : -g);
      gate[i] = (g < 0.0f ? g * e : g) / (1.0f + e) * up[i];
    }
  });
}

void add_rows(float* y, const float* bias, int T, int N) {
  for (int t = 0; t < T; ++t) {
    float* row = y + size_t(t) * N;
#pragma omp simd
    for (int i = 0; i < N; ++i) row[i] += bias[i];
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

AttentionScratch::AttentionScratch(int n_heads, int head_dim, int n_ctx)
    : per_thread(size_t(kQueryBlock) * size_t(n_ctx)),
      partials(size_t(n_heads) * size_t((n_ctx + kKeyBlock - 1) / kKeyBlock) * size_t(head_dim + 2)) {
  fit_threads();
}

void AttentionScratch::fit_threads() {
  const size_t want = size_t(omp_get_max_threads()) * per_thread;
  if (scores.size() < want) scores.resize(want);
}

namespace {

// One query (T = 1) over its whole cache, split into blocks of kKeyBlock keys.
// The first key the query at `pos` sees: 0, or with a sliding window W the keys pos − W < n.
int first_key(int pos, int window) { return window > 0 ? std::max(0, pos - window + 1) : 0; }

void attention_decode(float* out, const float* q, const float* keys, const float* values, const AttentionShape& s,
                      float scale, const PositionEncoding& position, AttentionScratch& scratch) {
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, pos = s.pos0;
  const int first = first_key(pos, s.window), n_keys = pos + 1 - first;  // keys first..pos
  const int n_blocks = (n_keys + kKeyBlock - 1) / kKeyBlock, max_blocks = int(scratch.partials.size()) / (s.n_heads * (hd + 2));
  const bool bias = position.has_bias();
  float* const scores_all = scratch.scores.data();
  float* const partials = scratch.partials.data();  // [n_heads][max_blocks][hd + 2]
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int h = 0; h < s.n_heads; ++h)
    for (int b = 0; b < n_blocks; ++b) {
      float* scores = scores_all + size_t(omp_get_thread_num()) * scratch.per_thread;  // [kKeyBlock]
      const int key0 = first + b * kKeyBlock, nk = std::min(pos + 1 - key0, kKeyBlock);
      const float* k = keys + (h / group) * s.kv_head_stride + ptrdiff_t(key0) * hd;  // [nk][hd]
      const float* v = values + (h / group) * s.kv_head_stride + ptrdiff_t(key0) * hd;
      float* partial = partials + (size_t(h) * max_blocks + b) * size_t(hd + 2);
      cblas_sgemv(CblasRowMajor, CblasNoTrans, nk, hd, scale, k, hd, q + size_t(h) * hd, 1, 0.0f, scores, 1);
      if (bias) position.add_bias(scores, h, pos, key0, nk);
      const float max = *std::max_element(scores, scores + nk);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int i = 0; i < nk; ++i) sum += (scores[i] = exp_nonpositive(scores[i] - max));
      cblas_sgemv(CblasRowMajor, CblasTrans, nk, hd, 1.0f, v, hd, scores, 1, 0.0f, partial, 1);
      partial[hd] = max;
      partial[hd + 1] = sum;
    }
  // Merge: out = Σ_b e^(max_b − M) · out_b / Σ_b e^(max_b − M) · sum_b, M the largest max.
  for (int h = 0; h < s.n_heads; ++h) {
    const float* p = partials + size_t(h) * max_blocks * size_t(hd + 2);
    float M = p[hd];
    for (int b = 1; b < n_blocks; ++b) M = std::max(M, p[size_t(b) * (hd + 2) + hd]);
    float* o = out + size_t(h) * hd;
    std::fill(o, o + hd, 0.0f);
    float total = 0.0f;
    for (int b = 0; b < n_blocks; ++b, p += hd + 2) {
      const float w = exp_nonpositive(p[hd] - M);
      total += w * p[hd + 1];
      for (int i = 0; i < hd; ++i) o[i] += w * p[i];
    }
    for (int i = 0; i < hd; ++i) o[i] /= total;
  }
}

}  // namespace

void attention(float* out, const float* q, const float* keys, const float* values, const AttentionShape& s,
               float scale, const PositionEncoding& position, AttentionScratch& scratch) {
  if (s.T == 1) return attention_decode(out, q, keys, values, s, scale, position, scratch);
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, q_stride = s.n_heads * hd;
  const int n_blocks = (s.T + kQueryBlock - 1) / kQueryBlock;
  const size_t row_len = size_t(s.pos0 + s.T);  // keys the last query sees
  const bool bias = position.has_bias();
  float* const scores_all = scratch.scores.data();
  // Each (head, block of queries) is two small GEMMs, scores = Q·Kᵀ and out = P·V, on the keys
  // the block's queries see (from the first query's first key to the last query); BLAS runs
  // single-threaded inside this parallel loop.
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int h = 0; h < s.n_heads; ++h)
    for (int b = 0; b < n_blocks; ++b) {
      float* scores = scores_all + size_t(omp_get_thread_num()) * scratch.per_thread;  // [kQueryBlock][row_len]
      const int t0 = b * kQueryBlock, nq = std::min(s.T, t0 + kQueryBlock) - t0;
      const int key_lo = first_key(s.pos0 + t0, s.window), key_hi = s.pos0 + t0 + nq;  // keys [key_lo, key_hi)
      const float* k = keys + (h / group) * s.kv_head_stride + ptrdiff_t(key_lo) * hd;  // [key][hd]
      const float* v = values + (h / group) * s.kv_head_stride + ptrdiff_t(key_lo) * hd;
      const float* qb = q + size_t(t0) * q_stride + size_t(h) * hd;  // [nq][hd], rows q_stride apart
      float* ob = out + size_t(t0) * q_stride + size_t(h) * hd;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, key_hi - key_lo, hd, scale, qb, q_stride, k, hd, 0.0f,
                  scores, int(row_len));
      for (int i = 0; i < nq; ++i) {
        const int pos = s.pos0 + t0 + i, lo = first_key(pos, s.window);  // keys lo..pos (causal, windowed)
        float* row = scores + size_t(i) * row_len;                       // row[j]: key key_lo + j
        float* seen = row + (lo - key_lo);
        if (bias) position.add_bias(seen, h, pos, lo, pos + 1 - lo);
        softmax(seen, pos + 1 - lo);
        std::fill(row, seen, 0.0f);
        std::fill(row + (pos + 1 - key_lo), row + (key_hi - key_lo), 0.0f);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hd, key_hi - key_lo, 1.0f, scores, int(row_len), v, hd,
                  0.0f, ob, q_stride);
    }
}

}  // namespace pert
