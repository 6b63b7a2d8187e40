// Element-wise ops, softmax and attention (the F32, BF16 and Q8 matrix products: ops_*.cpp).
#include "pert/ops.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstring>

#include "parallel.hpp"
#include "pert/error.hpp"
#include "pert/positions.hpp"

namespace pert {

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

AttentionScratch::AttentionScratch(int n_heads, int head_dim, int n_ctx, bool far, bool narrow)
    : per_thread(size_t(kQueryBlock) * size_t(n_ctx) * (far ? 2 : 1)),
      widened_rows(narrow ? size_t(std::max(n_ctx, kKeyBlock)) : 0),
      widened_per_thread(widened_rows * size_t(head_dim) * (far ? 3 : 2)),
      partials(size_t(n_heads) * size_t((n_ctx + kKeyBlock - 1) / kKeyBlock + 1) * size_t(head_dim + 2)) {
  fit_threads();
}

void AttentionScratch::fit_threads() {
  const size_t threads = size_t(omp_get_max_threads());
  if (scores.size() < threads * per_thread) scores.resize(threads * per_thread);
  if (widened.size() < threads * widened_per_thread) widened.resize(threads * widened_per_thread);
}

namespace {

// Which keys a query sees and how each pair is scored, from the layer's sliding window and
// the "extend" pattern: keys [0, sinks) and [lo(m), m]; pairs n < near(m) from the far pass.
struct KeyRule {
  int window;
  const ExtensionConfig* pattern;
  bool masks() const { return pattern && pattern->masks(); }
  bool remaps() const { return pattern && pattern->remaps(); }
  int lo(int m) const {
    const int l = window > 0 ? std::max(0, m - window + 1) : 0;
    return masks() ? std::max(l, pattern->first_key(m)) : l;
  }
  int sinks() const { return masks() ? pattern->sinks() : 0; }
  int near(int m) const { return remaps() ? pattern->near_first(m) : 0; }
  int far_query(int m) const { return int(pattern->far_query(m)); }  // for bias schemes, whose far keys are the keys
};

// One query (T = 1) over the keys it sees, split into blocks of kKeyBlock keys (the sinks' own
// blocks first, then the window's).
void attention_decode(float* out, const float* q, const KvRows& keys, const KvRows& values, const AttentionShape& s,
                      float scale, const PositionEncoding& position, AttentionScratch& scratch) {
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, pos = s.pos0;
  const KeyRule rule{s.window, s.pattern};
  const int lo = rule.lo(pos), sinks = std::min(rule.sinks(), lo), near = rule.near(pos);
  const int sink_blocks = (sinks + kKeyBlock - 1) / kKeyBlock;
  const int n_blocks = sink_blocks + (pos + 1 - lo + kKeyBlock - 1) / kKeyBlock;
  const int max_blocks = int(scratch.partials.size()) / (s.n_heads * (hd + 2));
  const bool terms = position.has_bias() || position.has_relative_terms();
  // A narrower cache's keys are read in registers, unless a scheme's terms read the keys too.
  auto fused = [&](const KvRows& k) { return k.type != CacheType::F32 && !position.has_relative_terms(); };
  float* const scores_all = scratch.scores.data();
  float* const partials = scratch.partials.data();  // [n_heads][max_blocks][hd + 2]
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int h = 0; h < s.n_heads; ++h)
    for (int b = 0; b < n_blocks; ++b) {
      const int thread = omp_get_thread_num();
      float* scores = scores_all + size_t(thread) * scratch.per_thread;  // [kKeyBlock]
      // widened keys, values (and far keys) of a narrower cache, in the thread's slots
      float *wk = nullptr, *wf = nullptr;
      if (scratch.widened_per_thread) {
        wk = scratch.widened.data() + size_t(thread) * scratch.widened_per_thread;
        wf = wk + 2 * scratch.widened_rows * size_t(hd);
      }
      const int key0 = b < sink_blocks ? b * kKeyBlock : lo + (b - sink_blocks) * kKeyBlock;
      const int nk = std::min((b < sink_blocks ? sinks : pos + 1) - key0, kKeyBlock);
      const ptrdiff_t head = (h / group) * (s.kv_head_stride / hd);  // the kv head's first row
      float* partial = partials + (size_t(h) * max_blocks + b) * size_t(hd + 2);
      // keys [key0, split) are scored far, [split, key0 + nk) near
      const int split = std::clamp(near, key0, key0 + nk), n_far = split - key0, n_near = nk - n_far;
      if (n_far > 0) {
        const float* kb = s.keys_far.at(head + key0).read(n_far, wf);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n_far, hd, scale, kb, hd, s.q_far + size_t(h) * hd, 1, 0.0f, scores, 1);
        if (terms)
          add_position_terms(position, scores, s.layer, h, rule.far_query(pos), s.q_far + size_t(h) * hd, kb, key0, n_far,
                             scale);
      }
      if (n_near > 0 && fused(keys)) {
        keys.at(head + split).dot(q + size_t(h) * hd, n_near, scale, scores + n_far);
        if (terms) add_position_terms(position, scores + n_far, s.layer, h, pos, q + size_t(h) * hd, nullptr, split, n_near, scale);
      } else if (n_near > 0) {
        const float* kb = keys.at(head + split).read(n_near, wk);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n_near, hd, scale, kb, hd, q + size_t(h) * hd, 1, 0.0f, scores + n_far, 1);
        if (terms)
          add_position_terms(position, scores + n_far, s.layer, h, pos, q + size_t(h) * hd, kb, split, n_near, scale);
      }
      const float max = *std::max_element(scores, scores + nk);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int i = 0; i < nk; ++i) sum += (scores[i] = exp_nonpositive(scores[i] - max));
      if (values.type != CacheType::F32) {
        values.at(head + key0).weighted_sum(scores, nk, partial);
      } else {
        cblas_sgemv(CblasRowMajor, CblasTrans, nk, hd, 1.0f, values.f32 + (head + key0) * hd, hd, scores, 1, 0.0f, partial, 1);
      }
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

void attention(float* out, const float* q, const KvRows& key_rows, const KvRows& value_rows, const AttentionShape& s,
               float scale, const PositionEncoding& position, AttentionScratch& scratch) {
  if (s.T == 1) return attention_decode(out, q, key_rows, value_rows, s, scale, position, scratch);
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, q_stride = s.n_heads * hd;
  const int n_blocks = (s.T + kQueryBlock - 1) / kQueryBlock;
  const KeyRule rule{s.window, s.pattern};
  const bool terms = position.has_bias() || position.has_relative_terms(), remaps = rule.remaps();
  const float minus_inf = -std::numeric_limits<float>::infinity();
  float* const scores_all = scratch.scores.data();
  // Each (head, block of queries) is small GEMMs on the keys the block's queries see: the sinks
  // [0, sinks) and the range [lo, hi) from the first query's first key to the last query, laid
  // side by side as the block's columns (gemm_nt, gemm_nn: one thread's GEMMs).
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int h = 0; h < s.n_heads; ++h)
    for (int b = 0; b < n_blocks; ++b) {
      const int t0 = b * kQueryBlock, nq = std::min(s.T, t0 + kQueryBlock) - t0, p0 = s.pos0 + t0;
      const int lo = rule.lo(p0), hi = p0 + nq, sinks = std::min(rule.sinks(), lo);
      const int cols = sinks + hi - lo;  // column of key n: n below `sinks`, else sinks + n − lo
      auto col = [&](int n) { return n < sinks ? n : sinks + n - lo; };
      // Calls f(first key, count) on each of the block's key ranges within [from, to).
      auto ranges = [&](int from, int to, auto f) {
        for (const auto& [a, z] : {std::pair{0, sinks}, std::pair{lo, hi}})
          if (std::max(a, from) < std::min(z, to)) f(std::max(a, from), std::min(z, to) - std::max(a, from));
      };
      const int thread = omp_get_thread_num();
      float* scores = scores_all + size_t(thread) * scratch.per_thread;  // [nq][cols]
      float* far = scores + scratch.per_thread / 2;  // [nq][cols], remaps only (per_thread is then twice the block)
      const ptrdiff_t head = (h / group) * (s.kv_head_stride / hd);  // the kv head's first row
      const size_t q_at = size_t(t0) * q_stride + size_t(h) * hd;  // the block's queries, rows q_stride apart
      // Keys, values and far keys as F32 rows: the cache's own, or a narrower cache's rows of the
      // block's ranges widened into this thread's buffer at their columns. Either way row n + 1
      // follows row n within a range, so row(n0) starts a range's GEMM operand.
      struct Rows {
        const float* base;  // the cache's kv head (F32), or the buffer by column
        bool by_col;
      };
      float* const buffer = scratch.widened_per_thread ? scratch.widened.data() + size_t(thread) * scratch.widened_per_thread : nullptr;
      auto f32_rows = [&](const KvRows& src, int slot, int to) {  // rows of the ranges below `to`
        if (src.type == CacheType::F32) return Rows{src.f32 + head * hd, false};
        float* buf = buffer + size_t(slot) * scratch.widened_rows * size_t(hd);
        ranges(0, to, [&](int n0, int count) { src.at(head + n0).read(count, buf + size_t(col(n0)) * hd); });
        return Rows{buf, true};
      };
      auto row = [&](const Rows& r, int n) { return r.base + ptrdiff_t(r.by_col ? col(n) : n) * hd; };
      const Rows keys = f32_rows(key_rows, 0, hi), values = f32_rows(value_rows, 1, hi);
      const Rows keys_far = remaps ? f32_rows(s.keys_far, 2, rule.near(hi - 1)) : Rows{nullptr, false};
      auto gemm_scores = [&](float* dst, const float* qb, const Rows& kb, int from, int to) {
        ranges(from, to, [&](int n0, int count) {
          gemm_nt(dst + col(n0), cols, qb + q_at, q_stride, nq, hd, row(kb, n0), count, scale, false);
        });
      };
      // Near scores where some query of the block is near, far ones where some is far.
      gemm_scores(scores, q, keys, rule.near(p0), hi);
      if (remaps) gemm_scores(far, s.q_far, keys_far, 0, rule.near(hi - 1));
      for (int i = 0; i < nq; ++i) {
        const int m = p0 + i, near = rule.near(m);
        // m sees keys n < all_sinks and n >= rule.lo(m): in the block's columns, a hole [hole0, hole1)
        const int hole0 = std::max(lo, rule.sinks()), hole1 = std::max(hole0, rule.lo(m));
        auto seen = [&](int n0, int count, auto f) {  // f on the parts of [n0, n0 + count) m sees
          if (n0 < hole0) f(n0, std::min(n0 + count, hole0) - n0);
          if (n0 + count > hole1) f(std::max(n0, hole1), n0 + count - std::max(n0, hole1));
        };
        float* scores_row = scores + size_t(i) * cols;
        const float* far_row = far + size_t(i) * cols;
        if (hole0 < hole1) std::fill(scores_row + col(hole0), scores_row + col(hole1), minus_inf);
        ranges(0, near, [&](int n0, int count) {  // far pairs
          seen(n0, count, [&](int v0, int n) {
            std::copy(far_row + col(v0), far_row + col(v0) + n, scores_row + col(v0));
            if (terms)
              add_position_terms(position, scores_row + col(v0), s.layer, h, rule.far_query(m),
                                 s.q_far + q_at + size_t(i) * q_stride, row(keys_far, v0), v0, n, scale);
          });
        });
        if (terms)
          ranges(near, m + 1, [&](int n0, int count) {
            seen(n0, count, [&](int v0, int n) {
              add_position_terms(position, scores_row + col(v0), s.layer, h, m, q + q_at + size_t(i) * q_stride,
                                 row(keys, v0), v0, n, scale);
            });
          });
        softmax(scores_row, col(m) + 1);
        std::fill(scores_row + col(m) + 1, scores_row + cols, 0.0f);
      }
      // out = P·V over the same columns: the sinks' GEMM, then the range's adding to it.
      float* ob = out + size_t(t0) * q_stride + size_t(h) * hd;
      bool first_gemm = true;
      ranges(0, hi, [&](int n0, int count) {
        gemm_nn(ob, q_stride, scores + col(n0), cols, nq, count, row(values, n0), hd, hd, !first_gemm);
        first_gemm = false;
      });
    }
}

}  // namespace pert
