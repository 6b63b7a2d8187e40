// The forward pass of model.hpp's InferenceState: embeddings (plus absolute positions), then per
// layer the attention block and the MLP over every sequence's rows at once, then the logits.
#include <algorithm>
#include <cstring>

#include "attention/attention.hpp"
#include "model/mla.hpp"
#include "model/moe.hpp"
#include "model/weights.hpp"
#include "pert/error.hpp"
#include "pert/interrupt.hpp"
#include "pert/memory.hpp"
#include "pert/model.hpp"
#include "pert/positions.hpp"

namespace pert {

struct InferenceState::Units {
  // One encoding per scheme the model uses (config.position, config.layers[i].position), and one
  // attention unit per scheme and span the layers use: its layers' caches, rotations and the kernel.
  std::vector<std::unique_ptr<PositionEncoding>> encodings;
  PositionEncoding* position = nullptr;  // the model's: what adds to the embeddings
  std::vector<std::unique_ptr<Attention>> units;
  std::vector<bool> prepares;    // [unit]: the first unit of its encoding, which prepares its tables each step
  std::vector<Attention*> of_layer;  // [layer]: its unit
  std::unique_ptr<MlaBlock> mla;     // DeepSeek's latent attention's projections (mla.hpp), when the model has it
};

InferenceState::InferenceState(const Model& model, int n_ctx, int n_batch, int n_seq, CacheType cache_type)
    : model_(model), c_(model.config()), units_(std::make_unique<Units>()), n_ctx_(n_ctx),
      n_batch_(std::min(n_batch, n_ctx)), n_seq_(n_seq) {
  if (n_ctx < 1) throw Error("context size must be at least 1, got " + std::to_string(n_ctx));
  if (n_batch < 1) throw Error("batch size must be at least 1, got " + std::to_string(n_batch));
  if (n_seq < 1) throw Error("sequence count must be at least 1, got " + std::to_string(n_seq));
  const TensorLookup lookup = [&](const std::string& name) { return model.tensor(name); };
  Units& u = *units_;
  u.encodings.push_back(make_position_encoding(c_, lookup));
  u.position = u.encodings[0].get();
  // One encoding per scheme; one attention unit per scheme and span (a local layer's cache is a ring)
  std::vector<const SchemeConfig*> schemes = {c_.position.scheme.get()};  // [encoding]
  std::vector<std::pair<size_t, int>> unit_keys;                          // [unit]: (encoding, span)
  std::vector<std::vector<int>> layers_of;                                // [unit]
  for (int l = 0; l < c_.n_layers; ++l) {
    const PositionConfig& p = c_.layers[size_t(l)].position;
    const size_t e = size_t(std::find(schemes.begin(), schemes.end(), p.scheme.get()) - schemes.begin());
    if (e == schemes.size()) {
      schemes.push_back(p.scheme.get());
      u.encodings.push_back(make_position_encoding(c_, p, lookup));
    }
    const std::pair<size_t, int> key{e, c_.layers[size_t(l)].span()};
    const size_t i = size_t(std::find(unit_keys.begin(), unit_keys.end(), key) - unit_keys.begin());
    if (i == unit_keys.size()) unit_keys.push_back(key), layers_of.emplace_back();
    layers_of[i].push_back(l);
  }
  u.of_layer.assign(size_t(c_.n_layers), nullptr);
  for (size_t i = 0; i < unit_keys.size(); ++i) {
    u.units.push_back(std::make_unique<Attention>(c_, *u.encodings[unit_keys[i].first], layers_of[i], n_ctx, n_batch_,
                                                  n_seq, cache_type));
    for (int l : layers_of[i]) u.of_layer[size_t(l)] = u.units.back().get();
    u.prepares.push_back(std::find_if(unit_keys.begin(), unit_keys.end(), [&](const std::pair<size_t, int>& k) {
                           return k.first == unit_keys[i].first; }) - unit_keys.begin() == ptrdiff_t(i));
  }
  const size_t d = size_t(c_.hidden_size), q_dim = size_t(c_.n_heads) * c_.head_dim;
  const size_t kv_dim = size_t(c_.n_kv_heads) * c_.head_dim, B = size_t(n_batch_) * size_t(n_seq);
  const double activations = double(B) * (4.0 * double(d) + 2.0 * double(c_.intermediate_size) + 4.0 * double(q_dim));
  require_memory(4.0 * activations, "a batch of " + std::to_string(B) + " positions");
  x_.resize(B * d);
  xb_.resize(B * d);
  q_.resize(B * q_dim);
  att_.resize(B * q_dim);
  k_.resize(B * kv_dim);
  v_.resize(B * kv_dim);
  gate_.resize(B * size_t(c_.intermediate_size));
  up_.resize(B * size_t(c_.intermediate_size));
  if (c_.moe.n_experts > 0) moe_ = std::make_unique<MoeBlock>(c_, int(B));
  if (c_.mla.enabled()) u.mla = std::make_unique<MlaBlock>(c_, int(B));
  for (const auto& e : u.encodings)
    if (e->encodes_by_sequence_length()) tokens_run_.assign(size_t(n_seq) * size_t(n_ctx), 0);
}

InferenceState::~InferenceState() = default;

CacheType InferenceState::cache_type() const { return units_->units[0]->cache_type(); }

size_t InferenceState::kv_cache_bytes() const {
  size_t bytes = 0;
  for (const auto& unit : units_->units) bytes += unit->cache_bytes();
  return bytes;
}

int InferenceState::earliest_rewind() const {
  int earliest = 0;
  for (const auto& unit : units_->units) earliest = std::max(earliest, unit->earliest_start());
  return earliest;
}

int InferenceState::max_positions() const { return units_->position->max_positions(); }

void InferenceState::observe_attention(AttentionStats* stats) {
  observed_ = stats;
  for (auto& unit : units_->units) unit->observe(stats);
}

// Explicit positions per axis: M-RoPE's alone (every scheme that places tokens must take them).
void InferenceState::check_axis_positions(const int* positions, int n) const {
  if (!positions) return;
  for (const auto& e : units_->encodings)
    if (e->position_axes() == 0 && (e->rotates() || e->has_bias() || e->has_relative_terms() || e->max_positions() > 0 ||
                                    c_.position.scheme->kind() == SchemeKind::Absolute))
      throw Error("forward: explicit positions per axis are M-RoPE's (Qwen2-VL, Qwen3-VL), but this model's " +
                  position_label(c_) + " places tokens by their index");
  if (!c_.extend.empty())
    throw Error("forward: explicit positions per axis do not combine with \"extend\" methods, which place pairs by index");
  const int limit = std::max(n_ctx_, c_.max_position_embeddings);
  for (size_t i = 0; i < size_t(n) * 3; ++i)
    if (positions[i] < 0 || positions[i] >= limit)
      throw Error("forward: token " + std::to_string(i / 3) + "'s position on axis " + "thw"[i % 3] + " is " +
                  std::to_string(positions[i]) + ", outside [0, " + std::to_string(limit) + ")");
}

void InferenceState::forward(const int* tokens, int n, int pos0, float* logits, bool all_logits, const int* positions) {
  if (n < 1) throw Error("forward: no tokens");
  if (pos0 < 0 || pos0 > n_past_)
    throw Error("forward: position " + std::to_string(pos0) + " leaves a gap after the " + std::to_string(n_past_) +
                " cached positions");
  if (n > n_ctx_ - pos0)
    throw Error("forward: positions up to " + std::to_string(int64_t(pos0) + n - 1) + " exceed the context size " +
                std::to_string(n_ctx_));
  for (size_t i = 0; i < size_t(n) * size_t(n_seq_); ++i)
    if (tokens[i] < 0 || tokens[i] >= c_.vocab_size)
      throw Error("forward: token id " + std::to_string(tokens[i]) + " is outside the vocabulary [0, " +
                  std::to_string(c_.vocab_size) + ")");
  // A scheme that encodes every position by the sequence's length (LongRoPE as transformers runs
  // it) needs the cached positions re-encoded when this forward changes that length's class.
  bool reencode = false;
  for (const auto& e : units_->encodings)
    reencode |= pos0 > 0 && e->sequence_class(pos0 + n) != e->sequence_class(encoded_length_);
  if (!reencode && pos0 > 0 && pos0 < n_past_ && pos0 < earliest_rewind()) {
    const Attention* ring = nullptr;  // the unit that refuses (the one that needs the largest batch)
    int batch = 0;                    // the n_batch whose ring would hold what pos0 reads after n_past
    for (const auto& unit : units_->units) {
      const int needs = n_past_ - unit->first_key(pos0) - unit->span();
      if (pos0 < unit->earliest_start() && needs > batch) ring = unit.get(), batch = needs;
    }
    throw Error("forward: cannot rewind to position " + std::to_string(pos0) + ": the local layers (a window or chunk of " +
                std::to_string(ring->span() + 1) + ") keep only the last " + std::to_string(ring->ring()) + " positions, the " +
                std::to_string(ring->span()) + " keys before a query and a batch of " + std::to_string(n_batch_) +
                ", no longer the keys from " + std::to_string(ring->first_key(pos0)) +
                " on that it reads; rewind to 0 or to a position from " + std::to_string(earliest_rewind()) + " to " +
                std::to_string(n_past_) + ", or use n_batch >= " + std::to_string(batch) + " to rewind this far");
  }
  check_axis_positions(positions, n);
  for (auto& unit : units_->units) unit->fit_threads();
  if (!tokens_run_.empty()) {
    for (int s = 0; s < n_seq_; ++s)
      std::copy(tokens + size_t(s) * n, tokens + size_t(s) * n + n, &tokens_run_[size_t(s) * n_ctx_ + pos0]);
    for (auto& e : units_->encodings) e->begin_sequence(pos0 + n);
    encoded_length_ = pos0 + n;  // (what is cached from here on, re-encoded or not, has its class)
  }
  // Positions [first, first + count) of tokens [seq][stride], in chunks of at most n_batch
  // positions of one length class or of several (Attention::span); logits as forward() writes them.
  const size_t V = size_t(c_.vocab_size);
  auto run = [&](const int* toks, int stride, int first, int count, float* out, bool all) {
    for (int done = 0, chunk; done < count; done += chunk) {
      chunk = std::min(n_batch_, count - done);
      for (auto& unit : units_->units) chunk = unit->span(first + done, chunk);
      for (auto& e : units_->encodings)  // M-RoPE's positions of the chunk (none: by index)
        e->set_axis_positions(positions && toks == tokens ? positions + size_t(done) * 3 : nullptr, first + done, chunk);
      const bool last = done + chunk == count;
      float* o = !out ? nullptr : all ? out + size_t(done) * V : (last ? out : nullptr);
      forward_chunk(toks + done, stride, chunk, first + done, o, all ? size_t(count) * V : V, all);
    }
  };
  // What follows pos0 is replaced (and with a re-encoding, all of it): stopped midway
  // (check_interrupt), the cache holds [0, n_past).
  n_past_ = reencode ? 0 : pos0;
  if (reencode) {  // positions [0, pos0) again, unobserved: their statistics were summed when they ran
    for (auto& unit : units_->units) unit->observe(nullptr);
    try {
      run(tokens_run_.data(), n_ctx_, 0, pos0, nullptr, false);
    } catch (...) {
      observe_attention(observed_);
      throw;
    }
    observe_attention(observed_);
  }
  run(tokens, n, pos0, n, logits, all_logits);
}

bool InferenceState::shift(int n_keep, int n_discard) {
  if (n_keep < 0 || n_discard < 1 || n_discard > n_past_ - n_keep)  // (n_keep + n_discard may overflow)
    throw Error("context shift: cannot drop [" + std::to_string(n_keep) + ", " + std::to_string(int64_t(n_keep) + n_discard) +
                ") of " + std::to_string(n_past_) + " cached positions");
  for (auto& unit : units_->units)
    if (!unit->can_shift()) return false;
  for (auto& unit : units_->units) unit->shift(n_keep, n_discard, n_past_);
  for (size_t s = 0; s < size_t(n_seq_) && !tokens_run_.empty(); ++s) {  // the tokens follow their positions
    int* row = &tokens_run_[s * size_t(n_ctx_)];
    std::copy(row + n_keep + n_discard, row + n_past_, row + n_keep);
  }
  n_past_ -= n_discard;
  return true;
}

void InferenceState::forward_chunk(const int* tokens, int stride, int n, int pos0, float* logits,
                                   size_t logits_stride, bool all_logits) {
  const ModelConfig& c = c_;
  const int d = c.hidden_size, ff = c.intermediate_size, S = n_seq_, rows = S * n;
  const int q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const float eps = float(c.rms_norm_eps);
  const Units& u = *units_;
  const ModelWeights& weights = model_.weights();
  for (size_t i = 0; i < u.units.size(); ++i) u.units[i]->begin(pos0, n, u.prepares[i]);  // (and each scheme's tables)

  // x [S][n][d]: token embeddings (Gemma: × √d), plus absolute positions for the schemes that add them.
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < n; ++t) model_.embedding(tokens[size_t(s) * stride + t], &x_[(size_t(s) * n + t) * d]);
    if (c.embed_scale != 1.0)
      for (size_t i = size_t(s) * n * d; i < size_t(s + 1) * n * d; ++i) x_[i] *= float(c.embed_scale);
    u.position->add_to_embeddings(&x_[size_t(s) * n * d], pos0, n);
  }

  // RMSNorm, or Cohere's LayerNorm, of `count` rows
  auto norm = [&](float* out, const float* in, const float* weight, int count) {
    if (c.layer_norm)
      layernorm(out, in, weight, count, d, eps);
    else
      rmsnorm(out, in, weight, count, d, eps);
  };
  auto add_normed = [&](const float* weight) {  // x += rmsnorm(xb): a branch's output, normalised (Gemma)
    norm(xb_.data(), xb_.data(), weight, rows);
    for (size_t i = 0; i < size_t(rows) * size_t(d); ++i) x_[i] += xb_[i];
  };
  for (int l = 0; l < c.n_layers; ++l) {
    check_interrupt();  // a long prefill, and every window or token, can be stopped between layers
    const LayerWeights& w = weights.layers[size_t(l)];
    // h = x + o_proj(attn(rmsnorm(x))); the projections see all S·n rows at once (what running
    // sequences in step buys), attention each sequence's own cache.
    norm(xb_.data(), x_.data(), w.attn_norm, rows);
    if (u.mla)  // DeepSeek: the queries with kv_b absorbed, and the latent row that is cached (mla.hpp)
      u.mla->project(w.mla, xb_.data(), rows, q_.data(), k_.data(), v_.data());
    else
      matmul_shared(xb_.data(), rows, d, {{q_.data(), &w.wq, q_dim}, {k_.data(), &w.wk, kv_dim}, {v_.data(), &w.wv, kv_dim}});
    if (w.bq) {
      add_rows(q_.data(), w.bq, rows, q_dim);
      add_rows(k_.data(), w.bk, rows, kv_dim);
      add_rows(v_.data(), w.bv, rows, kv_dim);
    }
    if (w.q_norm && c.qk_norm_whole) {  // OLMoE: one RMSNorm over each row's whole q and k
      rmsnorm(q_.data(), q_.data(), w.q_norm, rows, q_dim, eps);
      rmsnorm(k_.data(), k_.data(), w.k_norm, rows, kv_dim, eps);
    } else if (w.q_norm) {  // q_ and k_ are [rows][heads][hd]: one RMSNorm per head vector
      rmsnorm(q_.data(), q_.data(), w.q_norm, rows * c.n_heads, c.head_dim, eps);
      rmsnorm(k_.data(), k_.data(), w.k_norm, rows * c.n_kv_heads, c.head_dim, eps);
    }
    if (c.clip_qkv > 0) {  // OLMoE's clip_qkv, after the norms
      const float clip = float(c.clip_qkv);
      for (std::vector<float>* t : {&q_, &k_, &v_})
        for (size_t i = 0; i < size_t(rows) * size_t(t == &q_ ? q_dim : kv_dim); ++i) (*t)[i] = std::clamp((*t)[i], -clip, clip);
    }
    for (int s = 0; s < S; ++s)
      u.of_layer[size_t(l)]->layer(s, l, &q_[size_t(s) * n * q_dim], &k_[size_t(s) * n * kv_dim], &v_[size_t(s) * n * kv_dim],
                        &att_[size_t(s) * n * q_dim], w.sink_logits, &xb_[size_t(s) * n * d]);
    // (DeepSeek: each head's weighted latent expanded to its values)
    const float* att = u.mla ? u.mla->expand(w.mla, att_.data(), rows) : att_.data();
    const int o_in = u.mla ? u.mla->output_width() : q_dim;
    // (Gemma: the branch's output normalised before it joins x)
    matmul(w.post_attn_norm ? xb_.data() : x_.data(), att, w.wo, rows, o_in, d, /*accumulate=*/!w.post_attn_norm);
    if (w.bo) add_rows(w.post_attn_norm ? xb_.data() : x_.data(), w.bo, rows, d);
    if (w.post_attn_norm) add_normed(w.post_attn_norm);

    // out = h + down(silu(gate(rmsnorm(h))) * up(rmsnorm(h)))  (Gemma: GeGLU, and the output normalised)
    // (Cohere: the MLP reads the attention's input, xb, as it is: out = x + attn(n) + mlp(n))
    if (w.ffn_norm) norm(xb_.data(), x_.data(), w.ffn_norm, rows);
    if (!w.moe.experts.empty()) {  // a mixture of experts in place of the MLP (moe.cpp)
      moe_->forward(w.moe, xb_.data(), rows, w.post_ffn_norm ? xb_.data() : x_.data(), /*accumulate=*/!w.post_ffn_norm);
      if (w.post_ffn_norm) add_normed(w.post_ffn_norm);
      continue;
    }
    matmul_shared(xb_.data(), rows, d, {{gate_.data(), &w.w_gate, ff}, {up_.data(), &w.w_up, ff}});
    if (w.b_gate) {
      add_rows(gate_.data(), w.b_gate, rows, ff);
      add_rows(up_.data(), w.b_up, rows, ff);
    }
    if (c.activation == Activation::GeluTanh)
      geglu_tanh(gate_.data(), up_.data(), size_t(rows) * ff);
    else
      swiglu(gate_.data(), up_.data(), size_t(rows) * ff);
    matmul(w.post_ffn_norm ? xb_.data() : x_.data(), gate_.data(), w.w_down, rows, ff, d, /*accumulate=*/!w.post_ffn_norm);
    if (w.b_down) add_rows(w.post_ffn_norm ? xb_.data() : x_.data(), w.b_down, rows, d);
    if (w.post_ffn_norm) add_normed(w.post_ffn_norm);
  }
  n_past_ = pos0 + n;
  if (!logits) return;
  // logits = lm_head(rmsnorm(x)) of the last position, or of every position
  const int first = all_logits ? 0 : n - 1, out_rows = n - first;
  for (int s = 0; s < S; ++s) {
    norm(xb_.data(), &x_[(size_t(s) * n + first) * d], weights.final_norm, out_rows);
    matmul(logits + size_t(s) * logits_stride, xb_.data(), weights.lm_head, out_rows, d, c.vocab_size);
    if (c.logit_scale != 1.0)
      for (size_t i = 0; i < size_t(out_rows) * c.vocab_size; ++i) logits[size_t(s) * logits_stride + i] *= float(c.logit_scale);
    if (c.final_softcap > 0) softcap(logits + size_t(s) * logits_stride, size_t(out_rows) * c.vocab_size, float(c.final_softcap));
  }
}

}  // namespace pert
