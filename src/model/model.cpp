#include "pert/model.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "model/architectures/architecture.hpp"
#include "model/mla.hpp"
#include "model/tensor_names.hpp"
#include "model/weights.hpp"
#include "pert/error.hpp"
#include "pert/interrupt.hpp"
#include "pert/memory.hpp"
#include "pert/model_dir.hpp"
#include "pert/safetensors.hpp"
#include "pert/positions.hpp"

namespace pert {

namespace {
// pert's own layouts; the block types' rows with a --dtype spelling follow them.
struct OwnLayout {
  WeightType::Kind kind;
  const char* flag;  // --dtype
  const char* name;  // in tables
};
const OwnLayout kOwnLayouts[] = {
    {WeightType::Auto, "auto", "auto"}, {WeightType::F32, "f32", "F32"}, {WeightType::BF16, "bf16", "BF16"},
    {WeightType::Q8, "q8", "Q8"}};

// The type a row of K values is quantized to: `wanted`, or where K is not whole blocks of it,
// what llama-quantize falls back to (the row's fallback, then F16).
BlockType block_type_for(BlockType wanted, int K) {
  BlockType t = wanted;
  if (K % block_type_info(t).block_size != 0) t = block_type_info(t).fallback;
  return K % block_type_info(t).block_size == 0 ? t : BlockType::F16;
}
}  // namespace

const char* weight_type_name(WeightType type) {
  if (type.kind == WeightType::Blocks) return block_type_info(type.blocks).name;
  for (const OwnLayout& e : kOwnLayouts)
    if (e.kind == type.kind) return e.name;
  return "?";
}

const std::vector<std::string>& weight_type_flags() {
  static const std::vector<std::string> flags = [] {
    std::vector<std::string> out;
    for (const OwnLayout& e : kOwnLayouts) out.push_back(e.flag);
    for (const BlockTypeInfo& t : block_types())
      if (t.dtype_flag) out.push_back(t.dtype_flag);
    return out;
  }();
  return flags;
}

std::string resolved_dtype(const std::string& flag, const std::filesystem::path& model) {
  return flag == "auto" && !is_gguf_file(model) ? "f32" : flag;
}

WeightType parse_weight_type(const std::string& name) {
  for (const OwnLayout& e : kOwnLayouts)
    if (name == e.flag) return e.kind;
  for (const BlockTypeInfo& t : block_types())
    if (t.dtype_flag && name == t.dtype_flag) return WeightType(t.type);
  throw Error("dtype: must be one of " + comma_list(weight_type_flags()) + ", got '" + name + "'");
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
  ModelWeights& w = *m->weights_;
  // The positional scheme's own tensors (tables, biases, its projections) stay F32: schemes read
  // them as floats (TensorLookup).
  std::set<std::string> scheme_tensors;
  for (const ExpectedTensor& t : position_tensors(md.config)) scheme_tensors.insert(t.name);
  for (int i = 0; i < md.config.n_layers; ++i)  // the routers too: a rounded router may choose other experts
    if (md.config.moe.sparse_layer(i)) scheme_tensors.insert(router_tensor(md.config, i)), scheme_tensors.insert(shared_expert_gate_tensor(i));
  for (int i = 0; md.config.mla.enabled() && i < md.config.n_layers; ++i)  // and MLA's kv_b, absorbed and read in F32 (mla.hpp)
    scheme_tensors.insert(mla_tensor(i, "kv_b_proj"));
  auto q8_tensor = [&](const RowSlice& part, int K) -> ModelWeights::Q8Tensor& {  // a part's Q8 matrix, sized
    ModelWeights::Q8Tensor& q = w.q8[part.name];
    q.packed.resize(q8_packed_size(int(part.rows), K));
    q.scales.resize(q8_scales_size(int(part.rows), K));
    return q;
  };
  // Quantized matrices go to panels of 8 rows (quants.hpp: has_panels), all but the embedding,
  // which is read by rows; false where the rows stay as they are (a type without panels, or a
  // part whose rows are not whole panels), for the caller to keep.
  auto keep_blocks = [&](const RowSlice& part, const uint8_t* rows, BlockType type, size_t row_bytes, int K) {
    if (!has_panels(type) || part.rows % 8 != 0 || part.name == tensor_names::kEmbed) return false;
    std::vector<uint8_t>& panels = w.made_blocks[part.name];
    const size_t panel_row = panel_row_bytes(type, K);
    panels.resize(size_t(part.rows) * panel_row);
    repack_panels(type, rows, row_bytes, int(part.rows), K, panels.data());
    w.blocks[part.name] = {panels.data(), type, panel_row, true};
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
    // A GGUF file's F16/BF16/quantized rows, or blocks an architecture made at open (gpt-oss's MXFP4)
    const bool in_place = matrix && type == WeightType::Auto && md.checkpoint.storage() &&
                          (view.blocks || (md.gguf && view.dtype != DType::F32));
    if (in_place) {
      const BlockType stored = view.blocks ? view.blocks->type : view.dtype == DType::F16 ? BlockType::F16 : BlockType::BF16;
      const size_t row_bytes = block_row_bytes(stored, K);
      if (stored == BlockType::Q8_0) {  // the same numbers in Q8's panels: its kernels run them faster
        for (const RowSlice& part : slices) {
          ModelWeights::Q8Tensor& q = q8_tensor(part, K);
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
        w.blocks[part.name] = {rows, stored, row_bytes};
        repacked = false;
      }
      if (repacked) {
        release_pages(view);
        continue;
      }
      w.mapping = md.checkpoint.storage();
      continue;  // its pages stay: the products read them
    }
    if (matrix && type.kind == WeightType::Blocks) {
      const BlockType blocks = block_type_for(type.blocks, K);
      const std::vector<float> f = read_f32(view);
      const size_t row_bytes = block_row_bytes(blocks, K);
      for (const RowSlice& part : slices) {
        std::vector<uint8_t> q(size_t(part.rows) * row_bytes);
        for (int64_t r = 0; r < part.rows; ++r)
          quantize_row(blocks, f.data() + size_t(part.row0 + r) * size_t(K), q.data() + size_t(r) * row_bytes, K);
        if (keep_blocks(part, q.data(), blocks, row_bytes, K)) continue;
        std::vector<uint8_t>& kept = w.made_blocks[part.name] = std::move(q);
        w.blocks[part.name] = {kept.data(), blocks, row_bytes};
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
        std::vector<uint16_t>& packed = w.bf16[part.name];
        packed.resize(bf16_packed_size(int(part.rows), K));
        pack_bf16(packed.data(), rows.data() + size_t(part.row0) * K, int(part.rows), K);
      }
    } else if (type == WeightType::Q8 && matrix) {
      const std::vector<float> f = read_f32(view);
      for (const RowSlice& part : slices) {
        ModelWeights::Q8Tensor& q = q8_tensor(part, K);
        quantize_q8(q.packed.data(), q.scales.data(), f.data() + size_t(part.row0) * K, int(part.rows), K);
      }
    } else if (slices.size() == 1) {
      w.f32[e.name] = read_f32(view);
    } else {
      const std::vector<float> f = read_f32(view);
      const size_t K = size_t(e.shape[1]);
      for (const RowSlice& part : slices)
        w.f32[part.name].assign(f.begin() + ptrdiff_t(size_t(part.row0) * K),
                                      f.begin() + ptrdiff_t(size_t(part.row0 + part.rows) * K));
    }
    release_pages(view);
  }
  using namespace tensor_names;
  if (md.config.norm_plus_one && !md.gguf)  // Gemma's HF files store RMSNorm gains as w, applied as 1 + w
    for (auto& [name, t] : w.f32)
      if (const std::string suffix = "norm.weight"; name.size() > suffix.size() &&
                                                   name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        for (float& w : t) w += 1.0f;
  w.embed = w.weight(kEmbed);
  for (int i = 0; i < md.config.n_layers; ++i) {
    const bool mla = md.config.mla.enabled();  // DeepSeek: MlaWeights in place of q, k, v
    auto weight = [&](Part p) {
      return mla && (p == Part::Q || p == Part::K || p == Part::V) ? Weight{} : w.weight(layer_tensor(i, p));
    };
    auto vector = [&](Part p, const char* kind = "weight") { return w.optional_tensor(layer_tensor(i, p, kind)); };
    const bool sandwich = md.config.sandwich_norms;  // Gemma: post_attention_layernorm is the attention's output norm
    const bool dense = !md.config.moe.sparse_layer(i);
    auto mlp = [&](Part p) { return dense ? weight(p) : Weight{}; };
    LayerWeights l{w.tensor(layer_tensor(i, Part::AttnNorm)), weight(Part::Q),   weight(Part::K),
                   weight(Part::V),                            weight(Part::O),
                   md.config.parallel_block ? nullptr : w.tensor(layer_tensor(i, sandwich ? Part::PreFfnNorm : Part::FfnNorm)),
                   mlp(Part::Gate),                            mlp(Part::Up),     mlp(Part::Down)};
    l.bq = vector(Part::Q, "bias"), l.bk = vector(Part::K, "bias"), l.bv = vector(Part::V, "bias");
    l.bo = vector(Part::O, "bias");
    l.b_gate = vector(Part::Gate, "bias"), l.b_up = vector(Part::Up, "bias"), l.b_down = vector(Part::Down, "bias");
    l.q_norm = vector(Part::QNorm), l.k_norm = vector(Part::KNorm);
    l.sink_logits = w.optional_tensor(sink_logits_tensor(i));
    if (sandwich) l.post_attn_norm = vector(Part::FfnNorm), l.post_ffn_norm = vector(Part::PostFfnNorm);
    if (mla) {
      const bool low_rank_q = md.config.mla.q_lora_rank > 0;
      auto matrix = [&](const char* part) { return w.weight(mla_tensor(i, part)); };
      if (low_rank_q) l.mla.q_a = matrix("q_a_proj"), l.mla.q_b = matrix("q_b_proj"), l.mla.q_a_norm = w.tensor(mla_tensor(i, "q_a_layernorm"));
      else l.mla.q = matrix("q_proj");
      l.mla.kv_a = matrix("kv_a_proj_with_mqa"), l.mla.kv_b = w.tensor(mla_tensor(i, "kv_b_proj"));
      std::vector<float>& absorbed = w.f32[mla_tensor(i, "kv_b_proj") + " (k_nope rows transposed)"];
      absorbed = mla_absorbed_keys(l.mla.kv_b, md.config);
      l.mla.k_absorb = absorbed.data();
      l.mla.kv_a_norm = w.tensor(mla_tensor(i, "kv_a_layernorm"));
    }
    if (md.config.moe.sparse_layer(i)) {
      l.moe.router = w.tensor(router_tensor(md.config, i));
      for (int e = 0; e < md.config.moe.n_experts; ++e)
        l.moe.experts.push_back({w.weight(expert_tensor(md.config, i, e, ExpertPart::Gate)),
                                 w.weight(expert_tensor(md.config, i, e, ExpertPart::Up)),
                                 w.weight(expert_tensor(md.config, i, e, ExpertPart::Down)),
                                 w.optional_tensor(expert_tensor(md.config, i, e, ExpertPart::Gate, "bias")),
                                 w.optional_tensor(expert_tensor(md.config, i, e, ExpertPart::Up, "bias")),
                                 w.optional_tensor(expert_tensor(md.config, i, e, ExpertPart::Down, "bias"))});
      l.moe.router_bias = w.optional_tensor(router_tensor(md.config, i, "bias"));
      l.moe.score_bias = w.optional_tensor(router_tensor(md.config, i, "e_score_correction_bias"));  // (DeepSeek V3's)
      if (md.config.moe.shared_ffn) {
        const ModelConfig& c = md.config;
        l.moe.shared = {w.weight(shared_expert_tensor(c, i, ExpertPart::Gate)), w.weight(shared_expert_tensor(c, i, ExpertPart::Up)),
                        w.weight(shared_expert_tensor(c, i, ExpertPart::Down))};
        if (c.moe.gated_shared) l.moe.shared_gate = w.tensor(shared_expert_gate_tensor(i));
      }
    }
    w.layers.push_back(l);
  }
  w.final_norm = w.tensor(kFinalNorm);
  w.lm_head = md.config.tie_word_embeddings ? w.embed : w.weight(kLmHead);
  return m;
}

Model::Model() : weights_(std::make_unique<ModelWeights>()) {}
Model::~Model() = default;

const float* Model::tensor(const std::string& name) const { return weights_->tensor(name); }

const float* ModelWeights::optional_tensor(const std::string& name) const {
  auto it = f32.find(name);
  return it == f32.end() ? nullptr : it->second.data();
}

const float* ModelWeights::tensor(const std::string& name) const {
  auto it = f32.find(name);
  if (it == f32.end()) throw Error("model has no F32 tensor '" + name + "'");
  return it->second.data();
}

Weight ModelWeights::weight(const std::string& name) const {
  if (auto b = blocks.find(name); b != blocks.end()) return Weight::of_blocks(b->second);
  if (auto it = bf16.find(name); it != bf16.end()) return Weight::of_bf16(it->second.data());
  if (auto q = q8.find(name); q != q8.end()) return Weight::of_q8(q->second.packed.data(), q->second.scales.data());
  return Weight::of_f32(tensor(name));
}

namespace {
// Calls f(weight, N, K, share) for every matrix a decode step multiplies: share 1, and for a
// mixture's experts n_used / n_experts each (a token reads n_used of them: the mean expert's).
void each_token_matrix(const ModelConfig& c, const ModelWeights& weights,
                       const std::function<void(const Weight&, int, int, double)>& f) {
  const int d = c.hidden_size, q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim, ff = c.intermediate_size;
  f(weights.lm_head, c.vocab_size, d, 1.0);
  auto mlp = [&](const ExpertWeights& e, int width, double share) {
    f(e.gate, width, d, share), f(e.up, width, d, share), f(e.down, d, width, share);
  };
  for (const LayerWeights& w : weights.layers) {
    if (c.mla.enabled()) {  // DeepSeek's latent attention: its own matrices, o_proj from the heads' values
      mla_matrices(w.mla, c, [&](const Weight& m, int N, int K) { f(m, N, K, 1.0); });
      f(w.wo, d, c.n_heads * c.mla.v_head_dim, 1.0);
    } else {
      f(w.wq, q, d, 1.0), f(w.wk, kv, d, 1.0), f(w.wv, kv, d, 1.0), f(w.wo, d, q, 1.0);
    }
    if (w.moe.experts.empty()) {
      mlp({w.w_gate, w.w_up, w.w_down}, ff, 1.0);
      continue;
    }
    // A token reads the router (F32), its n_used experts and the shared one.
    f(Weight::of_f32(w.moe.router), c.moe.n_experts, d, 1.0);
    for (const ExpertWeights& e : w.moe.experts) mlp(e, c.moe.expert_ffn, double(c.moe.n_used) / double(w.moe.experts.size()));
    if (c.moe.shared_ffn) mlp(w.moe.shared, c.moe.shared_ffn, 1.0);
    if (w.moe.shared_gate) f(Weight::of_f32(w.moe.shared_gate), 1, d, 1.0);
  }
}
}  // namespace

size_t Model::matrix_bytes() const {
  double bytes = 0;
  each_token_matrix(config_, *weights_, [&](const Weight& w, int N, int K, double share) { bytes += double(weight_bytes(w, N, K)) * share; });
  return size_t(std::llround(bytes));
}

std::string Model::matrix_family() const {
  std::map<std::string, double> macs;  // (a Q4_K_M file mixes blocks with Q8_0, repacked for q8)
  each_token_matrix(config_, *weights_, [&](const Weight& w, int N, int K, double share) {
    macs[layout_name(w.layout)] += double(N) * K * share;
  });
  return std::max_element(macs.begin(), macs.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
}

double Model::matrix_macs() const {
  double macs = 0;
  each_token_matrix(config_, *weights_, [&](const Weight&, int N, int K, double share) { macs += double(N) * K * share; });
  return macs;
}

void Model::embedding(int token, float* out) const {
  const size_t d = size_t(config_.hidden_size);
  const Weight& embed = weights_->embed;
  switch (embed.layout) {
    case Weight::F32: std::memcpy(out, embed.f32 + size_t(token) * d, sizeof(float) * d); break;
    case Weight::Blocks:
      dequantize_row(embed.blocks.type, embed.blocks.data + size_t(token) * embed.blocks.row_stride, out, int64_t(d));
      break;
    case Weight::Q8:
      for (size_t i = 0; i < d; ++i) out[i] = q8_value_at(embed.q8, embed.q8_scales, int(d), token, int(i));
      break;
    case Weight::BF16:
      for (size_t i = 0; i < d; ++i) out[i] = bf16_to_f32_value(bf16_packed_at(embed.bf16, int(d), token, int(i)));
      break;
    case Weight::None: throw std::logic_error("the embedding has no data");
  }
}

}  // namespace pert
