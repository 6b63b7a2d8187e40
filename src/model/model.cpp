#include "pert/model.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "pert/error.hpp"
#include "pert/interrupt.hpp"
#include "pert/memory.hpp"
#include "pert/model_dir.hpp"
#include "pert/ops.hpp"
#include "pert/quants.hpp"
#include "pert/safetensors.hpp"
#include "tensor_names.hpp"

namespace pert {

namespace {
struct WeightTypeName {
  WeightType type;
  const char* flag;  // --dtype
  const char* name;  // in tables
  BlockType blocks;  // the GGML type, for Q8_0 ... Q6_K
};
const WeightTypeName kWeightTypes[] = {
    {WeightType::Auto, "auto", "auto", BlockType::F32},  {WeightType::F32, "f32", "F32", BlockType::F32},
    {WeightType::BF16, "bf16", "BF16", BlockType::BF16}, {WeightType::Q8, "q8", "Q8", BlockType::Q8_0},
    {WeightType::Q8_0, "q8_0", "Q8_0", BlockType::Q8_0}, {WeightType::Q4_0, "q4_0", "Q4_0", BlockType::Q4_0},
    {WeightType::Q4_1, "q4_1", "Q4_1", BlockType::Q4_1}, {WeightType::Q5_0, "q5_0", "Q5_0", BlockType::Q5_0},
    {WeightType::Q5_1, "q5_1", "Q5_1", BlockType::Q5_1}, {WeightType::Q4_K, "q4_k", "Q4_K", BlockType::Q4_K},
    {WeightType::Q5_K, "q5_k", "Q5_K", BlockType::Q5_K}, {WeightType::Q6_K, "q6_k", "Q6_K", BlockType::Q6_K},
};
const WeightTypeName& entry(WeightType type) {
  for (const WeightTypeName& e : kWeightTypes)
    if (e.type == type) return e;
  return kWeightTypes[0];
}
// GGML's blocks for the types quantized at load into them.
bool is_block_type(WeightType type) { return type >= WeightType::Q8_0; }

// The type a row of K values is quantized to: `wanted`, or where K is not whole blocks of it,
// what llama-quantize falls back to (K-quants to a type with blocks of 32, then F16).
BlockType block_type_for(BlockType wanted, int K) {
  BlockType t = wanted;
  if (K % block_type_info(t).block_size != 0)
    t = t == BlockType::Q4_K ? BlockType::Q5_0 : t == BlockType::Q5_K ? BlockType::Q5_1 : t == BlockType::Q6_K ? BlockType::Q8_0 : t;
  return K % block_type_info(t).block_size == 0 ? t : BlockType::F16;
}
}  // namespace

const char* weight_type_name(WeightType type) { return entry(type).name; }

const std::vector<std::string>& weight_type_flags() {
  static const std::vector<std::string> flags = [] {
    std::vector<std::string> out;
    for (const WeightTypeName& e : kWeightTypes) out.push_back(e.flag);
    return out;
  }();
  return flags;
}

std::string resolved_dtype(const std::string& flag, const std::filesystem::path& model) {
  return flag == "auto" && !is_gguf_file(model) ? "f32" : flag;
}

WeightType parse_weight_type(const std::string& name) {
  std::string all;
  for (const WeightTypeName& e : kWeightTypes) {
    if (name == e.flag) return e.type;
    all += (all.empty() ? "" : ", ") + std::string(e.flag);
  }
  throw Error("dtype: must be one of " + all + ", got '" + name + "'");
}

namespace {

// Where the rows of a stored matrix go: Phi-3's fused qkv_proj and gate_up_proj are split into
// llama's q/k/v and gate/up at load, so the forward pass knows one layout.
struct RowSlice {
  std::string name;
  int64_t row0, rows;
};
std::vector<RowSlice> row_slices(const ModelConfig& c, const ExpectedTensor& e) {
  using tensor_names::Part;
  // The layer's prefix ("model.layers.N.") when e is the fused part `fused`.
  auto is = [&](Part fused, std::string& layer) {
    const std::string suffix = std::string(tensor_names::part_name(fused)) + ".weight";
    if (!c.fused_projections || e.name.size() <= suffix.size() ||
        e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      return false;
    layer = e.name.substr(0, e.name.size() - suffix.size());
    return true;
  };
  auto name = [](const std::string& layer, Part part) { return layer + tensor_names::part_name(part) + ".weight"; };
  const int64_t q = int64_t(c.n_heads) * c.head_dim, kv = int64_t(c.n_kv_heads) * c.head_dim, ff = c.intermediate_size;
  std::string l;
  if (is(Part::QKV, l)) return {{name(l, Part::Q), 0, q}, {name(l, Part::K), q, kv}, {name(l, Part::V), q + kv, kv}};
  if (is(Part::GateUp, l)) return {{name(l, Part::Gate), 0, ff}, {name(l, Part::Up), ff, ff}};
  return {{e.name, 0, e.shape[0]}};
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::filesystem::path& dir, const ConfigOverrides& overrides, WeightType type) {
  const ModelDir md = open_model_dir(dir, overrides);
  auto m = std::make_unique<Model>();
  m->config_ = md.config;
  m->type_ = type == WeightType::Auto && !md.gguf ? WeightType::F32 : type;  // a directory stores F32/F16/BF16
  m->gguf_ = md.gguf;
  // The positional scheme's own tensors (tables, biases, its projections) stay F32: schemes read
  // them as floats (TensorLookup).
  std::set<std::string> scheme_tensors;
  for (const ExpectedTensor& t : position_tensors(md.config)) scheme_tensors.insert(t.name);
  auto q8_tensor = [&](const RowSlice& part, int K) -> Q8Tensor& {  // a part's Q8 matrix, sized
    Q8Tensor& q = m->q8_tensors_[part.name];
    q.packed.resize(q8_packed_size(int(part.rows), K));
    q.scales.resize(q8_scales_size(int(part.rows), K));
    return q;
  };
  // Quantized matrices go to panels of 8 rows (quants.hpp: has_panels), all but the embedding,
  // which is read by rows; false where the rows stay as they are (a type without panels, or a
  // part whose rows are not whole panels), for the caller to keep.
  auto keep_blocks = [&](const RowSlice& part, const uint8_t* rows, BlockType type, size_t row_bytes, int K) {
    if (!has_panels(type) || part.rows % 8 != 0 || part.name == tensor_names::kEmbed) return false;
    std::vector<uint8_t>& panels = m->block_tensors_[part.name];
    const size_t panel_row = panel_row_bytes(type, K);
    panels.resize(size_t(part.rows) * panel_row);
    repack_panels(type, rows, row_bytes, int(part.rows), K, panels.data());
    m->block_weights_[part.name] = {panels.data(), type, panel_row, true};
    return true;
  };
  for (const ExpectedTensor& e : expected_tensors(md.config)) {
    check_interrupt();  // a large model's load (checked, converted, packed) can be stopped tensor by tensor
    const TensorView& view = *md.checkpoint.find(e.name);
    require_finite(view);  // at load, by name, rather than as NaN logits later
    // Matrices go to BF16 (BF16 checkpoints as stored) or Q8 when asked; vectors stay F32.
    const bool matrix = e.shape.size() == 2 && !scheme_tensors.count(e.name);
    const std::vector<RowSlice> slices = row_slices(md.config, e);
    const int K = matrix ? int(e.shape[1]) : 0;
    const bool in_place = matrix && type == WeightType::Auto && md.checkpoint.storage() &&
                          (view.blocks || view.dtype != DType::F32);  // a GGUF file's F16/BF16/quantized rows
    if (in_place) {
      const BlockType stored = view.blocks ? view.blocks->type : view.dtype == DType::F16 ? BlockType::F16 : BlockType::BF16;
      const size_t row_bytes = block_row_bytes(stored, K);
      if (stored == BlockType::Q8_0) {  // the same numbers in Q8's panels: its kernels run them faster
        for (const RowSlice& part : slices) {
          Q8Tensor& q = q8_tensor(part, K);
          repack_q8_0(q.packed.data(), q.scales.data(), view.data + size_t(part.row0) * row_bytes, row_bytes,
                      int(part.rows), K);
        }
        release_pages(view);
        continue;
      }
      bool repacked = true;
      for (const RowSlice& part : slices) {
        const uint8_t* rows = view.data + size_t(part.row0) * row_bytes;
        if (keep_blocks(part, rows, stored, row_bytes, K)) continue;
        m->block_weights_[part.name] = {rows, stored, row_bytes};
        repacked = false;
      }
      if (repacked) {
        release_pages(view);
        continue;
      }
      m->storage_ = md.checkpoint.storage();
      continue;  // its pages stay: the products read them
    }
    if (matrix && is_block_type(type)) {
      const BlockType blocks = block_type_for(entry(type).blocks, K);
      const std::vector<float> f = read_f32(view);
      const size_t row_bytes = block_row_bytes(blocks, K);
      for (const RowSlice& part : slices) {
        std::vector<uint8_t> q(size_t(part.rows) * row_bytes);
        for (int64_t r = 0; r < part.rows; ++r)
          quantize_row(blocks, f.data() + size_t(part.row0 + r) * size_t(K), q.data() + size_t(r) * row_bytes, K);
        if (keep_blocks(part, q.data(), blocks, row_bytes, K)) continue;
        std::vector<uint8_t>& kept = m->block_tensors_[part.name] = std::move(q);
        m->block_weights_[part.name] = {kept.data(), blocks, row_bytes};
      }
    } else if (type == WeightType::BF16 && matrix) {
      std::vector<uint16_t> rows(size_t(view.numel));  // [N][K] as stored, or rounded
      if (view.dtype == DType::BF16 && !view.blocks) {
        std::memcpy(rows.data(), view.data, view.nbytes);
      } else {
        const std::vector<float> f = read_f32(view);
        for (size_t i = 0; i < f.size(); ++i) rows[i] = f32_to_bf16(f[i]);
      }
      for (const RowSlice& part : slices) {
        std::vector<uint16_t>& packed = m->bf16_tensors_[part.name];
        packed.resize(bf16_packed_size(int(part.rows), K));
        pack_bf16(packed.data(), rows.data() + size_t(part.row0) * K, int(part.rows), K);
      }
    } else if (type == WeightType::Q8 && matrix) {
      const std::vector<float> f = read_f32(view);
      for (const RowSlice& part : slices) {
        Q8Tensor& q = q8_tensor(part, K);
        quantize_q8(q.packed.data(), q.scales.data(), f.data() + size_t(part.row0) * K, int(part.rows), K);
      }
    } else if (slices.size() == 1) {
      m->tensors_[e.name] = read_f32(view);
    } else {
      const std::vector<float> f = read_f32(view);
      const size_t K = size_t(e.shape[1]);
      for (const RowSlice& part : slices)
        m->tensors_[part.name].assign(f.begin() + ptrdiff_t(size_t(part.row0) * K),
                                      f.begin() + ptrdiff_t(size_t(part.row0 + part.rows) * K));
    }
    release_pages(view);
  }
  using namespace tensor_names;
  if (md.config.norm_plus_one && !md.gguf)  // Gemma's HF files store RMSNorm gains as w, applied as 1 + w
    for (auto& [name, t] : m->tensors_)
      if (const std::string suffix = "norm.weight"; name.size() > suffix.size() &&
                                                   name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        for (float& w : t) w += 1.0f;
  m->embed = m->weight(kEmbed);
  for (int i = 0; i < md.config.n_layers; ++i) {
    auto weight = [&](Part p) { return m->weight(layer_tensor(i, p)); };
    auto vector = [&](Part p, const char* kind = "weight") { return m->optional_tensor(layer_tensor(i, p, kind)); };
    const bool sandwich = md.config.sandwich_norms;  // Gemma: post_attention_layernorm is the attention's output norm
    LayerWeights w{m->tensor(layer_tensor(i, Part::AttnNorm)), weight(Part::Q),   weight(Part::K),
                   weight(Part::V),                            weight(Part::O),
                   md.config.parallel_block ? nullptr : m->tensor(layer_tensor(i, sandwich ? Part::PreFfnNorm : Part::FfnNorm)),
                   weight(Part::Gate),                         weight(Part::Up),  weight(Part::Down)};
    w.bq = vector(Part::Q, "bias"), w.bk = vector(Part::K, "bias"), w.bv = vector(Part::V, "bias");
    w.bo = vector(Part::O, "bias");
    w.b_gate = vector(Part::Gate, "bias"), w.b_up = vector(Part::Up, "bias"), w.b_down = vector(Part::Down, "bias");
    w.q_norm = vector(Part::QNorm), w.k_norm = vector(Part::KNorm);
    if (sandwich) w.post_attn_norm = vector(Part::FfnNorm), w.post_ffn_norm = vector(Part::PostFfnNorm);
    m->layers.push_back(w);
  }
  m->final_norm = m->tensor(kFinalNorm);
  m->lm_head = md.config.tie_word_embeddings ? m->embed : m->weight(kLmHead);
  return m;
}

const float* Model::optional_tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.data();
}

const float* Model::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("model has no F32 tensor '" + name + "'");
  return it->second.data();
}

Weight Model::weight(const std::string& name) const {
  if (auto b = block_weights_.find(name); b != block_weights_.end()) {
    Weight w;
    w.blocks = b->second;
    return w;
  }
  auto it = bf16_tensors_.find(name);
  if (it != bf16_tensors_.end()) return {nullptr, it->second.data()};
  auto q = q8_tensors_.find(name);
  if (q != q8_tensors_.end()) return {nullptr, nullptr, q->second.packed.data(), q->second.scales.data()};
  return {tensor(name), nullptr};
}

size_t Model::matrix_bytes() const {
  const ModelConfig& c = config_;
  const int d = c.hidden_size, q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim, ff = c.intermediate_size;
  size_t bytes = weight_bytes(lm_head, c.vocab_size, d);
  for (const LayerWeights& w : layers)
    bytes += weight_bytes(w.wq, q, d) + weight_bytes(w.wk, kv, d) + weight_bytes(w.wv, kv, d) +
             weight_bytes(w.wo, d, q) + weight_bytes(w.w_gate, ff, d) + weight_bytes(w.w_up, ff, d) +
             weight_bytes(w.w_down, d, ff);
  return bytes;
}

void Model::embedding(int token, float* out) const {
  const size_t d = size_t(config_.hidden_size);
  if (embed.f32) {
    std::memcpy(out, embed.f32 + size_t(token) * d, sizeof(float) * d);
  } else if (embed.blocks.data) {
    dequantize_row(embed.blocks.type, embed.blocks.data + size_t(token) * embed.blocks.row_stride, out, int64_t(d));
  } else if (embed.q8) {
    for (size_t i = 0; i < d; ++i) out[i] = q8_value_at(embed.q8, embed.q8_scales, int(d), token, int(i));
  } else {
    for (size_t i = 0; i < d; ++i) out[i] = bf16_to_f32_value(bf16_packed_at(embed.bf16, int(d), token, int(i)));
  }
}

InferenceState::InferenceState(const Model& model, int n_ctx, int n_batch, int n_seq, CacheType cache_type)
    : model_(model), c_(model.config()), n_ctx_(n_ctx), n_batch_(std::min(n_batch, n_ctx)), n_seq_(n_seq) {
  if (n_ctx < 1) throw Error("context size must be at least 1, got " + std::to_string(n_ctx));
  if (n_batch < 1) throw Error("batch size must be at least 1, got " + std::to_string(n_batch));
  if (n_seq < 1) throw Error("sequence count must be at least 1, got " + std::to_string(n_seq));
  const TensorLookup lookup = [&](const std::string& name) { return model.tensor(name); };
  encodings_.push_back(make_position_encoding(c_, lookup));
  position_ = encodings_[0].get();
  // One encoding per scheme; one attention unit per scheme and span (a local layer's cache is a ring)
  std::vector<const SchemeConfig*> schemes = {c_.position.scheme.get()};  // [encoding]
  std::vector<std::pair<size_t, int>> unit_keys;                          // [unit]: (encoding, span)
  std::vector<std::vector<int>> layers_of;                                // [unit]
  for (int l = 0; l < c_.n_layers; ++l) {
    const PositionConfig& p = c_.layers[size_t(l)].position;
    const size_t e = size_t(std::find(schemes.begin(), schemes.end(), p.scheme.get()) - schemes.begin());
    if (e == schemes.size()) {
      schemes.push_back(p.scheme.get());
      encodings_.push_back(make_position_encoding(c_, p, lookup));
    }
    const std::pair<size_t, int> key{e, layer_span(c_.layers[size_t(l)])};
    const size_t u = size_t(std::find(unit_keys.begin(), unit_keys.end(), key) - unit_keys.begin());
    if (u == unit_keys.size()) unit_keys.push_back(key), layers_of.emplace_back();
    layers_of[u].push_back(l);
  }
  attention_.assign(size_t(c_.n_layers), nullptr);
  for (size_t u = 0; u < unit_keys.size(); ++u) {
    units_.push_back(std::make_unique<Attention>(c_, *encodings_[unit_keys[u].first], layers_of[u], n_ctx, n_batch_,
                                                 n_seq, cache_type));
    for (int l : layers_of[u]) attention_[size_t(l)] = units_.back().get();
    prepares_.push_back(std::find_if(unit_keys.begin(), unit_keys.end(), [&](const std::pair<size_t, int>& k) {
                          return k.first == unit_keys[u].first; }) - unit_keys.begin() == ptrdiff_t(u));
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
}

void InferenceState::forward(const int* tokens, int n, int pos0, float* logits, bool all_logits) {
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
  for (auto& unit : units_) unit->fit_threads();
  n_past_ = pos0;  // what follows pos0 is replaced: stopped midway (check_interrupt), the cache holds [0, n_past)
  // Chunks of at most n_batch positions, of one length class or of several (Attention::span).
  for (int done = 0, chunk; done < n; done += chunk) {
    chunk = std::min(n_batch_, n - done);
    for (auto& unit : units_) chunk = unit->span(pos0 + done, chunk);
    const bool last = done + chunk == n;
    const size_t V = size_t(c_.vocab_size);
    float* out = all_logits ? logits + size_t(done) * V : (last ? logits : nullptr);
    forward_chunk(tokens + done, n, chunk, pos0 + done, out, all_logits ? size_t(n) * V : V, all_logits);
  }
}

bool InferenceState::shift(int n_keep, int n_discard) {
  if (n_keep < 0 || n_discard < 1 || n_discard > n_past_ - n_keep)  // (n_keep + n_discard may overflow)
    throw Error("context shift: cannot drop [" + std::to_string(n_keep) + ", " + std::to_string(int64_t(n_keep) + n_discard) +
                ") of " + std::to_string(n_past_) + " cached positions");
  for (auto& unit : units_)
    if (!unit->can_shift()) return false;
  for (auto& unit : units_) unit->shift(n_keep, n_discard, n_past_);
  n_past_ -= n_discard;
  return true;
}

void InferenceState::forward_chunk(const int* tokens, int stride, int n, int pos0, float* logits,
                                   size_t logits_stride, bool all_logits) {
  const ModelConfig& c = c_;
  const int d = c.hidden_size, ff = c.intermediate_size, S = n_seq_, rows = S * n;
  const int q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const float eps = float(c.rms_norm_eps);
  for (size_t u = 0; u < units_.size(); ++u) units_[u]->begin(pos0, n, prepares_[u]);  // (and each scheme's tables)

  // x [S][n][d]: token embeddings (Gemma: × √d), plus absolute positions for the schemes that add them.
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < n; ++t) model_.embedding(tokens[size_t(s) * stride + t], &x_[(size_t(s) * n + t) * d]);
    if (c.embed_scale != 1.0)
      for (size_t i = size_t(s) * n * d; i < size_t(s + 1) * n * d; ++i) x_[i] *= float(c.embed_scale);
    position_->add_to_embeddings(&x_[size_t(s) * n * d], pos0, n);
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
    const LayerWeights& w = model_.layers[size_t(l)];
    // h = x + o_proj(attn(rmsnorm(x))); the projections see all S·n rows at once (what running
    // sequences in step buys), attention each sequence's own cache.
    norm(xb_.data(), x_.data(), w.attn_norm, rows);
    matmul_shared(xb_.data(), rows, d, {{q_.data(), &w.wq, q_dim}, {k_.data(), &w.wk, kv_dim}, {v_.data(), &w.wv, kv_dim}});
    if (w.bq) {
      add_rows(q_.data(), w.bq, rows, q_dim);
      add_rows(k_.data(), w.bk, rows, kv_dim);
      add_rows(v_.data(), w.bv, rows, kv_dim);
    }
    if (w.q_norm) {  // q_ and k_ are [rows][heads][hd]: one RMSNorm per head vector
      rmsnorm(q_.data(), q_.data(), w.q_norm, rows * c.n_heads, c.head_dim, eps);
      rmsnorm(k_.data(), k_.data(), w.k_norm, rows * c.n_kv_heads, c.head_dim, eps);
    }
    for (int s = 0; s < S; ++s)
      attention_[size_t(l)]->layer(s, l, &q_[size_t(s) * n * q_dim], &k_[size_t(s) * n * kv_dim], &v_[size_t(s) * n * kv_dim],
                        &att_[size_t(s) * n * q_dim]);
    // (Gemma: the branch's output normalised before it joins x)
    matmul(w.post_attn_norm ? xb_.data() : x_.data(), att_.data(), w.wo, rows, q_dim, d, /*accumulate=*/!w.post_attn_norm);
    if (w.bo) add_rows(w.post_attn_norm ? xb_.data() : x_.data(), w.bo, rows, d);
    if (w.post_attn_norm) add_normed(w.post_attn_norm);

    // out = h + down(silu(gate(rmsnorm(h))) * up(rmsnorm(h)))  (Gemma: GeGLU, and the output normalised)
    // (Cohere: the MLP reads the attention's input, xb, as it is: out = x + attn(n) + mlp(n))
    if (w.ffn_norm) norm(xb_.data(), x_.data(), w.ffn_norm, rows);
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
    norm(xb_.data(), &x_[(size_t(s) * n + first) * d], model_.final_norm, out_rows);
    matmul(logits + size_t(s) * logits_stride, xb_.data(), model_.lm_head, out_rows, d, c.vocab_size);
    if (c.logit_scale != 1.0)
      for (size_t i = 0; i < size_t(out_rows) * c.vocab_size; ++i) logits[size_t(s) * logits_stride + i] *= float(c.logit_scale);
    if (c.final_softcap > 0) softcap(logits + size_t(s) * logits_stride, size_t(out_rows) * c.vocab_size, float(c.final_softcap));
  }
}

}  // namespace pert
