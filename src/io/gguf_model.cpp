#include "pert/gguf_model.hpp"

#include <climits>
#include <cmath>
#include <cstring>

#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "../model/tensor_names.hpp"

namespace pert {

using nlohmann::json;

namespace {

struct GgufArchitecture {
  const char* gguf;  // general.architecture
  const char* hf;    // config.json's architectures[0]
  Architecture architecture;
};
const GgufArchitecture kArchitectures[] = {
    {"llama", "LlamaForCausalLM", Architecture::Llama},
    {"qwen2", "Qwen2ForCausalLM", Architecture::Qwen2},
    {"qwen3", "Qwen3ForCausalLM", Architecture::Qwen3},
    {"phi3", "Phi3ForCausalLM", Architecture::Phi3},
    {"smollm3", "SmolLM3ForCausalLM", Architecture::SmolLM3},  // llama's keys; NoPE every 4th layer (llama.cpp's fixed step)
    {"gemma2", "Gemma2ForCausalLM", Architecture::Gemma2},
    {"gemma3", "Gemma3ForCausalLM", Architecture::Gemma3},
    {"cohere2", "Cohere2ForCausalLM", Architecture::Cohere2},
};

const GgufArchitecture& architecture_of(const GgufFile& f) {
  const std::string name = f.get_string("general.architecture");
  for (const GgufArchitecture& a : kArchitectures)
    if (name == a.gguf) return a;
  std::string known;
  for (const GgufArchitecture& a : kArchitectures) known += (known.empty() ? "" : ", ") + std::string(a.gguf);
  throw FormatError(f.path() + ": key 'general.architecture' is '" + printable(name) + "', not one pert reads (" + known + ")");
}

// A count or size: an integer in [1, INT_MAX], named by its GGUF key when it is not.
int positive(const GgufFile& f, const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
  const GgufValue* v = f.find(key);
  if (v && v->is_array())
    throw FormatError(f.path() + ": key '" + key + "' is " + v->type_name() + " (one value per layer), which pert does not read");
  const std::optional<int64_t> value = v ? f.opt_int(key) : fallback;
  if (!value) f.require(key);  // throws: the key is missing
  if (*value < 1 || *value > INT_MAX)
    throw FormatError(f.path() + ": key '" + key + "' is " + std::to_string(*value) + ", expected a positive count");
  return int(*value);
}

double positive_number(const GgufFile& f, const std::string& key, double fallback) {
  const double v = f.opt_float(key).value_or(fallback);
  if (!(v > 0) || !std::isfinite(v))
    throw FormatError(f.path() + ": key '" + key + "' is " + std::to_string(v) + ", expected a positive number");
  return v;
}

// A 1-D F32 tensor of `n` values (rope factors), read into a list.
json factors(const GgufFile& f, const std::string& name, int n) {
  const GgufTensor* t = f.tensor(name);
  if (!t) throw FormatError(f.path() + ": tensor '" + name + "' is missing (the RoPE scaling needs it)");
  if (t->shape.size() != 1 || t->shape[0] != n || !t->type || t->type->type != BlockType::F32)
    throw FormatError(f.path() + ": tensor '" + name + "' must be F32 of shape [" + std::to_string(n) + "] (one factor per rotated pair)");
  json out = json::array();
  for (int i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, t->data + 4 * size_t(i), 4);
    if (!(v > 0) || !std::isfinite(v))
      throw FormatError(f.path() + ": tensor '" + name + "' holds " + std::to_string(v) + " at " + std::to_string(i) + ", expected positive factors");
    out.push_back(v);
  }
  return out;
}

// Which layers of Gemma 3 and Cohere 2 see a window: {arch}.attention.sliding_window_pattern as
// llama.cpp's get_key_or_arr reads it, a period n (a layer i is global where (i + 1) % n == 0;
// 0: every layer local) or one bool (or 0/1) per layer, true where it is local. Absent: the
// period llama.cpp hard-codes (`fallback`), written into the config so that it shows.
void window_pattern(const GgufFile& f, const std::string& a, int fallback, json& c) {
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

// rope_scaling as HF writes it, from GGUF's rope.scaling.* keys and factor tensors; null: none.
json rope_scaling(const GgufFile& f, const std::string& a, int context, int rotary_dim) {
  std::string type = f.opt_string(a + "rope.scaling.type").value_or("");
  std::optional<double> factor = f.opt_float(a + "rope.scaling.factor");
  if (type.empty() && f.find(a + "rope.scale_linear")) {  // the key before rope.scaling.*
    type = "linear";
    factor = f.get_float(a + "rope.scale_linear");
  }
  const bool freqs = f.tensor("rope_freqs.weight") != nullptr;
  // llama.cpp applies phi3's factor tables whenever the file has them, with or without the type.
  if (type.empty() && f.tensor("rope_factors_long.weight")) type = "longrope";
  if (freqs && !type.empty() && type != "none")
    throw FormatError(f.path() + ": tensor 'rope_freqs.weight' and key '" + a + "rope.scaling.type' ('" + printable(type) +
                      "') are both set; pert reads one");
  if (freqs) {  // Llama 3: each pair's frequency divided by its factor, nothing else
    const json list = factors(f, "rope_freqs.weight", rotary_dim / 2);
    return {{"rope_type", "longrope"}, {"short_factor", list}, {"long_factor", list},
            {"original_max_position_embeddings", context}, {"attention_factor", 1.0}};
  }
  if (type.empty() || type == "none") return nullptr;
  const std::string orig_key = a + "rope.scaling.original_context_length";
  if (type == "linear") {
    if (!factor) f.require(a + "rope.scaling.factor");
    return {{"rope_type", "linear"}, {"factor", positive_number(f, a + "rope.scaling.factor", *factor)}};
  }
  if (type == "yarn") {
    const double s = positive_number(f, a + "rope.scaling.factor", factor.value_or(0));
    json y = {{"rope_type", "yarn"},
              {"factor", s},
              {"original_max_position_embeddings", positive(f, orig_key, context)},
              {"beta_fast", positive_number(f, a + "rope.scaling.yarn_beta_fast", 32.0)},
              {"beta_slow", positive_number(f, a + "rope.scaling.yarn_beta_slow", 1.0)}};
    // llama.cpp multiplies YaRN's own 0.1·ln(s) + 1 by attn_factor; HF's attention_factor is the product.
    if (const auto m = f.opt_float(a + "rope.scaling.attn_factor")) y["attention_factor"] = *m * (0.1 * std::log(s) + 1.0);
    const double ext = f.opt_float(a + "rope.scaling.yarn_ext_factor").value_or(-1.0);
    if (ext != -1.0 && ext != 1.0)
      throw FormatError(f.path() + ": key '" + a + "rope.scaling.yarn_ext_factor' is " + std::to_string(ext) +
                        "; pert's YaRN mixes fully (1, or -1 for llama.cpp's default)");
    if (f.opt_float(a + "rope.scaling.yarn_log_multiplier").value_or(0.0) != 0.0)
      throw FormatError(f.path() + ": key '" + a + "rope.scaling.yarn_log_multiplier' is set; pert does not read it");
    return y;
  }
  if (type == "longrope") {
    json l = {{"rope_type", "longrope"},
              {"short_factor", factors(f, "rope_factors_short.weight", rotary_dim / 2)},
              {"long_factor", factors(f, "rope_factors_long.weight", rotary_dim / 2)},
              {"original_max_position_embeddings", positive(f, orig_key)}};
    if (const auto m = f.opt_float(a + "rope.scaling.attn_factor")) l["attention_factor"] = *m;
    return l;
  }
  throw FormatError(f.path() + ": key '" + a + "rope.scaling.type' is '" + printable(type) +
                    "', not one pert reads (none, linear, yarn, longrope)");
}

}  // namespace

json gguf_config_json(const GgufFile& f) {
  const GgufArchitecture& arch = architecture_of(f);
  const std::string a = std::string(arch.gguf) + ".";
  const GgufTensor* embed = f.tensor("token_embd.weight");
  if (!embed) throw FormatError(f.path() + ": tensor 'token_embd.weight' is missing");
  if (embed->shape.size() != 2 || embed->shape[1] > INT_MAX)
    throw FormatError(f.path() + ": tensor 'token_embd.weight' has shape " + shape_str(embed->shape) + ", expected [embedding_length, vocab]");
  const int d = positive(f, a + "embedding_length"), heads = positive(f, a + "attention.head_count");
  if (!f.find(a + "attention.key_length") && d % heads != 0)
    throw FormatError(f.path() + ": key '" + a + "embedding_length' (" + std::to_string(d) + ") is not a multiple of '" + a +
                      "attention.head_count' (" + std::to_string(heads) + ") and no key_length is given");
  const int head_dim = positive(f, a + "attention.key_length", d / heads);
  if (positive(f, a + "attention.value_length", head_dim) != head_dim)
    throw FormatError(f.path() + ": key '" + a + "attention.value_length' differs from key_length; pert reads equal head sizes");
  const int context = positive(f, a + "context_length");
  const int rotary_dim = positive(f, a + "rope.dimension_count", head_dim);
  json c = {{"architectures", {arch.hf}},
            {"vocab_size", embed->shape[1]},
            {"hidden_size", d},
            {"intermediate_size", positive(f, a + "feed_forward_length")},
            {"num_hidden_layers", positive(f, a + "block_count")},
            {"num_attention_heads", heads},
            {"num_key_value_heads", positive(f, a + "attention.head_count_kv", heads)},
            {"head_dim", head_dim},
            {"max_position_embeddings", context},
            {"rope_theta", positive_number(f, a + "rope.freq_base", 10000.0)},
            {"tie_word_embeddings", f.tensor("output.weight") == nullptr}};
  const Architecture at = arch.architecture;
  const bool gemma = at == Architecture::Gemma2 || at == Architecture::Gemma3;
  if (at == Architecture::Cohere2) {  // LayerNorm's eps; the logits' scale
    c["layer_norm_eps"] = (f.require(a + "attention.layer_norm_epsilon"), positive_number(f, a + "attention.layer_norm_epsilon", 0));
    c["logit_scale"] = (f.require(a + "logit_scale"), positive_number(f, a + "logit_scale", 0));
    c.erase("head_dim");  // HF's Cohere2 takes hidden / heads
  } else {
    c["rms_norm_eps"] = (f.require(a + "attention.layer_norm_rms_epsilon"), positive_number(f, a + "attention.layer_norm_rms_epsilon", 0));
  }
  if (gemma) {
    // llama.cpp writes no query_pre_attn_scalar: it scales by 1/√head_dim, and the 27B models
    // (46 and 62 layers) by 1/√(hidden / heads), as HF's configs of those sizes say
    const int layers = c["num_hidden_layers"];
    c["query_pre_attn_scalar"] = (layers == 46 && at == Architecture::Gemma2) || (layers == 62 && at == Architecture::Gemma3)
                                     ? d / heads : head_dim;
    c["sliding_window"] = positive(f, a + "attention.sliding_window", 4096);
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
      else c[key] = at == Architecture::Gemma2 ? json(final ? 30.0 : 50.0) : json();
    }
    if (at == Architecture::Gemma3) c["rope_local_base_freq"] = 10000.0;  // llama.cpp's, not in the file
  }
  if (at == Architecture::Gemma3 || at == Architecture::Cohere2) window_pattern(f, a, at == Architecture::Gemma3 ? 6 : 4, c);
  if (rotary_dim != head_dim) c["partial_rotary_factor"] = double(rotary_dim) / head_dim;
  const json scaling = rope_scaling(f, a, context, rotary_dim);
  if (!scaling.is_null()) c["rope_scaling"] = scaling;
  // A window on every layer: llama.cpp's converter writes it for phi3 only; in another file it
  // still means what it says (llama's is Mistral's window; Qwen's covers every layer).
  if (f.find(a + "attention.sliding_window")) {
    if (at == Architecture::SmolLM3)
      throw FormatError(f.path() + ": key '" + a + "attention.sliding_window' is set, but GGUF records no use_sliding_window to say "
                        "which layers it covers (HF's SmolLM3: its NoPE layers, when enabled; llama.cpp's: none); pert does not guess");
    c["sliding_window"] = positive(f, a + "attention.sliding_window");
    if (arch.architecture == Architecture::Llama) c["architectures"] = {"MistralForCausalLM"};
    if (arch.architecture == Architecture::Qwen2 || arch.architecture == Architecture::Qwen3) {
      c["use_sliding_window"] = true;
      c["max_window_layers"] = 0;
    }
  }
  const bool llama_like = at == Architecture::Llama || at == Architecture::SmolLM3;
  if (llama_like || at == Architecture::Qwen3)
    if (f.tensor("blk.0.attn_q.bias")) c["attention_bias"] = true;
  if (llama_like && f.tensor("blk.0.ffn_up.bias")) c["mlp_bias"] = true;
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (const auto id = f.opt_int(std::string("tokenizer.ggml.") + key)) c[key] = *id;
  return c;
}

std::string gguf_file_type(const GgufFile& f) {
  static const std::pair<int, const char*> kNames[] = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {32, "BF16"},
  };
  const GgufValue* v = f.find("general.file_type");
  if (v && !v->is_array() && v->is_integer())
    for (const auto& [id, name] : kNames)
      if (v->int_at(0) == id) return name;
  return "GGUF";
}

std::string hf_tensor_name(const std::string& name, Architecture architecture) {
  using tensor_names::Part;
  static const std::pair<const char*, const char*> kTop[] = {
      {"token_embd.weight", tensor_names::kEmbed},
      {"output_norm.weight", tensor_names::kFinalNorm},
      {"output.weight", tensor_names::kLmHead},
  };
  for (const auto& [gguf, hf] : kTop)
    if (name == gguf) return hf;
  // blk.N.<part>.weight|bias
  if (name.compare(0, 4, "blk.") != 0) return "";
  size_t i = 4;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 4 || i - 4 > 9 || i >= name.size() || name[i] != '.') return "";
  const std::string layer = name.substr(4, i - 4), rest = name.substr(i + 1);
  const size_t dot = rest.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string part = rest.substr(0, dot), kind = rest.substr(dot + 1);
  if (kind != "weight" && kind != "bias") return "";
  static const std::pair<const char*, Part> kLayer[] = {
      {"attn_norm", Part::AttnNorm},  {"attn_q", Part::Q},          {"attn_k", Part::K},
      {"attn_v", Part::V},            {"attn_qkv", Part::QKV},      {"attn_output", Part::O},
      {"attn_q_norm", Part::QNorm},   {"attn_k_norm", Part::KNorm}, {"ffn_norm", Part::FfnNorm},
      {"ffn_gate", Part::Gate},       {"ffn_up", Part::Up},         {"ffn_down", Part::Down},
      {"post_attention_norm", Part::FfnNorm}, {"post_ffw_norm", Part::PostFfnNorm},  // Gemma's
  };
  const bool gemma = architecture == Architecture::Gemma2 || architecture == Architecture::Gemma3;
  for (auto [gguf, hf] : kLayer)
    if (part == gguf) {
      if (hf == Part::Up && architecture == Architecture::Phi3) hf = Part::GateUp;  // phi3's holds gate, then up
      if (!gemma && (part == "post_attention_norm" || part == "post_ffw_norm")) return "";
      if (gemma && part == "ffn_norm") hf = Part::PreFfnNorm;  // Gemma's MLP input norm
      return tensor_names::layer_prefix(layer) + tensor_names::part_name(hf) + "." + kind;
    }
  return "";
}

namespace {

// The mapped file and the rows reordered at open, kept alive together by whoever uses the views.
struct GgufStorage {
  std::shared_ptr<const GgufFile> file;
  std::vector<std::vector<uint8_t>> copies;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama.cpp's converter stores each head's rows of q and k as (i, half) pairs for
// interleaved-pair RoPE: its row h·D + 2i + half holds HF's row h·D + half·D/2 + i. Undone here.
void unpermute_rows(TensorView& t, int heads, std::vector<uint8_t>& out) {
  const int64_t rows = t.shape[0];
  if (heads < 1 || rows % heads != 0 || (rows / heads) % 2 != 0)
    throw FormatError(t.file + ": tensor '" + t.name + "' has " + std::to_string(rows) + " rows, not " + std::to_string(heads) +
                      " heads of an even size");
  const size_t row_bytes = t.nbytes / size_t(rows);
  const int64_t D = rows / heads, half = D / 2;
  out.resize(t.nbytes);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < D; ++r) {  // HF row r of head h = half·D/2 + i
      const int64_t source = h * D + 2 * (r % half) + r / half;
      std::memcpy(out.data() + size_t(h * D + r) * row_bytes, t.data + size_t(source) * row_bytes, row_bytes);
    }
  t.data = out.data();
}

}  // namespace

Checkpoint gguf_checkpoint(std::shared_ptr<const GgufFile> file, const ModelConfig& config) {
  auto storage = std::make_shared<GgufStorage>();
  storage->file = file;
  const GgufFile& f = *file;
  // The converter permuted q/k for general.architecture llama (also read as Mistral) and smollm3
  // (its LlamaModel subclass).
  const Architecture at = architecture_of(f).architecture;
  const bool permuted = at == Architecture::Llama || at == Architecture::SmolLM3;
  std::vector<TensorView> views;
  for (const GgufTensor& t : f.header().tensors) {
    // Read into the config (gguf_config_json), not tensors of the forward pass.
    if (t.name == "rope_freqs.weight" || t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight") continue;
    const std::string hf = hf_tensor_name(t.name, config.architecture);
    TensorView v;
    v.name = hf.empty() ? t.name : hf;  // an unknown name stays, for the caller's "unexpected tensor" error
    v.file = f.path();
    if (!t.type)
      throw FormatError(f.path() + ": tensor '" + printable(t.name) + "' has type " + ggml_type_name(t.ggml_type) +
                        ", which pert does not read (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
    switch (t.type->type) {
      case BlockType::F32: v.dtype = DType::F32; break;
      case BlockType::F16: v.dtype = DType::F16; break;
      case BlockType::BF16: v.dtype = DType::BF16; break;
      default: v.blocks = t.type;
    }
    v.shape.assign(t.shape.rbegin(), t.shape.rend());  // GGML lists the innermost size first
    v.numel = t.numel;
    v.offset = t.offset;
    v.data = t.data;
    v.nbytes = t.nbytes;
    if (permuted) {
      auto is = [&](tensor_names::Part p) {
        const std::string part = tensor_names::part_name(p);
        return ends_with(v.name, part + ".weight") || ends_with(v.name, part + ".bias");
      };
      const bool q = is(tensor_names::Part::Q), k = is(tensor_names::Part::K);
      if (q || k) {
        if (v.shape.size() == 1) v.shape.push_back(1);  // a bias: rows of one value
        storage->copies.emplace_back();
        unpermute_rows(v, q ? config.n_heads : config.n_kv_heads, storage->copies.back());
        if (v.shape[1] == 1 && t.shape.size() == 1) v.shape.pop_back();
      }
    }
    views.push_back(std::move(v));
  }
  return Checkpoint::of_views(std::move(views), f.path(), storage);
}

}  // namespace pert
