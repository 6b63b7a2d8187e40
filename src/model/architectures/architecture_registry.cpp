// The registry of HF architectures: adding one means one file in this folder (its
// ArchitectureSpec), one entry here, one reference case and its row in docs/models.md
// (docs/adding-an-architecture.md). Here too is what every architecture shares: the config keys
// each reads (another one's key is refused, never dropped: a model that would load here but
// compute something else is the worst outcome), windows by `layer_types`, biases.
// A window W lets the query at m see keys m − W < n <= m (HF masking_utils).
#include "model/architectures/architecture.hpp"
#include "pert/error.hpp"

namespace pert {

namespace {

const std::vector<const ArchitectureSpec*> kRegistry = {
    &kLlamaArchitecture, &kMistralArchitecture, &kQwen2Architecture,  &kQwen3Architecture,  &kPhi3Architecture,
    &kSmolLM3Architecture, &kGemma2Architecture, &kGemma3Architecture, &kCohere2Architecture,
    &kMixtralArchitecture, &kQwen2MoeArchitecture, &kQwen3MoeArchitecture, &kOlmoeArchitecture,  &kGptOssArchitecture,
    &kQwen2VlArchitecture, &kQwen25VlArchitecture, &kQwen3VlArchitecture, &kQwen3VlMoeArchitecture, &kGemma3VlArchitecture,
    &kDeepseekV2Architecture, &kDeepseekV3Architecture,
};

// Config keys every architecture reads (pert's own blocks among them).
const char kCommonKeys[] =
    "vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads num_key_value_heads head_dim "
    "max_position_embeddings tie_word_embeddings bos_token_id eos_token_id rope_theta rope_scaling rope_parameters "
    "partial_rotary_factor original_max_position_embeddings attention_bias mlp_bias architectures model_type "
    "position extend layers dual_chunk_attention_config quantization_config";

// Config keys of architectures pert does not read that change what a block computes: refused
// unless false or 0 (off). Llama 4's chunks and temperature, EmbeddingGemma's bidirectional mask.
const char* const kOtherMath[] = {
    "logits_scaling",      "embedding_multiplier",   "residual_multiplier",     "attention_multiplier",
    "use_qk_norm",         "qk_layernorm",           "use_parallel_residual",   "parallel_attn",
    "attention_chunk_size", "attn_temperature_tuning", "floor_scale",           "attn_scale",
    "use_bidirectional_attention",
};

// Calls fn(key) for each space-separated key of `list`.
template <class Fn>
void each_key(const char* list, Fn fn) {
  for (const char* p = list; *p;) {
    const char* end = p;
    while (*end && *end != ' ') ++end;
    if (end > p) fn(std::string(p, size_t(end - p)));
    p = *end ? end + 1 : end;
  }
}

bool listed(const char* list, const std::string& key) {
  bool found = false;
  each_key(list, [&](const std::string& k) { found = found || k == key; });
  return found;
}

bool reads(const ArchitectureSpec& a, const std::string& key) { return listed(kCommonKeys, key) || listed(a.reads, key); }

// "A, B and C" of the architectures for which `has` holds, then " reads it" / " read it".
template <class Has>
std::string readers(Has has) {
  std::vector<std::string> names;
  for (const ArchitectureSpec* a : kRegistry)
    if (has(*a)) names.push_back(a->hf_name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s + (names.size() == 1 ? " reads it" : " read it");
}

// The spec of a config as it is (parse_architecture refuses what this reads as Llama).
const ArchitectureSpec& architecture_of(const json& config) {
  auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); };
  const json a = config.is_object() ? config.value("architectures", json()) : json();
  const std::string name = a.is_array() && a.size() == 1 ? text(a[0]) : "";
  const ArchitectureSpec* spec = find_architecture(name, config.is_object() ? text(config.value("model_type", json())) : "");
  return spec ? *spec : kLlamaArchitecture;
}

std::string known_architectures() {
  return comma_list(kRegistry, [](const ArchitectureSpec* a) { return std::string(a->hf_name); });
}

}  // namespace

const std::vector<const ArchitectureSpec*>& architectures() { return kRegistry; }

const ArchitectureSpec* find_architecture(const std::string& name, const std::string& model_type) {
  if (name.empty() && model_type.empty()) return &kLlamaArchitecture;
  for (const ArchitectureSpec* a : kRegistry)
    if (name.empty() ? model_type == a->model_type : name == a->hf_name) return a;
  return nullptr;
}

const ArchitectureSpec& architecture_spec(const std::string& hf_name) {
  const ArchitectureSpec* a = find_architecture(hf_name, "");
  return a ? *a : kLlamaArchitecture;
}

const ArchitectureSpec* gguf_architecture(const std::string& gguf_name) {
  for (const ArchitectureSpec* a : kRegistry)
    if (*a->gguf_name && gguf_name == a->gguf_name) return a;
  return nullptr;
}

std::string known_gguf_architectures() {
  return comma_list(kRegistry, [](const ArchitectureSpec* a) { return std::string(a->gguf_name); });
}

bool architecture_reads(const json& config, const std::string& key) { return reads(architecture_of(config), key); }

bool any_architecture_reads(const std::string& key) {
  for (const ArchitectureSpec* a : kRegistry)
    if (reads(*a, key)) return true;
  return false;
}

const char* common_config_keys() { return kCommonKeys; }

std::string architecture_keys(const std::string& hf_name, bool ignored) {
  const ArchitectureSpec* a = find_architecture(hf_name, "");
  return !a ? "" : ignored ? a->ignores : a->reads;
}

std::vector<std::string> architecture_names() {
  std::vector<std::string> out;
  for (const ArchitectureSpec* a : kRegistry) out.push_back(a->hf_name);
  return out;
}

std::string architecture_model_type(const std::string& hf_name) {
  const ArchitectureSpec* a = find_architecture(hf_name, "");
  return a ? a->model_type : "";
}

std::string router_tensor(const ModelConfig& c, int layer, const char* kind) {
  return tensor_names::layer_prefix(std::to_string(layer)) + architecture_spec(c.architecture).moe_names.router + "." + kind;
}

std::string expert_tensor(const ModelConfig& c, int layer, int expert, ExpertPart part, const char* kind) {
  const MoeTensorNames& n = architecture_spec(c.architecture).moe_names;
  return tensor_names::layer_prefix(std::to_string(layer)) + n.experts + "." + std::to_string(expert) + "." +
         (part == ExpertPart::Gate ? n.gate : part == ExpertPart::Up ? n.up : n.down) + "." + kind;
}

std::string shared_expert_tensor(const ModelConfig& c, int layer, ExpertPart part) {
  return tensor_names::layer_prefix(std::to_string(layer)) + architecture_spec(c.architecture).moe_names.shared + "." +
         (part == ExpertPart::Gate ? "gate_proj" : part == ExpertPart::Up ? "up_proj" : "down_proj") + ".weight";
}

std::string shared_expert_gate_tensor(int layer) {
  return tensor_names::layer_prefix(std::to_string(layer)) + "mlp.shared_expert_gate.weight";
}

std::string describe_architecture(const ModelConfig& c) {
  std::vector<std::string> extras;
  if (c.qkv_bias) extras.push_back(c.o_bias ? "q/k/v/o biases" : "q/k/v biases");
  if (c.mlp_bias) extras.push_back("MLP biases");
  if (c.fused_projections) extras.push_back("fused qkv and gate_up projections");
  if (c.qk_norm) extras.push_back(c.qk_norm_whole ? "RMSNorm of the whole q and k" : "RMSNorm of q and k heads");
  if (const MlaConfig& a = c.mla; a.enabled())
    extras.push_back("multi-head latent attention (kv rank " + std::to_string(a.kv_lora_rank) +
                     (a.q_lora_rank ? ", q rank " + std::to_string(a.q_lora_rank) : "") + "; heads of " +
                     std::to_string(a.qk_nope_head_dim) + " + " + std::to_string(a.qk_rope_head_dim) + " rotated, values of " +
                     std::to_string(a.v_head_dim) + ")");
  if (c.clip_qkv > 0) extras.push_back("q, k, v clamped to ±" + json(c.clip_qkv).dump());
  if (const MoeConfig& m = c.moe; m.n_experts > 0) {
    int dense = 0;
    for (int i = 0; i < c.n_layers; ++i) dense += !m.sparse_layer(i);
    extras.push_back(std::to_string(m.n_used) + " of " + std::to_string(m.n_experts) + " experts of width " +
                     std::to_string(m.expert_ffn) + " per token" + (m.renormalize ? " (weights renormalised)" : "") +
                     (m.shared_ffn ? std::string(m.gated_shared ? ", a gated" : ", an ungated") + " shared expert of width " +
                                         std::to_string(m.shared_ffn) : "") +
                     (dense ? ", " + std::to_string(dense) + " dense layers" : ""));
  }
  if (c.activation == Activation::GeluTanh) extras.push_back("GeGLU (tanh GELU)");
  if (c.norm_plus_one) extras.push_back("RMSNorm gains 1 + w");
  if (c.sandwich_norms) extras.push_back("a norm before and after each branch");
  auto number = [](double x) { return json(x).dump(); };
  if (c.embed_scale != 1.0) extras.push_back("embeddings × " + number(c.embed_scale));
  if (c.attention_scale > 0) extras.push_back("q·k × " + number(c.attention_scale));
  if (c.attn_softcap > 0) extras.push_back("scores capped at " + number(c.attn_softcap));
  if (c.final_softcap > 0) extras.push_back("logits capped at " + number(c.final_softcap));
  if (c.layer_norm) extras.push_back("LayerNorm");
  if (c.parallel_block) extras.push_back("attention and MLP side by side on one norm");
  if (c.logit_scale != 1.0) extras.push_back("logits × " + number(c.logit_scale));
  // Runs of layers with the same window: "sliding window 8 on layers 1-3".
  for (size_t i = 0; i < c.layers.size();) {
    size_t j = i;
    while (j + 1 < c.layers.size() && c.layers[j + 1].window == c.layers[i].window) ++j;
    if (c.layers[i].window > 0)
      extras.push_back("sliding window " + std::to_string(c.layers[i].window) + " on " +
                       (i == 0 && j + 1 == c.layers.size() ? "every layer"
                        : i == j ? "layer " + std::to_string(i)
                                 : "layers " + std::to_string(i) + "-" + std::to_string(j)));
    i = j + 1;
  }
  std::string s = c.architecture;
  for (size_t i = 0; i < extras.size(); ++i) s += (i ? "; " : ": ") + extras[i];
  return s;
}

ArchitectureLayers parse_architecture(Fields& f, ModelConfig& mc) {
  std::string name;
  if (const json* a = f.get("architectures")) {
    if (!a->is_array() || a->size() != 1 || !(*a)[0].is_string())
      f.fail("architectures", "must be a list of one architecture name, got " + json_brief(*a));
    name = (*a)[0].get<std::string>();
  }
  const std::string model_type = f.string("model_type", "");
  const ArchitectureSpec* spec = find_architecture(name, model_type);
  if (!spec) {
    if (name.empty()) f.fail("model_type", "'" + model_type + "' is not a model type pert reads (architectures: " + known_architectures() + ")");
    f.fail("architectures", "'" + name + "' is not an architecture pert reads (" + known_architectures() + ")");
  }
  if (!model_type.empty() && model_type != spec->model_type)
    f.fail("model_type", "'" + model_type + "' does not match architectures " + spec->hf_name + " (model_type '" +
                             spec->model_type + "')");
  mc.architecture = spec->hf_name;
  // A key of another architecture pert reads changes the math there: refused, never dropped.
  for (const ArchitectureSpec* other : kRegistry)
    each_key(other->reads, [&](const std::string& key) {
      if (!reads(*spec, key) && !listed(spec->ignores, key) && f.has(key))
        f.fail(key, "is not read by " + std::string(spec->hf_name) + " (" +
                        readers([&](const ArchitectureSpec& a) { return listed(a.reads, key); }) +
                        ", and it changes what it computes there); remove it");
    });
  for (const char* key : kOtherMath)
    if (const json* v = f.get(key); v && *v != false && *v != 0)
      f.fail(key, "is set (" + json_brief(*v) + "): it changes the math of another architecture, which pert does not compute");
  if (listed(spec->reads, "hidden_act") && f.has("hidden_act") && f.string("hidden_act") != "silu")
    f.fail("hidden_act", "must be \"silu\" (SwiGLU), got \"" + f.string("hidden_act") + "\"");

  const bool attention_bias = f.boolean("attention_bias", false), mlp_bias = f.boolean("mlp_bias", false);
  if (attention_bias && !spec->attention_bias)
    f.fail("attention_bias", std::string("is true, but ") + spec->hf_name + " has no such biases (" +
                                 readers([](const ArchitectureSpec& a) { return a.attention_bias; }) + ")");
  if (mlp_bias && !spec->mlp_bias)
    f.fail("mlp_bias", std::string("is true, but ") + spec->hf_name + " has no such biases (" +
                           readers([](const ArchitectureSpec& a) { return a.mlp_bias; }) + ")");
  mc.qkv_bias = mc.o_bias = attention_bias;
  mc.mlp_bias = mlp_bias;

  // The block's extras and the windowed layers, then layer_types over them.
  ArchitectureLayers out;
  mc.layers.assign(size_t(mc.n_layers), {});
  int window = f.has("sliding_window") ? f.positive("sliding_window", kMaxCount) : 0;
  std::vector<bool> windowed = spec->parse ? spec->parse(f, mc, window, out) : std::vector<bool>(size_t(mc.n_layers), false);
  if (const json* types = f.get("layer_types")) {
    if (!types->is_array() || types->size() != size_t(mc.n_layers))
      f.fail("layer_types", "must list one type per layer (" + std::to_string(mc.n_layers) + "), got " + json_brief(*types));
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      if (t != "full_attention" && t != "sliding_attention")
        f.fail("layer_types", "entries must be \"full_attention\" or \"sliding_attention\", got " + json_brief(t) + " at " + std::to_string(i));
      windowed[i] = t == "sliding_attention";
      if (windowed[i] && window == 0)
        f.fail("layer_types", "names a sliding_attention layer, but no window is set (sliding_window" +
                                  std::string(listed(spec->reads, "use_sliding_window") ? " with use_sliding_window" : "") + ")");
    }
  }
  for (int i = 0; i < mc.n_layers; ++i) mc.layers[size_t(i)].window = windowed[size_t(i)] ? window : 0;
  const bool by_window = !out.sliding_position.is_null() || !out.global_position.is_null();
  for (int i = 0; i < mc.n_layers && by_window; ++i)  // Gemma 3's local RoPE, Cohere 2's global NoPE
    out.positions[size_t(i)] = windowed[size_t(i)] ? out.sliding_position : out.global_position;
  return out;
}

}  // namespace pert
