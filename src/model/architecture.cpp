// The HF architectures pert reads, each llama's math plus a few extras (HF transformers'
// configuration_*.py and modeling_*.py of each):
//   LlamaForCausalLM    attention_bias (q, k, v and o), mlp_bias (gate, up, down)
//   MistralForCausalLM  sliding_window on every layer
//   Qwen2ForCausalLM    q/k/v biases always; sliding_window only with use_sliding_window, and
//                       only on layers i >= max_window_layers
//   Qwen3ForCausalLM    Qwen2's windows; RMSNorm of each q and k head before RoPE (q_norm,
//                       k_norm over head_dim); attention_bias as Llama's, no q/k/v biases otherwise
//   Phi3ForCausalLM     fused qkv_proj and gate_up_proj (gate first); sliding_window on every
//                       layer; its longrope and partial_rotary_factor go through the rope block
//   SmolLM3ForCausalLM  Llama's blocks; no RoPE in the layers where no_rope_layers[i] is 0 (by
//                       default every no_rope_layer_interval-th: (i + 1) % 4 == 0); a window
//                       (use_sliding_window) only on those layers
//   Gemma2ForCausalLM   GeGLU (tanh GELU), RMSNorm gains 1 + w, a norm on each branch's output
//                       (post_attention_layernorm, pre_/post_feedforward_layernorm), embeddings
//                       × √hidden, q·k × query_pre_attn_scalar^−½, scores and logits soft-capped
//                       (50, 30), a window on even layers
//   Gemma3ForCausalLM   Gemma 2's block with (1 + w) RMSNorm of q and k heads before RoPE, no caps
//                       by default, a window on all but every sliding_window_pattern-th layer
//                       (6), those local layers with RoPE base rope_local_base_freq, unscaled
//   Cohere2ForCausalLM  LayerNorm (weight only) for every norm, attention and MLP side by side on
//                       one norm's output, logits × logit_scale, head_dim = hidden / heads; a window
//                       on all but every sliding_window_pattern-th layer (4), RoPE (interleaved)
//                       only in those local layers: the global ones have no positions
// A window W lets the query at m see keys m − W < n <= m (HF masking_utils). `layer_types`
// ("full_attention" / "sliding_attention" per layer), as newer HF configs write it, overrides
// the per-architecture default. Each architecture reads its own keys (kArchitectures); another
// one's key, or a key of an architecture pert does not read that would change the math
// (kOtherMath), is refused: a model that would load here but compute something else is the
// worst outcome.
#include <cmath>

#include "config_fields.hpp"
#include "pert/config.hpp"

namespace pert {

namespace {

// Config keys every architecture reads (pert's own blocks among them).
const char kCommonKeys[] =
    "vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads num_key_value_heads head_dim "
    "max_position_embeddings tie_word_embeddings bos_token_id eos_token_id rope_theta rope_scaling rope_parameters "
    "partial_rotary_factor original_max_position_embeddings attention_bias mlp_bias architectures model_type "
    "position extend layers dual_chunk_attention_config";

// What each architecture reads beyond kCommonKeys (its HF configuration_*.py). A key another one
// reads is refused, unless it is in `ignores`: carried by configs of this architecture (HF's own,
// or written for Llama) and ignored by HF's model too, so listed as ignored rather than refused.
struct ArchitectureInfo {
  const char* name;
  const char* model_type;
  Architecture architecture;
  const char* reads;
  const char* ignores;
};
#define PERT_GEMMA2_KEYS \
  "rms_norm_eps hidden_activation query_pre_attn_scalar attn_logit_softcapping final_logit_softcapping sliding_window layer_types"
const ArchitectureInfo kArchitectures[] = {
    {"LlamaForCausalLM", "llama", Architecture::Llama, "rms_norm_eps hidden_act", ""},
    {"MistralForCausalLM", "mistral", Architecture::Mistral, "rms_norm_eps hidden_act sliding_window layer_types", ""},
    {"Qwen2ForCausalLM", "qwen2", Architecture::Qwen2,
     "rms_norm_eps hidden_act sliding_window use_sliding_window max_window_layers layer_types", ""},
    {"Qwen3ForCausalLM", "qwen3", Architecture::Qwen3,
     "rms_norm_eps hidden_act sliding_window use_sliding_window max_window_layers layer_types", ""},
    {"Phi3ForCausalLM", "phi3", Architecture::Phi3, "rms_norm_eps hidden_act sliding_window layer_types", ""},
    {"SmolLM3ForCausalLM", "smollm3", Architecture::SmolLM3,
     "rms_norm_eps hidden_act sliding_window use_sliding_window no_rope_layers no_rope_layer_interval layer_types",
     "max_window_layers"},  // SmolLM3-3B's config.json has it; SmolLM3Config does not read it
    {"Gemma2ForCausalLM", "gemma2", Architecture::Gemma2, PERT_GEMMA2_KEYS, "hidden_act"},  // the MLP reads hidden_activation
    {"Gemma3ForCausalLM", "gemma3_text", Architecture::Gemma3, PERT_GEMMA2_KEYS " sliding_window_pattern rope_local_base_freq",
     "hidden_act"},
    {"Cohere2ForCausalLM", "cohere2", Architecture::Cohere2,
     "hidden_act layer_norm_eps logit_scale sliding_window sliding_window_pattern layer_types", "rms_norm_eps"},
};
#undef PERT_GEMMA2_KEYS

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

bool reads(const ArchitectureInfo& a, const std::string& key) { return listed(kCommonKeys, key) || listed(a.reads, key); }

// The architectures that read `key`, in words ("Gemma2ForCausalLM and Gemma3ForCausalLM read it").
std::string readers(const std::string& key) {
  std::vector<std::string> names;
  for (const ArchitectureInfo& a : kArchitectures)
    if (listed(a.reads, key)) names.push_back(a.name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return s + (names.size() == 1 ? " reads it" : " read it");
}

// Config keys of architectures pert does not read that change what a block computes: refused
// unless false or 0 (off). Llama 4's chunks and temperature, EmbeddingGemma's bidirectional mask.
const char* const kOtherMath[] = {
    "logits_scaling",      "embedding_multiplier",   "residual_multiplier",     "attention_multiplier",
    "use_qk_norm",         "qk_layernorm",           "clip_qkv",                "use_parallel_residual",
    "parallel_attn",       "num_experts",            "num_local_experts",       "moe_intermediate_size",
    "attention_chunk_size", "attn_temperature_tuning", "floor_scale",           "attn_scale",
    "use_bidirectional_attention",
};

// The table's entry for an architecture name, else for a model_type; Llama when both are empty
// (pert's own configs), null when the one given is not known.
const ArchitectureInfo* find_architecture(const std::string& name, const std::string& model_type) {
  if (name.empty() && model_type.empty()) return &kArchitectures[0];
  for (const ArchitectureInfo& a : kArchitectures)
    if (name.empty() ? model_type == a.model_type : name == a.name) return &a;
  return nullptr;
}

// The same for a config as it is (parse_architecture refuses what this reads as Llama).
const ArchitectureInfo& architecture_of(const json& config) {
  auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); };
  const json a = config.is_object() ? config.value("architectures", json()) : json();
  const std::string name = a.is_array() && a.size() == 1 ? text(a[0]) : "";
  const ArchitectureInfo* info = find_architecture(name, config.is_object() ? text(config.value("model_type", json())) : "");
  return info ? *info : kArchitectures[0];
}

std::string known_architectures() {
  std::string s;
  for (const ArchitectureInfo& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

}  // namespace

bool architecture_reads(const json& config, const std::string& key) { return reads(architecture_of(config), key); }

bool any_architecture_reads(const std::string& key) {
  for (const ArchitectureInfo& a : kArchitectures)
    if (reads(a, key)) return true;
  return false;
}

const char* common_config_keys() { return kCommonKeys; }

std::string architecture_keys(Architecture architecture, bool ignored) {
  for (const ArchitectureInfo& a : kArchitectures)
    if (a.architecture == architecture) return ignored ? a.ignores : a.reads;
  return "";
}

const char* architecture_name(Architecture architecture) {
  for (const ArchitectureInfo& a : kArchitectures)
    if (a.architecture == architecture) return a.name;
  return "?";
}

std::string describe_architecture(const ModelConfig& c) {
  std::vector<std::string> extras;
  if (c.qkv_bias) extras.push_back(c.o_bias ? "q/k/v/o biases" : "q/k/v biases");
  if (c.mlp_bias) extras.push_back("MLP biases");
  if (c.fused_projections) extras.push_back("fused qkv and gate_up projections");
  if (c.qk_norm) extras.push_back("RMSNorm of q and k heads");
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
  std::string s = architecture_name(c.architecture);
  for (size_t i = 0; i < extras.size(); ++i) s += (i ? "; " : ": ") + extras[i];
  return s;
}

// SmolLM3's no_rope_layers: [layer] 1 where the layer rotates, 0 where it has no positions
// (the name reads the other way), or every no_rope_layer_interval-th layer without.
std::vector<bool> smollm3_rope_layers(Fields& f, int n_layers) {
  std::vector<bool> rope(size_t(n_layers), true);
  const json* list = f.get("no_rope_layers");
  if (list && !(list->is_array() && list->empty())) {  // HF: an empty list means derive it
    if (!list->is_array() || list->size() != size_t(n_layers))
      f.fail("no_rope_layers", "must list 1 (RoPE) or 0 (no positions) per layer (" + std::to_string(n_layers) + "), got " + json_brief(*list));
    for (size_t i = 0; i < list->size(); ++i) {
      const json& v = (*list)[i];
      if (v != 0 && v != 1) f.fail("no_rope_layers", "entries must be 1 (RoPE) or 0 (no positions), got " + json_brief(v) + " at " + std::to_string(i));
      rope[i] = v == 1;
    }
    f.get("no_rope_layer_interval");  // read, unused: the list wins (as in HF)
    return rope;
  }
  const int interval = f.positive("no_rope_layer_interval", kMaxLayers, 4);
  for (int i = 0; i < n_layers; ++i) rope[size_t(i)] = (i + 1) % interval != 0;
  return rope;
}

// Gemma 2 and 3 (HF configuration_gemma2/3 defaults where a key is absent): the block's extras,
// and for Gemma 3 the local layers' own RoPE base. Returns which layers are windowed.
std::vector<bool> parse_gemma(Fields& f, ModelConfig& mc, bool gemma3, ArchitectureLayers& out) {
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
  std::vector<bool> windowed(size_t(mc.n_layers));
  const int pattern = gemma3 ? f.positive("sliding_window_pattern", kMaxLayers, 6) : 2;
  for (int i = 0; i < mc.n_layers; ++i) windowed[size_t(i)] = (i + 1) % pattern != 0;  // Gemma 2: even layers
  if (gemma3) {
    mc.qk_norm = true;
    const double local = f.number("rope_local_base_freq", 10000.0, positive_number, "must be > 0");
    out.key = "rope_local_base_freq";
    out.positions.assign(size_t(mc.n_layers), json());
    out.sliding_position = {{"type", "rope"}, {"base", local}};
    out.rope_defaults = {{"base", 1e6}};  // the global layers' rope_theta (Gemma3TextConfig)
  }
  return windowed;
}

// Cohere 2 (HF configuration_cohere2 defaults where a key is absent). Returns which layers are windowed.
std::vector<bool> parse_cohere2(Fields& f, ModelConfig& mc, ArchitectureLayers& out) {
  mc.layer_norm = true;
  mc.parallel_block = true;
  mc.rms_norm_eps = f.number("layer_norm_eps", 1e-5, [](double x) { return x > 0; }, "must be > 0");
  mc.logit_scale = f.number("logit_scale", 0.0625, [](double x) { return x > 0; }, "must be > 0");
  if (mc.hidden_size % mc.n_heads)
    f.fail("num_attention_heads", "(" + std::to_string(mc.n_heads) + ") must divide hidden_size (" +
                                      std::to_string(mc.hidden_size) + "): Cohere2's head_dim is their quotient");
  f.get("head_dim");  // HF sets head_dim = hidden_size / num_attention_heads whatever the config says
  mc.head_dim = mc.hidden_size / mc.n_heads;
  if (!f.has("tie_word_embeddings")) mc.tie_word_embeddings = true;
  out.key = "sliding_window_pattern";
  out.positions.assign(size_t(mc.n_layers), json());
  out.global_position = {{"type", "none"}};
  out.rope_defaults = {{"layout", "interleaved"}};
  std::vector<bool> windowed(size_t(mc.n_layers));
  const int pattern = f.positive("sliding_window_pattern", kMaxLayers, 4);
  for (int i = 0; i < mc.n_layers; ++i) windowed[size_t(i)] = (i + 1) % pattern != 0;
  return windowed;
}

ArchitectureLayers parse_architecture(Fields& f, ModelConfig& mc) {
  std::string name;
  if (const json* a = f.get("architectures")) {
    if (!a->is_array() || a->size() != 1 || !(*a)[0].is_string())
      f.fail("architectures", "must be a list of one architecture name, got " + json_brief(*a));
    name = (*a)[0].get<std::string>();
  }
  const std::string model_type = f.string("model_type", "");
  const ArchitectureInfo* info = find_architecture(name, model_type);
  if (!info) {
    if (name.empty()) f.fail("model_type", "'" + model_type + "' is not a model type pert reads (architectures: " + known_architectures() + ")");
    f.fail("architectures", "'" + name + "' is not an architecture pert reads (" + known_architectures() + ")");
  }
  if (!model_type.empty() && model_type != info->model_type)
    f.fail("model_type", "'" + model_type + "' does not match architectures " + info->name + " (model_type '" +
                             info->model_type + "')");
  mc.architecture = info->architecture;
  const Architecture arch = info->architecture;
  // A key of another architecture pert reads changes the math there: refused, never dropped.
  for (const ArchitectureInfo& other : kArchitectures)
    each_key(other.reads, [&](const std::string& key) {
      if (!reads(*info, key) && !listed(info->ignores, key) && f.has(key))
        f.fail(key, "is not read by " + std::string(info->name) + " (" + readers(key) + ", and it changes what it computes there); remove it");
    });
  const bool llama = arch == Architecture::Llama;
  const bool qwen = arch == Architecture::Qwen2 || arch == Architecture::Qwen3;
  const bool smollm3 = arch == Architecture::SmolLM3;
  const bool gemma = arch == Architecture::Gemma2 || arch == Architecture::Gemma3;
  ArchitectureLayers out;
  if (!gemma && f.has("hidden_act") && f.string("hidden_act") != "silu")
    f.fail("hidden_act", "must be \"silu\" (SwiGLU), got \"" + f.string("hidden_act") + "\"");
  std::vector<bool> rope(size_t(mc.n_layers), true);
  if (smollm3) {
    rope = smollm3_rope_layers(f, mc.n_layers);
    out.key = "no_rope_layers";
    for (bool r : rope) out.positions.push_back(r ? json() : json{{"type", "none"}});
  }

  for (const char* key : kOtherMath)
    if (const json* v = f.get(key); v && *v != false && *v != 0)
      f.fail(key, "is set (" + json_brief(*v) + "): it changes the math of another architecture, which pert does not compute");

  const bool attention_bias = f.boolean("attention_bias", false), mlp_bias = f.boolean("mlp_bias", false);
  if (attention_bias && !llama && !smollm3 && arch != Architecture::Qwen3)
    f.fail("attention_bias", std::string("is true, but ") + info->name + " has no such biases (LlamaForCausalLM and Qwen3ForCausalLM read it)");
  if (mlp_bias && !llama && !smollm3)
    f.fail("mlp_bias", std::string("is true, but ") + info->name + " has no such biases (LlamaForCausalLM and SmolLM3ForCausalLM read it)");
  mc.qkv_bias = attention_bias || arch == Architecture::Qwen2;
  mc.o_bias = attention_bias;
  mc.mlp_bias = mlp_bias;
  mc.fused_projections = arch == Architecture::Phi3;
  mc.qk_norm = arch == Architecture::Qwen3;

  // The window, and which layers use it.
  mc.layers.assign(size_t(mc.n_layers), {});
  const bool has_window = f.has("sliding_window");
  int window = has_window ? f.positive("sliding_window", kMaxCount) : 0;
  std::vector<bool> windowed(size_t(mc.n_layers), !llama && window > 0);
  if (gemma || arch == Architecture::Cohere2) {
    window = f.positive("sliding_window", kMaxCount, 4096);
    windowed = gemma ? parse_gemma(f, mc, arch == Architecture::Gemma3, out) : parse_cohere2(f, mc, out);
  }
  if (qwen) {
    if (!f.boolean("use_sliding_window", false)) window = 0;  // HF: the window is off unless asked for
    const int first = int(f.integer("max_window_layers", 0, kMaxLayers, mc.n_layers));
    for (int i = 0; i < mc.n_layers; ++i) windowed[size_t(i)] = window > 0 && i >= first;
  }
  if (smollm3) {  // HF: a window only with use_sliding_window, and only on the layers without RoPE
    if (!f.boolean("use_sliding_window", false)) window = 0;
    for (int i = 0; i < mc.n_layers; ++i) windowed[size_t(i)] = window > 0 && !rope[size_t(i)];
  }
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
                                  std::string(qwen || smollm3 ? " with use_sliding_window" : "") + ")");
    }
  }
  for (int i = 0; i < mc.n_layers; ++i) mc.layers[size_t(i)].window = windowed[size_t(i)] ? window : 0;
  const bool by_window = !out.sliding_position.is_null() || !out.global_position.is_null();
  for (int i = 0; i < mc.n_layers && by_window; ++i)  // Gemma 3's local RoPE, Cohere 2's global NoPE
    out.positions[size_t(i)] = windowed[size_t(i)] ? out.sliding_position : out.global_position;
  return out;
}

}  // namespace pert
