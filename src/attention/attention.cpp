// One layer's attention for a step of n new positions, in the order it happens (Attention::layer):
//   0. scale keys             an "extend" method's factor on key n (Dual Chunk Attention's length scale)
//   1. far queries and keys   an "extend" pattern that remaps scores some pairs at other
//                             positions: copies of q (and k) rotated to far_query(m) (far_key(n)),
//                             and for a second far tier to farther_query(m)
//   2. rotate                 the scheme rotates q, and k as stored, unless its rotation depends
//                             on the length (dynamic NTK, LongRoPE): keys are then cached
//                             unrotated and rotated for this step when read (5)
//   3. store                  k and v join the cache (rounded there when it is narrower)
//   3b. forget gates          FoX: ln f of each new token and head from the layer's normed input,
//                             summed on from the last cached position's sum, kept beside the keys
//   4. scale queries          log-n's factor on query m's scores, on q (and q_far)
//   5. keys for the step      the cache's keys, or those rotated for this length (decoding:
//                             by the kernel, block by block as it reads them, far keys too; a step over
//                             several length classes: by the kernel, for each query at its own)
//   6. the kernel             kernel.cpp: scores, mask and bias, softmax (and sink logits), weighted sum
#include "attention/attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "pert/error.hpp"
#include "pert/memory.hpp"

namespace pert {

Attention::Attention(const ModelConfig& config, PositionEncoding& position, std::vector<int> layers, int n_ctx,
                     int n_batch, int n_seq, CacheType cache_type)
    : c_(config), position_(position), local_(size_t(config.n_layers), -1), extend_(config),
      narrow_(cache_type != CacheType::F32), values_in_keys_(config.mla.enabled() && !extend_.scales_keys()), n_ctx_(n_ctx), n_batch_(n_batch), n_seq_(n_seq),
      n_local_(int(layers.size())) {
  for (size_t i = 0; i < layers.size(); ++i) local_[size_t(layers[i])] = int(i);
  // Local layers keep only what they can attend: the last span + n_batch positions, in a ring,
  // when every layer here sees a bounded span and nothing needs the older keys (an "extend"
  // pattern, keys rotated on read, terms that read the keys).
  int span = 0;
  for (int l : layers) {
    const int s = c_.layers[size_t(l)].span();
    span = s < 0 || span < 0 ? -1 : std::max(span, s);
  }
  const bool ring_ok = span >= 0 && !layers.empty() && !extend_.pattern && !position.rotates_keys_on_read() &&
                       !position.has_relative_terms();
  rows_ = ring_ok && int64_t(span) + n_batch < n_ctx ? span + n_batch : n_ctx;
  ring_ = rows_ < n_ctx ? rows_ : 0;
  span_ = span;
  const size_t hd = size_t(c_.head_dim), q_dim = size_t(c_.n_heads) * hd, kv_dim = size_t(c_.n_kv_heads) * hd;
  far_ = extend_.pattern && extend_.pattern->remaps();
  farther_ = far_ && extend_.pattern->has_farther();
  far_key_cache_ = far_ && !extend_.pattern->far_keys_are_keys() && !position_.rotates_keys_on_read();
  const bool keys_read = position_.rotates_keys_on_read();
  const bool far_keys_read = far_ && !extend_.pattern->far_keys_are_keys() && keys_read;
  scale_ = c_.attention_scale > 0 ? float(c_.attention_scale) : score_scale(position_, c_.head_dim);
  // Checked before allocating: a hostile context size or config gets an error, never an
  // allocation that fails (or that the sanitizer build reports as a crash).
  const double caches = 1.0 + !values_in_keys_ + far_key_cache_;  // K, V (far K)
  const double cached = caches * n_seq * double(n_local_) * double(kv_dim);
  const double threads = omp_get_max_threads();
  const double cache_floats = cached * cache_bytes_per_value(cache_type, c_.head_dim) / 4.0 * rows_;  // (rows_ per head)
  const double per_position = double(kv_dim) * (keys_read + far_keys_read) +                // keys read
                              threads * kQueryBlock * (1 + far_ + farther_) +                // scores
                              (narrow_ ? (threads * (2.0 + far_) + 1.0) * c_.head_dim : 0.0);  // rows widened, shifted
  const double far_buffers = far_ ? double(n_batch) * double((1 + farther_) * q_dim + kv_dim) : 0.0;
  const bool gates = position_.has_forget_gates();
  const double decay_floats = gates ? 2.0 * n_seq * double(n_local_) * c_.n_heads * rows_ : 0.0;  // (doubles)
  require_memory(4.0 * (cache_floats + decay_floats + per_position * n_ctx + far_buffers),
                 "a context of " + (n_seq > 1 ? std::to_string(n_seq) + " × " : "") + std::to_string(n_ctx) +
                     " positions",
                 " (the KV cache grows with it); pass a smaller `n_ctx`");
  const size_t cache_rows = size_t(n_seq) * size_t(n_local_) * size_t(c_.n_kv_heads) * size_t(rows_);
  try {
    k_cache_ = KvCache(cache_type, cache_rows, c_.head_dim);
    if (!values_in_keys_) v_cache_ = KvCache(cache_type, cache_rows, c_.head_dim);
  } catch (const std::bad_alloc&) {
    throw Error("a KV cache for a context of " + std::to_string(n_ctx) + " needs " +
                std::to_string(size_t(caches * double(cache_rows) * c_.head_dim * cache_bytes_per_value(cache_type, c_.head_dim)) >> 20) +
                " MiB, more than is free; pass a smaller `n_ctx`");
  }
  position_.reserve(n_ctx);
  if (gates) {
    decay_.assign(size_t(n_seq) * size_t(n_local_) * size_t(c_.n_heads) * size_t(rows_), 0.0);
    log_gates_.resize(size_t(n_batch) * size_t(c_.n_heads));
  }
  if (keys_read) keys_read_.assign(kv_dim * size_t(n_ctx), 0.0f);
  if (narrow_ && position_.can_shift()) shift_rows_.assign(size_t(n_ctx) * hd, 0.0f);
  if (far_) {
    q_far_.resize(size_t(n_batch) * q_dim);
    far_query_pos_.resize(size_t(n_batch));
    if (farther_) q_farther_.resize(size_t(n_batch) * q_dim), farther_query_pos_.resize(size_t(n_batch));
    for (int n = 0; n < n_ctx; ++n) far_key_pos_.push_back(extend_.pattern->far_key(n));
    // whole far positions read the scheme's tables, so decoding can rotate them per block as it
    // reads them; fractional ones (Leaky ReRoPE) need a sincos each, better spent once per step
    far_keys_whole_ = std::all_of(far_key_pos_.begin(), far_key_pos_.end(), [](double p) { return p == std::floor(p); });
  }
  if (far_key_cache_) {
    k_far_.resize(size_t(n_batch) * kv_dim);
    k_far_cache_ = KvCache(cache_type, cache_rows, c_.head_dim);
  }
  if (far_keys_read) keys_far_read_.assign(kv_dim * size_t(n_ctx), 0.0f);
  scratch_ = std::make_unique<AttentionScratch>(c_.n_heads, c_.head_dim, n_ctx, int(far_) + int(farther_), narrow_, keys_read);
}

Attention::~Attention() = default;

void Attention::fit_threads() { scratch_->fit_threads(); }

size_t Attention::layer_row(int seq, int layer) const {
  return (size_t(seq) * size_t(n_local_) + size_t(local_[size_t(layer)])) * size_t(c_.n_kv_heads) * size_t(rows_);
}

int Attention::span(int pos, int max_n) const {
  const int mixed = far_ || stats_ ? 0 : position_.mixed_span(pos, max_n);
  if (mixed > 0) return mixed;
  const int length = position_.length_class(pos);
  int n = 1;
  while (n < max_n && position_.length_class(pos + n) == length) ++n;
  return n;
}

void Attention::begin(int pos0, int n, bool prepare_position) {
  pos0_ = pos0, n_ = n;
  // The step's rows overwrite the ring's positions [pos0 − ring, pos0 + n − ring); what followed
  // pos0 is stale already. Updated before any layer stores, so a step stopped midway is counted.
  if (ring_) oldest_ = std::max(std::min(oldest_, pos0), pos0 + n - ring_);
  const int length = position_.length_class(pos0);
  mixed_ = length != position_.length_class(pos0 + n - 1);  // a span of several classes (span())
  if (prepare_position && mixed_)
    position_.begin_mixed(pos0, n);
  else if (prepare_position)
    position_.begin_forward(length, pos0, n);
  for (int t = 0; far_ && t < n; ++t) far_query_pos_[size_t(t)] = extend_.pattern->far_query(pos0 + t);
  for (int t = 0; farther_ && t < n; ++t) farther_query_pos_[size_t(t)] = extend_.pattern->farther_query(pos0 + t);
}

void Attention::layer(int seq, int layer, float* q, float* k, const float* v, float* out, const float* sink_logits,
                      const float* x) {
  const int hd = c_.head_dim, q_dim = c_.n_heads * hd, kv_dim = c_.n_kv_heads * hd;
  const ptrdiff_t kv_head_stride = ptrdiff_t(rows_) * hd;
  const size_t row0 = layer_row(seq, layer);  // this layer's cache rows: [kv_head][rows_]
  float* q_far = far_ ? q_far_.data() : nullptr;  // [n][q_dim]
  float* q_farther = farther_ ? q_farther_.data() : nullptr;  // [n][q_dim]
  scale_keys(k);  // 0.
  if (far_) far_queries_and_keys(q, k, q_far, q_farther, row0);  // 1.
  if (mixed_) {  // 2. each query at its own length class
    for (int t = 0; t < n_; ++t) {
      float* qt = q + size_t(t) * q_dim;
      position_.rotate_for_query(pos0_ + t, qt, qt, pos0_ + t, 1, c_.n_heads, 0, hd, hd);
    }
  } else if (position_.rotates()) {
    position_.rotate(q, pos0_, n_, c_.n_heads, q_dim, hd, true);
    if (!position_.rotates_keys_on_read()) position_.rotate(k, pos0_, n_, c_.n_kv_heads, kv_dim, hd, false);
  }
  store(k, v, row0);  // 3.
  const double* decay = position_.has_forget_gates() ? forget_gates(x, seq, layer) : nullptr;  // 3b.
  scale_queries(q, q_far, q_farther, layer);  // 4.

  AttentionShape shape{n_, pos0_, c_.n_heads, c_.n_kv_heads, hd, kv_head_stride};
  shape.layer = layer;
  shape.window = c_.layers[size_t(layer)].window;
  shape.chunk = c_.layers[size_t(layer)].chunk;
  shape.softcap = float(c_.attn_softcap);
  shape.sink_logits = sink_logits;
  shape.ring = ring_;
  shape.pattern = extend_.pattern;
  // 5. keys as this step's queries see them: rotated for this length into keys_read_, or, for
  // one query, by the kernel block by block as it reads them
  shape.rotate_keys = position_.rotates_keys_on_read() && n_ == 1 && (!far_ || far_keys_whole_) && !stats_;
  shape.turn_per_query = mixed_;  // (by the kernel, each query at its own class)
  shape.stats = stats_;
  shape.decay = decay;
  shape.decay_stride = rows_;
  if (position_.stick_breaking() && sink_logits)
    throw Error("layer " + std::to_string(layer) + ": stick-breaking attention has no softmax for the learned sink logits (self_attn.sinks) to join");
  const KvRows keys = position_.rotates_keys_on_read() && !shape.rotate_keys && !mixed_
                          ? keys_for_step(row0, keys_read_, k_cache_, nullptr)
                          : k_cache_.rows(row0);
  if (far_) {
    shape.q_far = q_far;
    shape.q_farther = q_farther;
    const bool far_keys_are_keys = extend_.pattern->far_keys_are_keys();
    if (shape.rotate_keys && !far_keys_are_keys) shape.far_key_pos = far_key_pos_.data();
    shape.keys_far = far_keys_are_keys || shape.rotate_keys ? keys
                     : !keys_far_read_.empty()              ? keys_for_step(row0, keys_far_read_, k_cache_, far_key_pos_.data())
                                                            : k_far_cache_.rows(row0);
  }
  const KvRows values = values_in_keys_ ? k_cache_.rows(row0) : v_cache_.rows(row0);  // (MLA: the rows' latents)
  attention(out, q, keys, values, shape, scale_, position_, *scratch_);  // 6.
}

// Step 1: the far pass's queries (and keys, cached apart when their rotation is static) from
// the unrotated ones.
void Attention::far_queries_and_keys(float* q, const float* k, float* q_far, float* q_farther, size_t row0) {
  const int hd = c_.head_dim, q_dim = c_.n_heads * hd, kv_dim = c_.n_kv_heads * hd;
  std::copy(q, q + size_t(n_) * q_dim, q_far);
  position_.rotate_at(q_far, far_query_pos_.data(), n_, c_.n_heads, q_dim, hd);
  if (q_farther) {
    std::copy(q, q + size_t(n_) * q_dim, q_farther);
    position_.rotate_at(q_farther, farther_query_pos_.data(), n_, c_.n_heads, q_dim, hd);
  }
  if (!far_key_cache_) return;
  float* k_far = k_far_.data();
  std::copy(k, k + size_t(n_) * kv_dim, k_far);
  position_.rotate_at(k_far, &far_key_pos_[size_t(pos0_)], n_, c_.n_kv_heads, kv_dim, hd);
  for (int t = 0; t < n_; ++t)
    for (int h = 0; h < c_.n_kv_heads; ++h)
      k_far_cache_.store(row0 + size_t(h) * rows_ + size_t(pos0_ + t), k_far + size_t(t) * kv_dim + size_t(h) * hd);
}

// Step 3b: FoX's running sums c_n = c_(n−1) + ln f_n of each head for the step's positions, at
// their cache rows beside the keys (c_(pos0−1) read before any row is written: a short ring may
// reuse its row). Returns this (seq, layer)'s [n_heads][rows_].
const double* Attention::forget_gates(const float* x, int seq, int layer) {
  if (!x) throw Error("layer " + std::to_string(layer) + ": the forget gates need the layer's normed input");
  const int H = c_.n_heads;
  position_.log_forget_gates(log_gates_.data(), x, n_, layer);
  double* c = &decay_[(size_t(seq) * size_t(n_local_) + size_t(local_[size_t(layer)])) * size_t(H) * size_t(rows_)];
  auto row = [&](int p) { return size_t(ring_ ? p % ring_ : p); };
  for (int h = 0; h < H; ++h) {
    double* ch = c + size_t(h) * size_t(rows_);
    double sum = pos0_ > 0 ? ch[row(pos0_ - 1)] : 0.0;
    for (int t = 0; t < n_; ++t) ch[row(pos0_ + t)] = sum += double(log_gates_[size_t(t) * H + size_t(h)]);
  }
  return c;
}

// Step 3: rows (h, pos0 + t) of the layer's K and V caches.
void Attention::store(const float* k, const float* v, size_t row0) {
  const int hd = c_.head_dim, kv_dim = c_.n_kv_heads * hd;
  for (int t = 0; t < n_; ++t)
    for (int h = 0; h < c_.n_kv_heads; ++h) {
      const int p = pos0_ + t;
      const size_t src = size_t(t) * kv_dim + size_t(h) * hd, row = row0 + size_t(h) * rows_ + size_t(ring_ ? p % ring_ : p);
      k_cache_.store(row, k + src);
      if (!values_in_keys_) v_cache_.store(row, v + src);
    }
}

// Step 0: an "extend" method's factor on key n, on k as projected (so on its far copies too).
void Attention::scale_keys(float* k) const {
  const int kv_dim = c_.n_kv_heads * c_.head_dim;
  for (int t = 0; t < n_ && !extend_.scales.empty(); ++t) {
    const float f = float(extend_.key_scale(pos0_ + t));
    for (int i = 0; f != 1.0f && i < kv_dim; ++i) k[size_t(t) * kv_dim + i] *= f;
  }
}

// Step 4: log-n's factor and the layer's temperature on query m's scores, as a factor on q (and
// q_far, q_farther).
void Attention::scale_queries(float* q, float* q_far, float* q_farther, int layer) const {
  const int q_dim = c_.n_heads * c_.head_dim;
  const LayerAttention& l = c_.layers[size_t(layer)];
  if (extend_.scales.empty() && l.temperature_scale == 0.0) return;
  for (int t = 0; t < n_; ++t) {
    const float f = float(extend_.query_scale(pos0_ + t) * l.query_temperature(pos0_ + t));
    if (f == 1.0f) continue;
    for (int i = 0; i < q_dim; ++i) q[size_t(t) * q_dim + i] *= f;
    for (int i = 0; q_far && i < q_dim; ++i) q_far[size_t(t) * q_dim + i] *= f;
    for (int i = 0; q_farther && i < q_dim; ++i) q_farther[size_t(t) * q_dim + i] *= f;
  }
}

// Step 5 for a length-dependent rotation: the cached rows [0, pos0 + n) of every kv head,
// widened to F32 into `buffer` ([kv_head][n_ctx][hd]) and rotated at their positions (or at
// `far_positions`, the far keys').
KvRows Attention::keys_for_step(size_t row0, std::vector<float>& buffer, const KvCache& cache,
                                const double* far_positions) {
  const int hd = c_.head_dim, n_keys = pos0_ + n_;
  const ptrdiff_t kv_head_stride = ptrdiff_t(n_ctx_) * hd;
  for (int h = 0; h < c_.n_kv_heads; ++h)
    cache.load(&buffer[size_t(h) * kv_head_stride], row0 + size_t(h) * rows_, size_t(n_keys));
  if (far_positions)
    position_.rotate_at(buffer.data(), far_positions, n_keys, c_.n_kv_heads, hd, kv_head_stride);
  else
    position_.rotate(buffer.data(), 0, n_keys, c_.n_kv_heads, hd, kv_head_stride, false);
  return KvRows::of(buffer.data(), hd);
}

int Attention::first_key(int m) const {
  int first = m;
  for (int l = 0; l < c_.n_layers; ++l)
    if (local_[size_t(l)] >= 0) first = std::min(first, c_.layers[size_t(l)].first_key(m));
  return first;
}

int Attention::earliest_start() const {
  if (!ring_ || oldest_ == 0) return 0;
  // The first m that reads from oldest_ on: first_key never decreases, and in a ring's layers
  // first_key(m) >= m − span_, so it lies in [oldest_, oldest_ + span_].
  int lo = oldest_, hi = oldest_ + span_;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (first_key(mid) >= oldest_) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// A ring no longer holds the positions a shift keeps before the discarded ones.
bool Attention::can_shift() const { return position_.can_shift() && !extend_.pattern && !ring_; }

void Attention::shift(int n_keep, int n_discard, int n_past) {
  const int hd = c_.head_dim, n_move = n_past - n_keep - n_discard;
  const ptrdiff_t kv_head_stride = ptrdiff_t(rows_) * hd;
  const int heads = n_seq_ * n_local_ * c_.n_kv_heads;  // every (sequence, layer, kv head)
  for (int i = 0; i < heads; ++i) {
    const size_t keep = size_t(i) * size_t(rows_) + size_t(n_keep);  // the head's first moved-to row
    k_cache_.move(keep, keep + size_t(n_discard), size_t(n_move));
    if (!values_in_keys_) v_cache_.move(keep, keep + size_t(n_discard), size_t(n_move));
    if (narrow_ && n_move > 0) {  // re-rotated in F32, rounded again (as llama.cpp's K-shift of a quantized cache)
      k_cache_.load(shift_rows_.data(), keep, size_t(n_move));
      position_.shift_keys(shift_rows_.data(), n_move, 1, hd, ptrdiff_t(n_move) * hd, n_discard);
      k_cache_.store(keep, shift_rows_.data(), size_t(n_move));
    }
  }
  if (!narrow_) position_.shift_keys(k_cache_.f32(size_t(n_keep)), n_move, heads, hd, kv_head_stride, n_discard);
}

}  // namespace pert
