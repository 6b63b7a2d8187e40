#include "pert/gguf_model.hpp"

#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "model/architectures/architecture.hpp"
#include "model/mla.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;

namespace {

const ArchitectureSpec& architecture_of(const GgufFile& f) {
  const std::string name = f.get_string("general.architecture");
  if (const ArchitectureSpec* a = gguf_architecture(name)) return *a;
  throw FormatError(f.path() + ": key 'general.architecture' is '" + printable(name) + "', not one pert reads (" +
                    known_gguf_architectures() + ")");
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

// rope_scaling as HF writes it, from GGUF's rope.scaling.* keys and factor tensors; null: none.
// log_multiplier_read: the architecture read rope.scaling.yarn_log_multiplier (deepseek2's softmax scale).
json rope_scaling(const GgufFile& f, const std::string& a, int context, int rotary_dim, bool log_multiplier_read) {
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
    return {{"rope_type", "linear"}, {"factor", gguf_positive_number(f, a + "rope.scaling.factor", *factor)}};
  }
  if (type == "yarn") {
    const double s = gguf_positive_number(f, a + "rope.scaling.factor", factor.value_or(0));
    json y = {{"rope_type", "yarn"},
              {"factor", s},
              {"original_max_position_embeddings", gguf_positive(f, orig_key, context)},
              {"beta_fast", gguf_positive_number(f, a + "rope.scaling.yarn_beta_fast", 32.0)},
              {"beta_slow", gguf_positive_number(f, a + "rope.scaling.yarn_beta_slow", 1.0)}};
    // llama.cpp multiplies YaRN's own 0.1·ln(s) + 1 by attn_factor; HF's attention_factor is the product.
    if (const auto m = f.opt_float(a + "rope.scaling.attn_factor")) y["attention_factor"] = *m * (0.1 * std::log(s) + 1.0);
    const double ext = f.opt_float(a + "rope.scaling.yarn_ext_factor").value_or(-1.0);
    if (ext != -1.0 && ext != 1.0)
      throw FormatError(f.path() + ": key '" + a + "rope.scaling.yarn_ext_factor' is " + std::to_string(ext) +
                        "; pert's YaRN mixes fully (1, or -1 for llama.cpp's default)");
    if (!log_multiplier_read && f.opt_float(a + "rope.scaling.yarn_log_multiplier").value_or(0.0) != 0.0)
      throw FormatError(f.path() + ": key '" + a + "rope.scaling.yarn_log_multiplier' is set; pert does not read it");
    return y;
  }
  if (type == "longrope") {
    json l = {{"rope_type", "longrope"},
              {"short_factor", factors(f, "rope_factors_short.weight", rotary_dim / 2)},
              {"long_factor", factors(f, "rope_factors_long.weight", rotary_dim / 2)},
              {"original_max_position_embeddings", gguf_positive(f, orig_key)}};
    if (const auto m = f.opt_float(a + "rope.scaling.attn_factor")) l["attention_factor"] = *m;
    return l;
  }
  throw FormatError(f.path() + ": key '" + a + "rope.scaling.type' is '" + printable(type) +
                    "', not one pert reads (none, linear, yarn, longrope)");
}

}  // namespace

json gguf_config_json(const GgufFile& f) {
  const ArchitectureSpec& arch = architecture_of(f);
  const std::string a = std::string(arch.gguf_name) + ".";
  const GgufTensor* embed = f.tensor("token_embd.weight");
  if (!embed) throw FormatError(f.path() + ": tensor 'token_embd.weight' is missing");
  if (embed->shape.size() != 2 || embed->shape[1] > INT_MAX)
    throw FormatError(f.path() + ": tensor 'token_embd.weight' has shape " + shape_str(embed->shape) + ", expected [embedding_length, vocab]");
  const int d = gguf_positive(f, a + "embedding_length"), heads = gguf_positive(f, a + "attention.head_count");
  if (!f.find(a + "attention.key_length") && d % heads != 0)
    throw FormatError(f.path() + ": key '" + a + "embedding_length' (" + std::to_string(d) + ") is not a multiple of '" + a +
                      "attention.head_count' (" + std::to_string(heads) + ") and no key_length is given");
  const int head_dim = gguf_positive(f, a + "attention.key_length", d / heads);
  const int context = gguf_positive(f, a + "context_length");
  const int rotary_dim = gguf_positive(f, a + "rope.dimension_count", head_dim);
  json c = {{"architectures", {arch.hf_name}},
            {"vocab_size", embed->shape[1]},
            {"hidden_size", d},
            {"intermediate_size", gguf_positive(f, a + "feed_forward_length")},
            {"num_hidden_layers", gguf_positive(f, a + "block_count")},
            {"num_attention_heads", heads},
            {"num_key_value_heads", gguf_positive(f, a + "attention.head_count_kv", heads)},
            {"head_dim", head_dim},
            {"max_position_embeddings", context},
            {"rope_theta", gguf_positive_number(f, a + "rope.freq_base", 10000.0)},
            {"tie_word_embeddings", f.tensor("output.weight") == nullptr}};
  if (arch.from_gguf) arch.from_gguf(f, a, c);  // what this architecture's keys add (architectures/)
  const bool mla = c.contains("kv_lora_rank");  // (deepseek2: its keys give the heads' widths, the value's apart)
  if (!mla && gguf_positive(f, a + "attention.value_length", head_dim) != head_dim)
    throw FormatError(f.path() + ": key '" + a + "attention.value_length' differs from key_length; pert reads equal head sizes");
  if (!c.contains("layer_norm_eps")) {  // (Cohere's LayerNorm has its own)
    const std::string eps = a + "attention.layer_norm_rms_epsilon";
    c["rms_norm_eps"] = (f.require(eps), gguf_positive_number(f, eps, 0));
  }
  if (!mla && rotary_dim != head_dim) c["partial_rotary_factor"] = double(rotary_dim) / head_dim;
  const bool log_multiplier_read = c.contains("rope_scaling") && c["rope_scaling"].contains("mscale_all_dim");
  json scaling = rope_scaling(f, a, context, rotary_dim, log_multiplier_read);
  if (c.contains("rope_scaling")) {  // the architecture's own keys (M-RoPE's sections, gpt-oss's truncate) join the file's
    const json own = c["rope_scaling"];
    if (scaling.is_null()) scaling = own;
    else for (const auto& [key, value] : own.items()) if (!scaling.contains(key)) scaling[key] = value;
  }
  if (!scaling.is_null()) c["rope_scaling"] = scaling;
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

std::string hf_tensor_name(const std::string& name, const std::string& architecture) {
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
  auto hf = [&](Part p) { return tensor_names::layer_prefix(layer) + tensor_names::part_name(p) + "." + kind; };
  const ArchitectureSpec& spec = architecture_spec(architecture);
  for (const GgufPart& p : spec.gguf_parts)  // the architecture's own first
    if (part == p.gguf) return hf(p.hf);
  // A mixture of experts' router and shared expert (the experts' stacks: expert_stack)
  const std::string prefix = tensor_names::layer_prefix(layer);
  if (part == "ffn_gate_inp") return prefix + spec.moe_names.router + "." + kind;
  if (part == "ffn_gate_inp_shexp") return prefix + "mlp.shared_expert_gate." + kind;
  if (part == "attn_sinks" && kind == "weight") return tensor_names::sink_logits_tensor(std::stoi(layer));  // gpt-oss's
  if (part == "exp_probs_b" && kind == "bias") return prefix + spec.moe_names.router + ".e_score_correction_bias";  // DeepSeek V3's
  // DeepSeek's multi-head latent attention (deepseek2); attn_k_b / attn_v_b are joined into kv_b_proj (join_kv_b)
  static const std::pair<const char*, const char*> kMla[] = {
      {"attn_q_a", "q_a_proj"},   {"attn_q_a_norm", "q_a_layernorm"}, {"attn_q_b", "q_b_proj"},   {"attn_kv_a_mqa", "kv_a_proj_with_mqa"},
      {"attn_kv_a_norm", "kv_a_layernorm"}, {"attn_kv_b", "kv_b_proj"}, {"attn_k_b", "k_b_proj"}, {"attn_v_b", "v_b_proj"}};
  for (const auto& [gguf, mla] : kMla)
    if (part == gguf && kind == "weight") return mla_tensor(std::stoi(layer), mla);
  for (const char* p : {"gate", "up", "down"})
    if (part == std::string("ffn_") + p + "_shexp") return prefix + spec.moe_names.shared + "." + p + "_proj." + kind;
  static const GgufPart kLayer[] = {  // llama's
      {"attn_norm", Part::AttnNorm}, {"attn_q", Part::Q},     {"attn_k", Part::K},           {"attn_v", Part::V},
      {"attn_qkv", Part::QKV},       {"attn_output", Part::O}, {"attn_q_norm", Part::QNorm}, {"attn_k_norm", Part::KNorm},
      {"ffn_norm", Part::FfnNorm},   {"ffn_gate", Part::Gate}, {"ffn_up", Part::Up},         {"ffn_down", Part::Down},
  };
  for (const GgufPart& p : kLayer)
    if (part == p.gguf) return hf(p.hf);
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

// blk.N.ffn_{gate,up,down}_exps.weight: a mixture's experts stacked [E][rows][K] (HF's order), one
// view per expert under its HF name (the rows are contiguous: no copy); .bias (gpt-oss's): [E][rows],
// one vector per expert. False for other tensors.
bool expert_stack(const std::string& name, const ModelConfig& c, const TensorView& stack, std::vector<TensorView>& views) {
  static const std::pair<const char*, ExpertPart> kParts[] = {
      {"ffn_gate_exps", ExpertPart::Gate}, {"ffn_up_exps", ExpertPart::Up}, {"ffn_down_exps", ExpertPart::Down}};
  for (const auto& [stem, part] : kParts)
    for (const char* kind : {"weight", "bias"}) {
      const std::string suffix = std::string(stem) + "." + kind;
      if (!ends_with(name, "." + suffix) || name.compare(0, 4, "blk.") != 0) continue;
      const std::string number = name.substr(4, name.size() - 4 - suffix.size() - 1);
      if (number.empty() || number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos) return false;
      const int layer = std::stoi(number), E = c.moe.n_experts;
      const bool bias = kind[0] == 'b';
      if (E == 0 || layer >= c.n_layers || !c.moe.sparse_layer(layer))
        throw FormatError(stack.file + ": tensor '" + printable(name) + "' holds experts, but the config gives layer " + number +
                          " none (" + (E == 0 ? "no expert_count" : "a dense layer") + ")");
      if (stack.shape.size() != (bias ? 2u : 3u) || stack.shape[0] != E)
        throw FormatError(stack.file + ": tensor '" + printable(name) + "' has shape " + shape_str(stack.shape) + ", expected [" +
                          std::to_string(E) + " experts, rows" + (bias ? "]" : ", columns]"));
      const size_t bytes = stack.nbytes / size_t(E);
      for (int e = 0; e < E; ++e) {
        TensorView v = stack;
        v.name = expert_tensor(c, layer, e, part, kind);
        v.shape.erase(v.shape.begin());
        v.numel = stack.numel / E;
        v.offset = stack.offset + e * bytes;
        v.data = stack.data + e * bytes;
        v.nbytes = bytes;
        views.push_back(std::move(v));
      }
      return true;
    }
  return false;
}

// llama.cpp since its MLA split writes each layer's kv_b_proj [H·(nope + v)][latent] as attn_k_b
// [H][latent][nope] (each head's k rows transposed) and attn_v_b [H][v][latent]: joined back here in
// F32, the one form pert reads (model.cpp, mla.hpp), their values as stored (dequantized).
void join_kv_b(std::vector<TensorView>& views, const ModelConfig& c, GgufStorage& storage, const std::string& path) {
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < views.size(); ++i) at[views[i].name] = i;
  std::set<size_t> joined;
  const MlaConfig& m = c.mla;
  const int64_t H = c.n_heads, nope = m.qk_nope_head_dim, v = m.v_head_dim, latent = m.kv_lora_rank;
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string blk = "blk." + std::to_string(i) + ".";
    const auto k = at.find(mla_tensor(i, "k_b_proj")), vb = at.find(mla_tensor(i, "v_b_proj"));
    if (k == at.end() && vb == at.end()) continue;
    if (k == at.end() || vb == at.end())
      throw FormatError(path + ": tensor '" + blk + (k == at.end() ? "attn_k_b" : "attn_v_b") + ".weight' is missing beside '" + blk +
                        (k == at.end() ? "attn_v_b" : "attn_k_b") + ".weight' (kv_b split in two)");
    if (at.count(mla_tensor(i, "kv_b_proj")))
      throw FormatError(path + ": tensors '" + blk + "attn_kv_b.weight' and '" + blk + "attn_k_b.weight' are both there; pert reads one");
    const TensorView &kt = views[k->second], &vt = views[vb->second];
    const std::vector<int64_t> k_shape = {H, latent, nope}, v_shape = {H, v, latent};
    if (kt.shape != k_shape || vt.shape != v_shape)
      throw FormatError(path + ": tensors '" + blk + "attn_k_b.weight' " + shape_str(kt.shape) + " and '" + blk + "attn_v_b.weight' " +
                        shape_str(vt.shape) + ", expected " + shape_str(k_shape) + " (heads, kv_lora_rank, qk_nope) and " +
                        shape_str(v_shape) + " (heads, v_head_dim, kv_lora_rank)");
    const std::vector<float> kf = read_f32(kt), vf = read_f32(vt);
    std::vector<uint8_t>& bytes = storage.copies.emplace_back(size_t(H * (nope + v) * latent) * 4);
    float* out = reinterpret_cast<float*>(bytes.data());
    for (int64_t h = 0; h < H; ++h) {
      float* head = out + size_t(h * (nope + v) * latent);
      for (int64_t r = 0; r < nope; ++r)
        for (int64_t j = 0; j < latent; ++j) head[r * latent + j] = kf[size_t((h * latent + j) * nope + r)];
      std::copy_n(vf.data() + size_t(h * v * latent), size_t(v * latent), head + nope * latent);
    }
    TensorView kv_b = kt;
    kv_b.name = mla_tensor(i, "kv_b_proj");
    kv_b.dtype = DType::F32;
    kv_b.blocks = nullptr;
    kv_b.shape = {H * (nope + v), latent};
    kv_b.numel = H * (nope + v) * latent;
    kv_b.data = bytes.data();
    kv_b.nbytes = bytes.size();
    views.push_back(std::move(kv_b));
    joined.insert({k->second, vb->second});
  }
  if (joined.empty()) return;
  std::vector<TensorView> kept;
  for (size_t i = 0; i < views.size(); ++i)
    if (!joined.count(i)) kept.push_back(std::move(views[i]));
  views = std::move(kept);
}

}  // namespace

Checkpoint gguf_checkpoint(std::shared_ptr<const GgufFile> file, const ModelConfig& config) {
  auto storage = std::make_shared<GgufStorage>();
  storage->file = file;
  const GgufFile& f = *file;
  // The converter permuted q/k for general.architecture llama (also read as Mistral) and smollm3
  // (its LlamaModel subclass).
  const bool permuted = architecture_of(f).gguf_permuted_qk;
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
                        ", which pert does not read (" + block_type_names() + ")");
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
    if (expert_stack(t.name, config, v, views)) continue;
    views.push_back(std::move(v));
  }
  if (config.mla.enabled()) join_kv_b(views, config, *storage, f.path());
  return Checkpoint::of_views(std::move(views), f.path(), storage);
}

}  // namespace pert
