// What several architecture files share: window layouts, Gemma's block, reading GGUF keys, and
// transformers v5's fused experts.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <set>

#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

std::vector<bool> every_layer_windowed(Fields&, ModelConfig& mc, int& window, ArchitectureLayers&) {
  return std::vector<bool>(size_t(mc.n_layers), window > 0);
}

std::vector<bool> qwen_windows(Fields& f, const ModelConfig& mc, int& window) {
  if (!f.boolean("use_sliding_window", false)) window = 0;  // HF: the window is off unless asked for
  const int first = int(f.integer("max_window_layers", 0, kMaxLayers, mc.n_layers));
  std::vector<bool> windowed(size_t(mc.n_layers));
  for (int i = 0; i < mc.n_layers; ++i) windowed[size_t(i)] = window > 0 && i >= first;
  return windowed;
}

std::vector<bool> windowed_but_every(int n_layers, int period) {
  std::vector<bool> windowed(static_cast<size_t>(n_layers));
  for (int i = 0; i < n_layers; ++i) windowed[size_t(i)] = (i + 1) % period != 0;
  return windowed;
}

std::vector<bool> gemma_block(Fields& f, ModelConfig& mc, int& window, bool gemma3, int period) {
  const std::string act = f.string("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    f.fail("hidden_activation", "must be \"gelu_pytorch_tanh\" (Gemma's GeGLU), got \"" + act + "\"");
  mc.activation = Activation::GeluTanh;
  mc.norm_plus_one = true;
  mc.sandwich_norms = true;
  mc.embed_scale = double(float(std::sqrt(double(mc.hidden_size))));  // HF: a tensor of the activations' dtype
  if (!f.has("head_dim")) mc.head_dim = 256;
  if (!f.has("tie_word_embeddings")) mc.tie_word_embeddings = true;
  auto positive_number = [](double x) { return x > 0; };
  mc.attention_scale = 1.0 / std::sqrt(f.number("query_pre_attn_scalar", 256.0, positive_number, "must be > 0"));
  // null turns a cap off; absent is the architecture's default
  auto cap = [&](const char* key, double def) {
    if (!f.obj_has(key)) return def;
    return f.has(key) ? f.number(key, {}, positive_number, "must be > 0 (or null: none)") : 0.0;
  };
  mc.attn_softcap = cap("attn_logit_softcapping", gemma3 ? 0.0 : 50.0);
  mc.final_softcap = cap("final_logit_softcapping", gemma3 ? 0.0 : 30.0);
  window = f.positive("sliding_window", kMaxCount, 4096);
  return windowed_but_every(mc.n_layers, period);
}

void gguf_gemma_keys(const GgufFile& f, const std::string& a, json& c, bool gemma3) {
  // llama.cpp writes no query_pre_attn_scalar: it scales by 1/√head_dim, and the 27B models
  // (46 and 62 layers) by 1/√(hidden / heads), as HF's configs of those sizes say
  const int layers = c["num_hidden_layers"], d = c["hidden_size"], heads = c["num_attention_heads"];
  c["query_pre_attn_scalar"] = layers == (gemma3 ? 62 : 46) ? d / heads : int(c["head_dim"]);
  c["sliding_window"] = gguf_positive(f, a + "attention.sliding_window", 4096);
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    const bool final = key[0] == 'f';
    const std::optional<double> cap = f.opt_float(a + key);
    // Absent: Gemma 2's caps (50, 30), Gemma 3's none. llama.cpp skips a final cap of 0, and
    // divides by the scores' cap whatever it is: 0 there, NaN or a negative cap is refused.
    if (cap && final && *cap == 0) c[key] = nullptr;
    else if (cap && !(*cap > 0 && std::isfinite(*cap)))
      throw FormatError(f.path() + ": key '" + a + key + "' is " + std::to_string(*cap) + "; a cap is a positive finite number" +
                        (final ? " (or 0: none)" : ""));
    else if (cap) c[key] = *cap;
    else c[key] = gemma3 ? json() : json(final ? 30.0 : 50.0);
  }
}

void read_experts(Fields& f, ModelConfig& mc, const char* count_key, int def_experts, int def_used) {
  MoeConfig& m = mc.moe;
  m.n_experts = f.positive(count_key, kMaxDim, def_experts);
  m.n_used = f.positive("num_experts_per_tok", kMaxDim, def_used);
  if (m.n_used > m.n_experts)
    f.fail("num_experts_per_tok", "(" + std::to_string(m.n_used) + ") asks for more experts than " + count_key + " (" +
                                      std::to_string(m.n_experts) + ") has");
  m.sparse.assign(size_t(mc.n_layers), true);
}

std::vector<bool> qwen_moe(Fields& f, ModelConfig& mc, int& window, int experts, int used, int width) {
  read_experts(f, mc, "num_experts", experts, used);
  mc.moe.expert_ffn = f.positive("moe_intermediate_size", kMaxDim, width);
  mc.moe.renormalize = f.boolean("norm_topk_prob", false);
  const int step = f.positive("decoder_sparse_step", kMaxLayers, 1);
  for (int i = 0; i < mc.n_layers; ++i) mc.moe.sparse[size_t(i)] = (i + 1) % step == 0;
  if (const json* only = f.get("mlp_only_layers")) {
    if (!only->is_array()) f.fail("mlp_only_layers", "must be a list of layer indices, got " + json_brief(*only));
    for (const json& i : *only) {
      if (!i.is_number_integer() || i.get<long long>() < 0 || i.get<long long>() >= mc.n_layers)
        f.fail("mlp_only_layers", "entries must be layer indices in [0, " + std::to_string(mc.n_layers) + "), got " + json_brief(i));
      mc.moe.sparse[size_t(i.get<long long>())] = false;
    }
  }
  if (f.boolean("use_sliding_window", false))
    f.fail("use_sliding_window", "is true: pert does not compute the windows of this mixture-of-experts architecture");
  f.get("max_window_layers");  // read: without use_sliding_window it changes nothing
  window = 0;
  return std::vector<bool>(size_t(mc.n_layers), false);
}

void gguf_experts(const GgufFile& f, const std::string& a, json& c, const char* count_key, const char* norm_key,
                  bool norm_default, bool dense_layers) {
  c[count_key] = gguf_positive(f, a + "expert_count");
  c["num_experts_per_tok"] = gguf_positive(f, a + "expert_used_count");
  if (norm_key) {
    const GgufValue* v = f.find(a + "expert_weights_norm");
    if (v && (v->is_array() || v->scalar_kind() != GgufKind::Bool))
      throw FormatError(f.path() + ": key '" + a + "expert_weights_norm' is " + v->type_name() + ", expected a bool");
    c[norm_key] = v ? v->int_at(0) != 0 : norm_default;
  }
  if (!dense_layers) return;
  json dense = json::array();  // layers without a router keep llama's MLP
  const int layers = c["num_hidden_layers"];
  for (int i = 0; i < layers; ++i)
    if (!f.tensor("blk." + std::to_string(i) + ".ffn_gate_inp.weight")) dense.push_back(i);
  if (!dense.empty()) c["mlp_only_layers"] = dense;
}

namespace {
// Rows [row0, row0 + rows) of expert e's matrix in a fused [E][R][K] tensor, as its own [rows][K]
// tensor `name`: a view of the same bytes.
TensorView expert_rows(const TensorView& fused, int64_t e, int64_t row0, int64_t rows, const std::string& name) {
  const int64_t R = fused.shape[1], K = fused.shape[2];
  const size_t at = size_t((e * R + row0) * K) * dtype_size(fused.dtype);
  TensorView v = fused;
  v.name = name;
  v.shape = {rows, K};
  v.numel = rows * K;
  v.nbytes = size_t(v.numel) * dtype_size(fused.dtype);
  v.data = fused.data + at;
  v.offset = fused.offset + at;
  return v;
}

void check_fused(const TensorView& t, const std::vector<int64_t>& shape, const char* dims) {
  if (t.shape != shape || t.dtype == DType::U8 || t.blocks)
    throw ConfigError(t.file + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) + " " + dtype_name(t.dtype) +
                      ", but transformers v5's fused experts need " + shape_str(shape) + " (" + dims + ") in F32, F16 or BF16");
}

// Columns [col0, col0 + rows) of expert e's [K][C] slice of an input-first [E][K][C] tensor, as
// a [rows][K] matrix `name` in the stored dtype, copied into a new buffer; in tiles, so that
// both sides are read and written a cache line at a time.
template <class Element>
TensorView transposed_rows(const TensorView& fused, int64_t e, int64_t col0, int64_t rows, const std::string& name,
                           std::vector<std::vector<uint8_t>>& buffers) {
  const int64_t K = fused.shape[1], C = fused.shape[2], tile = 64;
  std::vector<uint8_t>& bytes = buffers.emplace_back(size_t(rows * K) * sizeof(Element));
  const uint8_t* src = fused.data + size_t(e * K * C) * sizeof(Element);
  Element* out = reinterpret_cast<Element*>(bytes.data());
  for (int64_t k0 = 0; k0 < K; k0 += tile)
    for (int64_t r0 = 0; r0 < rows; r0 += tile)
      for (int64_t k = k0; k < std::min(K, k0 + tile); ++k)
        for (int64_t r = r0; r < std::min(rows, r0 + tile); ++r)
          std::memcpy(&out[r * K + k], src + size_t(k * C + col0 + r) * sizeof(Element), sizeof(Element));  // (unaligned maps)
  TensorView v = fused;
  v.name = name;
  v.shape = {rows, K};
  v.numel = rows * K;
  v.nbytes = bytes.size();
  v.data = bytes.data();
  v.offset = 0;
  return v;
}

TensorView input_first_rows(const TensorView& fused, int64_t e, int64_t col0, int64_t rows, const std::string& name,
                            std::vector<std::vector<uint8_t>>& buffers) {
  return dtype_size(fused.dtype) == 4 ? transposed_rows<uint32_t>(fused, e, col0, rows, name, buffers)
                                      : transposed_rows<uint16_t>(fused, e, col0, rows, name, buffers);
}

// fused_experts_checkpoint, and with `input_first` also Qwen3-VL-MoE's published layout.
Checkpoint split_fused_experts(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes, bool input_first) {
  const int64_t E = c.moe.n_experts, ff = c.moe.expert_ffn, d = c.hidden_size;
  std::vector<TensorView> views;   // the per-expert views and renamed routers
  std::vector<std::vector<uint8_t>> buffers;  // the transposed copies of input-first experts
  std::set<std::string> replaced;  // the stored tensors they stand for
  for (int i = 0; i < c.n_layers; ++i) {
    if (!c.moe.sparse_layer(i)) continue;
    const std::string v5 = tensor_names::layer_prefix(std::to_string(i)) + "mlp.";  // (Mixtral's block_sparse_moe, renamed)
    const std::string router = router_tensor(c, i);
    if (const TensorView* v5_router = router == v5 + "gate.weight" ? nullptr : stored.find(v5 + "gate.weight")) {
      if (stored.find(router))
        throw ConfigError(v5_router->file + ": tensors '" + router + "' and '" + v5_router->name +
                          "' are both there: layer " + std::to_string(i) + "'s router under its own and transformers v5's name");
      views.push_back(*v5_router);
      views.back().name = router;
      replaced.insert(v5_router->name);
    }
    const TensorView* gate_up = stored.find(v5 + "experts.gate_up_proj");
    const TensorView* down = stored.find(v5 + "experts.down_proj");
    if (!gate_up && !down) continue;  // per-expert tensors (checked as the expected ones)
    if (!gate_up || !down)
      throw ConfigError(stored.source() + ": missing tensor '" + v5 + "experts." + (gate_up ? "down_proj" : "gate_up_proj") +
                        "' beside '" + (gate_up ? gate_up : down)->name + "' (transformers v5's fused experts come in pairs)");
    // (the shapes tell the layouts apart: equal, they would need ff = 0)
    const bool transposed = input_first && gate_up->shape == std::vector<int64_t>{E, d, 2 * ff} &&
                            down->shape == std::vector<int64_t>{E, ff, d};
    if (transposed) {
      check_fused(*gate_up, {E, d, 2 * ff}, "experts, hidden, gate columns then up columns");
      check_fused(*down, {E, ff, d}, "experts, expert width, hidden");
    } else {
      const char* also = input_first ? " or input-first [E][d][2·ff]" : "";
      check_fused(*gate_up, {E, 2 * ff, d}, (std::string("experts, gate rows then up rows, hidden") + also).c_str());
      check_fused(*down, {E, d, ff}, input_first ? "experts, hidden, expert width; or input-first [E][ff][d]" : "experts, hidden, expert width");
    }
    for (int64_t e = 0; e < E; ++e) {
      const std::string gate = expert_tensor(c, i, int(e), ExpertPart::Gate), up = expert_tensor(c, i, int(e), ExpertPart::Up),
                        down_e = expert_tensor(c, i, int(e), ExpertPart::Down);
      for (const std::string* name : {&gate, &up, &down_e})
        if (const TensorView* t = stored.find(*name))
          throw ConfigError(t->file + ": tensors '" + *name + "' and '" + gate_up->name + "' are both there: layer " +
                            std::to_string(i) + "'s experts stored per expert and fused (transformers v5)");
      if (transposed) {
        views.push_back(input_first_rows(*gate_up, e, 0, ff, gate, buffers));
        views.push_back(input_first_rows(*gate_up, e, ff, ff, up, buffers));
        views.push_back(input_first_rows(*down, e, 0, d, down_e, buffers));
      } else {
        views.push_back(expert_rows(*gate_up, e, 0, ff, gate));
        views.push_back(expert_rows(*gate_up, e, ff, ff, up));
        views.push_back(expert_rows(*down, e, 0, d, down_e));
      }
    }
    replaced.insert({gate_up->name, down->name});
  }
  if (replaced.empty()) return stored;
  for (const auto& [name, t] : stored.tensors())
    if (!replaced.count(name)) views.push_back(*t);
  notes.push_back(buffers.empty() ? "transformers v5's fused experts (mlp.experts.gate_up_proj, down_proj) read as per-expert views"
                                  : "fused input-first experts (mlp.experts.gate_up_proj [E][d][2ff], down_proj [E][ff][d]) read as "
                                    "per-expert matrices, transposed in their stored dtype");
  return checkpoint_views(std::move(stored), std::move(views), std::move(buffers));
}
}  // namespace

// The views and the bytes of those made here, kept with the checkpoint they point into.
Checkpoint checkpoint_views(Checkpoint from, std::vector<TensorView> views, std::vector<std::vector<uint8_t>> buffers) {
  struct Kept {
    Checkpoint from;
    std::vector<std::vector<uint8_t>> buffers;
  };
  std::string source = from.source();
  const bool in_place = from.storage() != nullptr;
  auto owner = std::make_shared<const Kept>(Kept{std::move(from), std::move(buffers)});  // the views point into both
  return Checkpoint::of_views(std::move(views), std::move(source), std::shared_ptr<const void>(owner, in_place ? owner.get() : nullptr));
}

Checkpoint fused_experts_checkpoint(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes) {
  return split_fused_experts(std::move(stored), c, notes, false);
}

Checkpoint input_first_experts_checkpoint(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes) {
  return split_fused_experts(std::move(stored), c, notes, true);
}

int gguf_positive(const GgufFile& f, const std::string& key, std::optional<int64_t> fallback) {
  const GgufValue* v = f.find(key);
  if (v && v->is_array())
    throw FormatError(f.path() + ": key '" + key + "' is " + v->type_name() + " (one value per layer), which pert does not read");
  const std::optional<int64_t> value = v ? f.opt_int(key) : fallback;
  if (!value) f.require(key);  // throws: the key is missing
  if (*value < 1 || *value > INT_MAX)
    throw FormatError(f.path() + ": key '" + key + "' is " + std::to_string(*value) + ", expected a positive count");
  return int(*value);
}

double gguf_positive_number(const GgufFile& f, const std::string& key, double fallback) {
  const double v = f.opt_float(key).value_or(fallback);
  if (!(v > 0) || !std::isfinite(v))
    throw FormatError(f.path() + ": key '" + key + "' is " + std::to_string(v) + ", expected a positive number");
  return v;
}

// A period n (a layer i is global where (i + 1) % n == 0; 0: every layer local) or one bool (or
// 0/1) per layer, true where it is local: llama.cpp's get_key_or_arr. Absent: the period
// llama.cpp hard-codes (`fallback`), written into the config so that it shows.
void gguf_window_pattern(const GgufFile& f, const std::string& a, int fallback, json& c) {
  const std::string key = a + "attention.sliding_window_pattern";
  const GgufValue* v = f.find(key);
  const int layers = c["num_hidden_layers"];
  if (!v) {
    c["sliding_window_pattern"] = fallback;
  } else if (!v->is_array() && v->is_integer()) {
    const int64_t n = *f.opt_int(key);
    if (n < 0 || n > INT_MAX) throw FormatError(f.path() + ": key '" + key + "' is " + std::to_string(n) + ", expected a period >= 0");
    if (n > 0) c["sliding_window_pattern"] = n;
    else c["layer_types"] = std::vector<std::string>(size_t(layers), "sliding_attention");
  } else if (v->is_array() && (v->element == GgufKind::Bool || v->is_integer())) {
    if (v->count != uint64_t(layers))
      throw FormatError(f.path() + ": key '" + key + "' lists " + std::to_string(v->count) + " layers; the model has " +
                        std::to_string(layers));
    json types = json::array();
    for (uint64_t i = 0; i < v->count; ++i) {
      const int64_t x = v->int_at(i);
      if (x != 0 && x != 1)
        throw FormatError(f.path() + ": key '" + key + "' holds " + std::to_string(x) + " at " + std::to_string(i) +
                          ", expected 1 (sliding window) or 0 (global)");
      types.push_back(x ? "sliding_attention" : "full_attention");
    }
    c["layer_types"] = types;
  } else {
    throw FormatError(f.path() + ": key '" + key + "' is " + v->type_name() + ", expected a period (an integer) or one bool per layer (" +
                      std::to_string(layers) + ")");
  }
}

// llama.cpp's converter writes attention.sliding_window for phi3 only; in another file it still
// means what it says, a window on every layer.
bool gguf_window(const GgufFile& f, const std::string& a, json& c) {
  // 0: none (llama.cpp's n_swa = 0)
  if (!f.find(a + "attention.sliding_window") || f.opt_int(a + "attention.sliding_window") == 0) return false;
  c["sliding_window"] = gguf_positive(f, a + "attention.sliding_window");
  return true;
}

void gguf_biases(const GgufFile& f, json& c, bool attention, bool mlp) {
  if (attention && f.tensor("blk.0.attn_q.bias")) c["attention_bias"] = true;
  if (mlp && f.tensor("blk.0.ffn_up.bias")) c["mlp_bias"] = true;
}

}  // namespace pert
