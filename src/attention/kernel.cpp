// The attention kernel (attention.hpp), as the formula reads, in four named steps:
//   1. scores       q·k · scale over the keys a query sees; pairs the "extend" pattern places far
//                   are scored from the far queries and keys instead (q_far · k_far)
//   2. mask, bias   keys a query does not see get −inf; the scheme adds its bias and terms (and
//                   FoX's decay, c_m − c_n from the forget gates' running sums)
//   2b. contextual  CoPE (hook 7) on each query's whole row: positions counted from the query
//       positions   back by gates σ(score), each score gaining its position's term; decoding too
//                   takes the prefill path (a key's position depends on every nearer key's score)
//   3. softmax      per query, over its keys (and the head's learned sink logit: a column that no
//                   key owns, in the denominator only); or stick-breaking's weights (hook 6,
//                   which decoding too takes through the prefill path: the weights of a key
//                   depend on every nearer one, no per-block partial to merge as a softmax's)
//   4. weighted sum out = P·V
// Prefill runs them per (head, block of kQueryBlock queries) as small GEMMs over the block's key
// columns; decoding (one query) per (head, block of kKeyBlock keys), merging the blocks' softmax
// partials at the end (split-K, as flash-decoding), so a long cache spreads over all threads.
#include <omp.h>

#include <algorithm>
#include <limits>

#include "attention/attention.hpp"
#include "kernels/ops.hpp"
#include "kernels/parallel.hpp"
#include "pert/attention_stats.hpp"
#include "pert/positions.hpp"

namespace pert {

AttentionScratch::AttentionScratch(int n_heads, int head_dim, int n_ctx, int far_passes, bool narrow, bool rotate_keys)
    : block(size_t(kQueryBlock) * size_t(n_ctx)),
      per_thread(block * size_t(1 + far_passes)),
      widened_rows(narrow ? size_t(std::max(n_ctx, kKeyBlock)) : rotate_keys ? size_t(kKeyBlock) : 0),
      widened_per_thread(widened_rows * size_t(head_dim) * (far_passes ? 3 : 2)),
      // keys turned, keys and values widened (n_heads bounds the kv heads), scores, running softmax
      turning_per_thread(rotate_keys ? 3 * size_t(n_heads) * kTurnKeys * size_t(head_dim) + kTurnKeys +
                                           size_t(kTurnTile) * size_t(n_heads) * size_t(head_dim + 2)
                                     : 0),
      partials(size_t(n_heads) * size_t((n_ctx + kKeyBlock - 1) / kKeyBlock + 1) * size_t(head_dim + 2)) {
  fit_threads();
}

void AttentionScratch::fit_threads() {
  const size_t threads = size_t(omp_get_max_threads());
  if (scores.size() < threads * per_thread) scores.resize(threads * per_thread);
  if (widened.size() < threads * widened_per_thread) widened.resize(threads * widened_per_thread);
  if (turning.size() < threads * turning_per_thread) turning.resize(threads * turning_per_thread);
}

namespace {

// Which keys a query sees and how each pair is scored, from the layer's sliding window or
// chunk and the "extend" pattern: keys [0, sinks) and [lo(m), m]; pairs n < near(m) from the far pass.
struct KeyRule {
  int window, chunk;
  const ExtensionConfig* pattern;
  bool masks() const { return pattern && pattern->masks(); }
  bool remaps() const { return pattern && pattern->remaps(); }
  int lo(int m) const {
    const int l = first_visible_key(m, window, chunk);
    return masks() ? std::max(l, pattern->first_key(m)) : l;
  }
  int sinks() const { return masks() ? pattern->sinks() : 0; }
  int near(int m) const { return remaps() ? pattern->near_first(m) : 0; }
  int farther(int m) const { return remaps() ? pattern->farther_first(m) : 0; }  // the second far tier's end
  int far_query(int m) const { return int(pattern->far_query(m)); }  // for bias schemes, whose far keys are the keys
  int farther_query(int m) const { return int(pattern->farther_query(m)); }
};

// The head's learned sink logit (AttentionShape::sink_logits), or −inf: none, which adds e^−inf = 0
// to a denominator, so a model without them gets the same weights bit for bit.
inline float sink_logit(const AttentionShape& s, int h) {
  return s.sink_logits ? s.sink_logits[h] : -std::numeric_limits<float>::infinity();
}

// softmax() of a row with the sink logit as one more column, dropped: the max over the row and the
// sink (as HF's gpt-oss subtracts it) keeps every exponent <= 0 however large the sink.
void softmax_with_sink_logit(float* x, int n, float sink) {
  const float max = std::max(*std::max_element(x, x + n), sink);
  const float inv = 1.0f / (exp_and_sum(x, n, max) + exp_nonpositive(sink - max));
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// ---- prefill ----

// The keys a block of queries at positions [p0, hi) sees, side by side as the columns of its
// score matrix: the sinks [0, sinks), then the range [lo, hi) from the first query's first key.
struct BlockColumns {
  int lo, hi, sinks, cols, ring;
  BlockColumns(const KeyRule& rule, int p0, int hi_, int ring_)
      : lo(rule.lo(p0)), hi(hi_), sinks(std::min(rule.sinks(), lo)), cols(sinks + hi_ - lo), ring(ring_) {}
  int col(int n) const { return n < sinks ? n : sinks + n - lo; }
  // Calls f(first key, count) on each of the block's key ranges within [from, to), cut where a
  // ring's rows wrap, so that each range's rows follow one another.
  template <class F>
  void ranges(int from, int to, F f) const {
    for (const auto& [a, z] : {std::pair{0, sinks}, std::pair{lo, hi}})
      for (int n = std::max(a, from), end = std::min(z, to); n < end;) {
        const int stop = ring ? std::min(end, (n / ring + 1) * ring) : end;
        f(n, stop - n);
        n = stop;
      }
  }
};
// The cache row of position n (AttentionShape::ring).
inline int cache_row(int n, int ring) { return ring ? n % ring : n; }

// FoX's decay (AttentionShape::decay) on query m's scores of keys [key0, key0 + n) of head h,
// whose cache rows follow one another: scores[i] += c_m − c_(key0+i).
void add_decay(float* scores, const AttentionShape& s, int h, int m, int key0, int n) {
  const double* c = s.decay + ptrdiff_t(h) * s.decay_stride;
  const double cm = c[cache_row(m, s.ring)];
  const double* cn = c + cache_row(key0, s.ring);
  for (int i = 0; i < n; ++i) scores[i] += float(cm - cn[i]);
}

// Keys, values or far keys of one kv head as F32 rows: the cache's own, or a narrower cache's
// rows of the block's ranges widened into a buffer at their columns. Either way row n + 1
// follows row n within a range, so row(n0) starts a range's GEMM operand.
struct F32Rows {
  const float* base = nullptr;  // the cache's kv head (F32), or the buffer by column
  bool by_col = false;
  int hd = 0;
  const float* row(const BlockColumns& c, int n) const {
    return base + ptrdiff_t(by_col ? c.col(n) : cache_row(n, c.ring)) * hd;
  }
};
F32Rows f32_rows(const KvRows& src, ptrdiff_t head, const BlockColumns& c, int to, float* buffer, int hd) {
  if (src.type == CacheType::F32) return {src.f32 + head * hd, false, hd};
  c.ranges(0, to, [&](int n0, int count) { src.at(head + cache_row(n0, c.ring)).read(count, buffer + size_t(c.col(n0)) * hd); });
  return {buffer, true, hd};
}

// One head's block of nq queries from row t0 (position p0), and what its steps read.
struct QueryBlock {
  const AttentionShape& s;
  const KeyRule& rule;
  const PositionEncoding& position;
  float scale;
  int h, t0, nq, p0;
  BlockColumns c;
  size_t q_at;  // the block's first query in q (rows n_heads·head_dim apart)
  F32Rows keys, values, keys_far;

  // Step 1 for queries `q` over keys `k` in [from, to): dst [nq][cols] at the keys' columns.
  void scores(float* dst, const float* q, const F32Rows& k, int from, int to) const {
    const int q_stride = s.n_heads * s.head_dim;
    c.ranges(from, to, [&](int n0, int count) {
      gemm_nt(dst + c.col(n0), c.cols, q + q_at, q_stride, nq, s.head_dim, k.row(c, n0), count, scale, false);
    });
  }

  // Step 2 for query i (position m): its row of scores masked to the keys it sees, far pairs
  // taken from the far scores (the farther ones from the farther scores), and the scheme's bias
  // and terms added; then 2b, CoPE's positions over the whole row.
  void mask_and_bias(float* row, const float* far_row, const float* farther_row, int i, const float* q) const {
    const int m = p0 + i, near = rule.near(m), farther = rule.farther(m);
    const bool terms = position.has_bias() || position.has_relative_terms();
    const size_t q_row = q_at + size_t(i) * size_t(s.n_heads * s.head_dim);
    // m sees keys n < all sinks and n >= rule.lo(m): in the block's columns, a hole [hole0, hole1)
    const int hole0 = std::max(c.lo, rule.sinks()), hole1 = std::max(hole0, rule.lo(m));
    auto seen = [&](int n0, int count, auto f) {  // f on the parts of [n0, n0 + count) m sees
      if (n0 < hole0) f(n0, std::min(n0 + count, hole0) - n0);
      if (n0 + count > hole1) f(std::max(n0, hole1), n0 + count - std::max(n0, hole1));
    };
    if (hole0 < hole1) std::fill(row + c.col(hole0), row + c.col(hole1), -std::numeric_limits<float>::infinity());
    auto far_pairs = [&](int from, int to, const float* src_row, int query_pos, const float* q_src) {
      c.ranges(from, to, [&](int n0, int count) {
        seen(n0, count, [&](int v0, int n) {
          std::copy(src_row + c.col(v0), src_row + c.col(v0) + n, row + c.col(v0));
          if (terms)
            add_position_terms(position, row + c.col(v0), s.layer, h, query_pos, q_src + q_row, keys_far.row(c, v0), v0, n, scale);
          if (s.decay) add_decay(row + c.col(v0), s, h, m, v0, n);  // (the tokens' gates: at m, not the far query)
        });
      });
    };
    if (farther > 0) far_pairs(0, farther, farther_row, rule.farther_query(m), s.q_farther);
    if (near > farther) far_pairs(farther, near, far_row, rule.far_query(m), s.q_far);
    if (terms || s.decay)
      c.ranges(near, m + 1, [&](int n0, int count) {
        seen(n0, count, [&](int v0, int n) {
          if (terms) add_position_terms(position, row + c.col(v0), s.layer, h, m, q + q_row, keys.row(c, v0), v0, n, scale);
          if (s.decay) add_decay(row + c.col(v0), s, h, m, v0, n);
        });
      });
    if (position.has_contextual_positions())  // 2b., over the row as masked: its own key, col(m), last
      position.add_contextual_positions(row, c.col(m) + 1, s.layer, q + q_row, scale);
  }

  // Step 4: out (the block's rows) = P·V over the same columns, the sinks' GEMM first.
  void weighted_sum(float* out, const float* p) const {
    const int q_stride = s.n_heads * s.head_dim;
    float* ob = out + size_t(t0) * q_stride + size_t(h) * s.head_dim;
    bool first = true;
    c.ranges(0, c.hi, [&](int n0, int count) {
      gemm_nn(ob, q_stride, p + c.col(n0), c.cols, nq, count, values.row(c, n0), s.head_dim, s.head_dim, !first);
      first = false;
    });
  }
};

void attention_prefill(float* out, const float* q, const KvRows& key_rows, const KvRows& value_rows,
                       const AttentionShape& s, float scale, const PositionEncoding& position,
                       AttentionScratch& scratch) {
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  const int n_blocks = (s.T + kQueryBlock - 1) / kQueryBlock;
  const KeyRule rule{s.window, s.chunk, s.pattern};
  const bool remaps = rule.remaps();
  parallel_for_2d(s.n_heads, n_blocks, [&](int h, int b) {
    const int t0 = b * kQueryBlock, nq = std::min(s.T, t0 + kQueryBlock) - t0, p0 = s.pos0 + t0;
    const int thread = omp_get_thread_num();
    float* scores = scratch.scores.data() + size_t(thread) * scratch.per_thread;  // [nq][cols]
    float* far = remaps ? scores + scratch.block : nullptr;        // [nq][cols] (per_thread then holds it)
    float* farther = s.q_farther ? far + scratch.block : nullptr;  // [nq][cols], a second far tier
    const ptrdiff_t head = (h / group) * (s.kv_head_stride / hd);  // the kv head's first row
    // the thread's slots for widened keys, values and far keys (a narrower cache)
    auto slot = [&](int i) {
      return scratch.widened_per_thread
                 ? scratch.widened.data() + size_t(thread) * scratch.widened_per_thread + size_t(i) * scratch.widened_rows * size_t(hd)
                 : nullptr;
    };
    const BlockColumns c(rule, p0, p0 + nq, s.ring);
    const QueryBlock block{s, rule, position, scale, h, t0, nq, p0, c, size_t(t0) * s.n_heads * hd + size_t(h) * hd,
                           f32_rows(key_rows, head, c, c.hi, slot(0), hd),
                           f32_rows(value_rows, head, c, c.hi, slot(1), hd),
                           remaps ? f32_rows(s.keys_far, head, c, rule.near(c.hi - 1), slot(2), hd) : F32Rows{}};
    // 1. scores: near where some query of the block is near, far where some is far (and farther)
    block.scores(scores, q, block.keys, rule.near(p0), c.hi);
    if (remaps) block.scores(far, s.q_far, block.keys_far, rule.farther(p0), rule.near(c.hi - 1));
    if (s.q_farther) block.scores(farther, s.q_farther, block.keys_far, 0, rule.farther(c.hi - 1));
    if (s.softcap > 0) {  // every column: the mask overwrites the ones a query does not see
      softcap(scores, size_t(nq) * c.cols, s.softcap);
      if (remaps) softcap(far, size_t(nq) * c.cols, s.softcap);
      if (s.q_farther) softcap(farther, size_t(nq) * c.cols, s.softcap);
    }
    for (int i = 0; i < nq; ++i) {
      float* row = scores + size_t(i) * c.cols;
      block.mask_and_bias(row, far ? far + size_t(i) * c.cols : nullptr, farther ? farther + size_t(i) * c.cols : nullptr,
                          i, q);  // 2.
      const int seen = c.col(p0 + i) + 1;
      if (position.stick_breaking() && s.stats)  // 3. without a softmax, the statistics summed
        s.stats->stick_breaking(s.layer, h, p0 + i, row, seen, c.sinks, c.lo);
      else if (position.stick_breaking())
        stick_breaking_weights(row, seen);  // 3.
      else if (s.stats)  // 3., the weights' statistics summed
        s.stats->softmax(s.layer, h, p0 + i, row, seen, c.sinks, c.lo, sink_logit(s, h));
      else if (s.sink_logits)
        softmax_with_sink_logit(row, seen, s.sink_logits[h]);  // 3.
      else
        softmax(row, seen);  // 3.
      std::fill(row + seen, row + c.cols, 0.0f);
    }
    block.weighted_sum(out, scores);  // 4.
  });
}

// ---- decoding ----

// One query (T = 1) over the keys it sees, split into blocks of kKeyBlock keys (the sinks' own
// blocks first, then the window's); each block leaves its partial [hd + 2]: Σ e^(s − max)·v,
// max, Σ e^(s − max).
// scores[j] = scale · keys[j]·q over n rows of hd, streamed once.
void scaled_dots(float* scores, const float* keys, const float* q, int n, int hd, float scale) {
  dot_rows(scores, keys, q, n, hd);
  for (int j = 0; j < n; ++j) scores[j] *= scale;
}

void attention_decode(float* out, const float* q, const KvRows& keys, const KvRows& values, const AttentionShape& s,
                      float scale, const PositionEncoding& position, AttentionScratch& scratch) {
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, pos = s.pos0;
  const KeyRule rule{s.window, s.chunk, s.pattern};
  const int lo = rule.lo(pos), sinks = std::min(rule.sinks(), lo), near = rule.near(pos), farther = rule.farther(pos);
  // Two runs of keys, each in blocks: the sinks [0, sinks) and the window [lo, pos]; or in a
  // ring (no sinks) the window up to where its rows wrap, and the rest.
  const int wrap = s.ring ? std::min(pos + 1, (lo / s.ring + 1) * s.ring) : 0;
  const int run0 = s.ring ? lo : 0, end0 = s.ring ? wrap : sinks, run1 = s.ring ? wrap : lo;
  const int sink_blocks = (end0 - run0 + kKeyBlock - 1) / kKeyBlock;
  const int n_blocks = sink_blocks + (pos + 1 - run1 + kKeyBlock - 1) / kKeyBlock;
  const int max_blocks = int(scratch.partials.size()) / (s.n_heads * (hd + 2));
  const bool terms = position.has_bias() || position.has_relative_terms();
  // A narrower cache's keys are read in registers, unless a scheme's terms read the keys too.
  auto fused = [&](const KvRows& k) {
    return k.type != CacheType::F32 && !position.has_relative_terms() && !s.rotate_keys;
  };
  float* const scores_all = scratch.scores.data();
  float* const partials = scratch.partials.data();  // [n_heads][max_blocks][hd + 2]
  parallel_for_2d(s.n_heads, n_blocks, [&](int h, int b) {
    const int thread = omp_get_thread_num();
    float* scores = scores_all + size_t(thread) * scratch.per_thread;  // [kKeyBlock]
    // widened keys, values (and far keys) of a narrower cache, in the thread's slots
    float *wk = nullptr, *wf = nullptr;
    if (scratch.widened_per_thread) {
      wk = scratch.widened.data() + size_t(thread) * scratch.widened_per_thread;
      wf = wk + 2 * scratch.widened_rows * size_t(hd);
    }
    const int key0 = b < sink_blocks ? run0 + b * kKeyBlock : run1 + (b - sink_blocks) * kKeyBlock;
    const int nk = std::min((b < sink_blocks ? end0 : pos + 1) - key0, kKeyBlock);
    const int row0 = cache_row(key0, s.ring);  // the block's rows follow one another
    const ptrdiff_t head = (h / group) * (s.kv_head_stride / hd);  // the kv head's first row
    float* partial = partials + (size_t(h) * max_blocks + b) * size_t(hd + 2);
    // 1–2. scores with bias and terms: keys [key0, split) scored far, [split, key0 + nk) near
    const int split = std::clamp(near, key0, key0 + nk), n_far = split - key0, n_near = nk - n_far;
    if (n_far > 0) {
      const float* kb = s.keys_far.at(head + row0).read(n_far, wf);
      if (s.rotate_keys) {  // in the thread's slot, at their far positions
        if (kb != wf) std::copy(kb, kb + size_t(n_far) * hd, wf);
        if (s.far_key_pos) position.rotate_at(wf, s.far_key_pos + key0, n_far, 1, hd, 0);
        else position.rotate(wf, key0, n_far, 1, hd, 0, false);
        kb = wf;
      }
      // keys [key0, split2) from the farther queries (a second far tier), the rest from the far ones
      const int n_farther = std::clamp(farther, key0, split) - key0;
      auto far_scores = [&](int from, int count, const float* qf, int query_pos) {
        if (count <= 0) return;
        scaled_dots(scores + from, kb + size_t(from) * hd, qf + size_t(h) * hd, count, hd, scale);
        if (s.softcap > 0) softcap(scores + from, size_t(count), s.softcap);
        if (terms)
          add_position_terms(position, scores + from, s.layer, h, query_pos, qf + size_t(h) * hd, kb + size_t(from) * hd,
                             key0 + from, count, scale);
        if (s.decay) add_decay(scores + from, s, h, pos, key0 + from, count);
      };
      if (n_farther > 0) far_scores(0, n_farther, s.q_farther, rule.farther_query(pos));
      far_scores(n_farther, n_far - n_farther, s.q_far, rule.far_query(pos));
    }
    if (n_near > 0 && fused(keys)) {
      keys.at(head + row0 + n_far).dot(q + size_t(h) * hd, n_near, scale, scores + n_far);
      if (s.softcap > 0) softcap(scores + n_far, size_t(n_near), s.softcap);
      if (terms) add_position_terms(position, scores + n_far, s.layer, h, pos, q + size_t(h) * hd, nullptr, split, n_near, scale);
      if (s.decay) add_decay(scores + n_far, s, h, pos, split, n_near);
    } else if (n_near > 0) {
      const float* kb = keys.at(head + row0 + n_far).read(n_near, wk);
      if (s.rotate_keys) {  // in the thread's slot, at positions split.. (the block stays in cache)
        if (kb != wk) std::copy(kb, kb + size_t(n_near) * hd, wk);
        position.rotate(wk, split, n_near, 1, hd, 0, false);
        kb = wk;
      }
      scaled_dots(scores + n_far, kb, q + size_t(h) * hd, n_near, hd, scale);
      if (s.softcap > 0) softcap(scores + n_far, size_t(n_near), s.softcap);
      if (terms)
        add_position_terms(position, scores + n_far, s.layer, h, pos, q + size_t(h) * hd, kb, split, n_near, scale);
      if (s.decay) add_decay(scores + n_far, s, h, pos, split, n_near);
    }
    // 3. the block's softmax, unnormalised
    const float max = *std::max_element(scores, scores + nk);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < nk; ++i) sum += (scores[i] = exp_nonpositive(scores[i] - max));
    // 4. the block's weighted sum
    if (values.type != CacheType::F32) {
      values.at(head + row0).weighted_sum(scores, nk, partial);
    } else {
      std::fill(partial, partial + hd, 0.0f);
      add_weighted_rows(partial, scores, values.f32 + (head + row0) * hd, nk, hd);
    }
    partial[hd] = max;
    partial[hd + 1] = sum;
  });
  // Merge: out = Σ_b e^(max_b − M) · out_b / (Σ_b e^(max_b − M) · sum_b + e^(sink − M)), M the
  // largest max and sink logit: the sink joins once, as one more partial whose output is 0.
  for (int h = 0; h < s.n_heads; ++h) {
    const float* p = partials + size_t(h) * max_blocks * size_t(hd + 2);
    const float sink = sink_logit(s, h);
    float M = std::max(p[hd], sink);
    for (int b = 1; b < n_blocks; ++b) M = std::max(M, p[size_t(b) * (hd + 2) + hd]);
    float* o = out + size_t(h) * hd;
    std::fill(o, o + hd, 0.0f);
    float total = exp_nonpositive(sink - M);
    for (int b = 0; b < n_blocks; ++b, p += hd + 2) {
      const float w = exp_nonpositive(p[hd] - M);
      total += w * p[hd + 1];
      for (int i = 0; i < hd; ++i) o[i] += w * p[i];
    }
    for (int i = 0; i < hd; ++i) o[i] /= total;
  }
}

// ---- prefill over several length classes ----

// The queries of a forward past L under a length-dependent rotation each turn keys at their own
// length class, so no two share a rotated key: each query turns the keys it sees itself. Per
// tile of kTurnTile queries and block of kTurnKeys keys (read from memory once per tile, then
// from L2): each query turns the block's keys of every kv head in the thread's scratch, scores
// them and folds them into its running softmax per head (max, sum, unnormalised output, as
// flash attention), normalised at the end. Rotations carry no bias or terms (positions.hpp).
void attention_turning(float* out, const float* q, const KvRows& key_rows, const KvRows& value_rows,
                       const AttentionShape& s, float scale, const PositionEncoding& position,
                       AttentionScratch& scratch) {
  const int hd = s.head_dim, nkv = s.n_kv_heads, group = s.n_heads / nkv, q_dim = s.n_heads * hd;
  const ptrdiff_t rows_per_head = s.kv_head_stride / hd;
  const size_t block = size_t(kTurnKeys) * size_t(hd);  // one kv head's block of keys
  const KeyRule rule{s.window, s.chunk, nullptr};
  parallel_for_2d((s.T + kTurnTile - 1) / kTurnTile, 1, [&](int tile, int) {
    float* turned = scratch.turning.data() + size_t(omp_get_thread_num()) * scratch.turning_per_thread;  // [kv_head][kTurnKeys][hd]
    float* wide_k = turned + nkv * block;         // [kv_head][kTurnKeys][hd]: a narrower cache's rows widened
    float* wide_v = wide_k + nkv * block;         // [kv_head][kTurnKeys][hd]
    float* scores = wide_v + nkv * block;         // [kTurnKeys]
    float* state = scores + kTurnKeys;            // [kTurnTile][n_heads][hd + 2]: output, max, sum
    const int t0 = tile * kTurnTile, nq = std::min(s.T, t0 + kTurnTile) - t0;
    const int first = s.pos0 + t0, last = first + nq - 1;
    // each running softmax starts from the head's sink logit (a column whose value is 0): max
    // sink, sum e^0 = 1; without one, max −inf, sum 0
    for (int i = 0; i < nq * s.n_heads; ++i) {
      float* st = state + size_t(i) * (hd + 2);
      std::fill(st, st + hd, 0.0f);
      const float sink = sink_logit(s, i % s.n_heads);
      st[hd] = sink, st[hd + 1] = s.sink_logits ? 1.0f : 0.0f;
    }
    for (int key0 = rule.lo(first); key0 <= last; key0 += kTurnKeys) {
      const int nk = std::min(kTurnKeys, last + 1 - key0);
      // the block's keys and values of every kv head as F32 rows, [kv_head] `stride` apart: the
      // cache's own, or a narrower cache's widened
      auto block_rows = [&](const KvRows& src, float* wide, ptrdiff_t& stride) {
        stride = src.type == CacheType::F32 ? s.kv_head_stride : ptrdiff_t(block);
        if (src.type == CacheType::F32) return src.f32 + ptrdiff_t(key0) * hd;
        for (int g = 0; g < nkv; ++g) src.at(g * rows_per_head + key0).read(nk, wide + g * block);
        return static_cast<const float*>(wide);
      };
      ptrdiff_t k_stride, v_stride;
      const float* keys = block_rows(key_rows, wide_k, k_stride);
      const float* values = block_rows(value_rows, wide_v, v_stride);
      for (int i = 0; i < nq; ++i) {
        const int m = first + i, a = std::max(key0, rule.lo(m)) - key0, b = std::min(key0 + nk, m + 1) - key0;
        if (a >= b) continue;  // keys [key0 + a, key0 + b) are the ones m sees in this block
        position.rotate_for_query(m, keys + a * hd, turned + a * hd, key0 + a, b - a, nkv, hd, k_stride, ptrdiff_t(block));
        for (int h = 0; h < s.n_heads; ++h) {
          const float* qh = q + size_t(t0 + i) * q_dim + size_t(h) * hd;
          dot_rows(scores + a, turned + (h / group) * block + a * hd, qh, b - a, hd);
          float max = -std::numeric_limits<float>::infinity();
          for (int j = a; j < b; ++j) scores[j] *= scale;
          if (s.softcap > 0) softcap(scores + a, size_t(b - a), s.softcap);
          for (int j = a; j < b; ++j) max = std::max(max, scores[j]);
          float* st = state + (size_t(i) * s.n_heads + h) * (hd + 2);
          const float new_max = std::max(st[hd], max), rescale = exp_nonpositive(st[hd] - new_max);
          float sum = st[hd + 1] * rescale;
#pragma omp simd reduction(+ : sum)
          for (int j = a; j < b; ++j) sum += (scores[j] = exp_nonpositive(scores[j] - new_max));
#pragma omp simd
          for (int d = 0; d < hd; ++d) st[d] *= rescale;
          add_weighted_rows(st, scores + a, values + (h / group) * v_stride + a * hd, b - a, hd);
          st[hd] = new_max, st[hd + 1] = sum;
        }
      }
    }
    for (int i = 0; i < nq; ++i)
      for (int h = 0; h < s.n_heads; ++h) {
        const float* st = state + (size_t(i) * s.n_heads + h) * (hd + 2);
        float* o = out + size_t(t0 + i) * q_dim + size_t(h) * hd;
        for (int d = 0; d < hd; ++d) o[d] = st[d] / st[hd + 1];
      }
  });
}

}  // namespace

void attention(float* out, const float* q, const KvRows& keys, const KvRows& values, const AttentionShape& s,
               float scale, const PositionEncoding& position, AttentionScratch& scratch) {
  if (s.turn_per_query) return attention_turning(out, q, keys, values, s, scale, position, scratch);
  if (s.T == 1 && !s.stats && !position.stick_breaking() && !position.has_contextual_positions())
    return attention_decode(out, q, keys, values, s, scale, position, scratch);
  attention_prefill(out, q, keys, values, s, scale, position, scratch);
}

}  // namespace pert
