// Model and positional-scheme configuration: parsed from an HF-style config.json (plus pert's
// "position" block), with overrides, validated here and nowhere else (docs/design.md).
#pragma once
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pert {

class SchemeConfig;     // positions.hpp: a scheme's own typed block
class ExtensionConfig;  // positions.hpp: an attention-time method of the "extend" block

// The "position" block (or the HF RoPE keys it stands for): its type picks a scheme from the
// registry (src/attention/positions_registry.cpp), and that scheme's file parses, validates, describes
// and builds the rest. The config layer knows only the type.
// A tensor a config expects: its HF name and shape (a scheme's own, the architecture's, the model's).
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

struct PositionConfig {
  std::shared_ptr<const SchemeConfig> scheme;  // set by parse_model_config
  std::string type() const;                    // "rope", "alibi", ...
  // The scheme's own block, e.g. as<RopeConfig>(); throws pert::Error for another scheme.
  template <class T>
  const T& as() const;
};

// The MLP's gate: SwiGLU (silu(gate)·up) or GeGLU with the tanh GELU (Gemma).
enum class Activation { SiLU, GeluTanh };

// One layer's attention as positions shape it: pert's "layers" block (layers.cpp), or an HF
// architecture's layout (sliding windows, layers without RoPE, chunked-local layers).
// The first key the query at m sees under a sliding window W (m − W + 1) and a chunk C
// (⌊m/C⌋·C), the later of the two; 0 with neither (every earlier key). Never decreases with m.
inline int first_visible_key(int m, int window, int chunk) {
  const int first = window > 0 ? std::max(0, m - window + 1) : 0;
  return chunk > 0 ? std::max(first, m / chunk * chunk) : first;
}

struct LayerAttention {
  PositionConfig position;  // this layer's scheme: the model's `position` unless the layout gives another
  int window = 0;           // sliding window W: query m sees keys m − W < n <= m; 0: every earlier key
  int chunk = 0;            // chunked local span C (Llama 4): query m sees keys ⌊m/C⌋·C <= n <= m; 0: none
  // iRoPE's attention temperature: query m's q × (1 + scale · ln(1 + ⌊(m + 1) / floor⌋)); scale 0: none
  double temperature_scale = 0.0;
  int temperature_floor = 1;
  double query_temperature(int m) const {
    return temperature_scale == 0.0 ? 1.0 : 1.0 + temperature_scale * std::log1p(std::floor((m + 1.0) / temperature_floor));
  }
  int first_key(int m) const { return first_visible_key(m, window, chunk); }
  // How far back the queries see: window − 1, chunk − 1 (the smaller of the two), or −1 for every
  // earlier key. Layers of one scheme and span share an attention unit (and its ring).
  int span() const {
    int s = window > 0 ? window - 1 : -1;
    if (chunk > 0) s = s < 0 ? chunk - 1 : std::min(s, chunk - 1);
    return s;
  }
};

// A mixture of experts in place of the MLP (src/model/moe.cpp): per token, a router scores the
// experts, `n_used` of them run (each a gated MLP of width expert_ffn) and their outputs are
// summed by the router's weights; a shared expert (Qwen2-MoE, DeepSeek) runs for every token too.
struct MoeConfig {
  // How the router's logits l = x·W_rᵀ (+ gpt-oss's bias) choose and weigh the experts:
  //   Softmax        softmax over all, the n_used largest; renormalised to sum 1 when `renormalize`
  //                  (Mixtral always; Qwen-MoE and OLMoE iff norm_topk_prob); with n_groups > 1
  //                  the n_used largest within the topk_groups groups of the largest best
  //                  (DeepSeek V2's group_limited_greedy); × routed_scale
  //   TopKSoftmax    the n_used largest logits, softmax over those alone (gpt-oss)
  //   SigmoidGroups  s = σ(l), chosen by s + e_score_correction_bias: the experts in n_groups groups,
  //                  a group scored by its two best, the topk_groups best groups kept, the n_used
  //                  best within them; weights the chosen s, renormalised when `renormalize`
  //                  (DeepSeek V3's norm_topk_prob), × routed_scale
  enum class Router { Softmax, TopKSoftmax, SigmoidGroups };
  Router router = Router::Softmax;
  int n_experts = 0;          // 0: no experts, every layer dense
  int n_used = 0;             // experts per token (num_experts_per_tok)
  int expert_ffn = 0;         // each expert's width
  bool renormalize = true;
  int n_groups = 1, topk_groups = 1;  // SigmoidGroups, Softmax (1: no groups)
  double routed_scale = 1.0;          // SigmoidGroups, Softmax: routed_scaling_factor
  // Each expert's gated unit: SwiGLU silu(gate)·up, or gpt-oss's: gate clamped above at
  // swiglu_limit, up to ±swiglu_limit, (up + 1)·gate·σ(swiglu_alpha·gate).
  bool clamped_swiglu = false;
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;
  // The shared expert's width (0: none): behind σ(x·w_gate) where the layer has that gate
  // (Qwen2-MoE), added as it is otherwise (DeepSeek's n_shared_experts, one wide MLP).
  int shared_ffn = 0;
  bool gated_shared = false;
  bool biases = false;  // the router and each expert's gate, up and down add a bias (gpt-oss)
  std::vector<bool> sparse;   // [layer]: experts (true) or the dense MLP of intermediate_size
  bool sparse_layer(int layer) const { return n_experts > 0 && sparse[size_t(layer)]; }
};

// Multi-head latent attention (DeepSeek V2/V3; src/model/mla.cpp): q from x (q_proj) or through a
// low rank (q_a_proj, RMSNorm, q_b_proj); one latent per token (kv_a_proj_with_mqa's first
// kv_lora_rank, RMSNorm'd) expanded per head by kv_b_proj to k_nope and v, and one rope key shared
// by the heads. pert caches what MLA caches, the rope key and the latent, as one kv head
// [k_rope | c] (head_dim = rope + kv_lora_rank, n_kv_heads = 1): each head's query absorbs its
// k_nope expansion, and its output its v expansion (mla.hpp). kv_lora_rank 0: not MLA.
struct MlaConfig {
  int q_lora_rank = 0;  // 0: one projection q_proj
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }  // a head's key as HF expands it
};

struct ModelConfig {
  // The HF architecture (config.json's architectures[0]): one plug-in of src/model/architectures/,
  // which sets the flags below from its keys. Each is llama's block plus those extras.
  std::string architecture = "LlamaForCausalLM";
  int vocab_size = 0;
  int hidden_size = 0;         // d
  int intermediate_size = 0;   // MLP width
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int max_position_embeddings = 0;  // the trained context length
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  int bos_token_id = -1;            // -1: none
  std::vector<int> eos_token_ids;
  bool qkv_bias = false;            // q/k/v projections add a bias (Qwen2; Llama's attention_bias)
  bool o_bias = false;              // o_proj adds a bias (Llama's attention_bias)
  bool mlp_bias = false;            // gate/up/down add a bias (Llama's mlp_bias)
  bool fused_projections = false;   // Phi-3: qkv_proj [q + 2·kv][d] and gate_up_proj [2·ffn][d], gate first
  bool qk_norm = false;             // Qwen3: RMSNorm of each query and key head before RoPE (q_norm, k_norm)
  // gpt-oss: a learned logit per head (self_attn.sinks [n_heads]) in each softmax's denominator:
  // weights exp(s_j) / (Σ_k exp(s_k) + exp(sink_h)), which sum to less than 1.
  bool sink_logits = false;
  // OLMoE: q_norm and k_norm over the whole projection (n_heads·head_dim, n_kv_heads·head_dim)
  // rather than per head, then q, k and v clamped to ±clip_qkv (0: no clamp)
  bool qk_norm_whole = false;
  double clip_qkv = 0.0;
  MoeConfig moe;
  MlaConfig mla;  // DeepSeek's attention front-end (head_dim = qk_rope + kv_lora_rank, one kv head)
  // Layers stored after the last that the forward never runs (DeepSeek V3's
  // num_nextn_predict_layers: multi-token prediction, a draft for speculative decoding): their
  // tensors are left out at load, as HF leaves them.
  int draft_layers = 0;
  // Gemma's block: GeGLU, norms whose gain is 1 + w, a norm on each branch's output too
  // (post_attention_layernorm, pre_/post_feedforward_layernorm), scaled embeddings, soft caps.
  Activation activation = Activation::SiLU;
  bool norm_plus_one = false;       // RMSNorm gains stored as w, applied as 1 + w (HF's Gemma files)
  bool sandwich_norms = false;      // out = x + norm(branch(norm(x))) for attention and MLP
  double embed_scale = 1.0;         // token embeddings × this (Gemma: √hidden, rounded to float)
  double attention_scale = 0.0;     // on q·k; 0: 1/√(score terms · head_dim) (Gemma: query_pre_attn_scalar^−½)
  double attn_softcap = 0.0;        // scores s → cap·tanh(s/cap) before the mask and bias; 0: none
  double final_softcap = 0.0;       // logits likewise; 0: none
  // Cohere's block: LayerNorm (weight only, eps layer_norm_eps) for every norm, attention and MLP
  // side by side on one norm's output (x + attn(n) + mlp(n)), logits × logit_scale.
  bool layer_norm = false;
  bool parallel_block = false;
  double logit_scale = 1.0;
  // The model's scheme: what every layer uses unless `layers` gives it another, and the one
  // that adds positions to the embeddings (learned, sinusoidal).
  PositionConfig position;
  std::vector<LayerAttention> layers;  // [n_layers]: each layer's scheme and the keys it sees
  // The "layers" block's rules by their names (`set layers.NAME...` reaches them), each
  // {"given": the rule as written, "layers": [those it selected], "fields": [what it sets]}; {} without one.
  nlohmann::json layer_rules = nlohmann::json::object();
  // config.json's own config, before any override (the positions the weights were trained
  // with); null when config.json only parses with the overrides.
  std::shared_ptr<const ModelConfig> trained;
  // The "extend" block's methods in the block's key order (training-free context extension).
  std::vector<std::shared_ptr<const ExtensionConfig>> extend;
};

// The values one position keeps in one layer's KV cache: every kv head's key and value, or
// MLA's one row [k_rope | latent] (its values are read from the keys' rows).
inline double cached_values_per_position(const ModelConfig& c) {
  return double(c.n_kv_heads) * c.head_dim * (c.mla.enabled() ? 1 : 2);
}

// Overrides applied, in order, over a model's config.json.
struct ConfigOverrides {
  // JSON merge patches (RFC 7386): files, or inline JSON objects where the text starts with '{'
  // (read_config_patch), so a command line can vary a config without writing one.
  std::vector<std::filesystem::path> files;
  std::vector<std::string> sets;             // "key.path=value"; value is JSON, else a string
  // Overrides may rescale or extend the trained scheme (SchemeConfig::identity()); replacing it
  // is a SchemeChangeError unless this is set.
  bool allow_scheme_change = false;
  // Merge patches given as JSON (the Python module's config=dict), applied after the files.
  std::vector<nlohmann::json> patches = {};
  bool empty() const { return files.empty() && patches.empty() && sets.empty(); }
  std::string describe() const;  // "`config` a.json `set x=1`", as given (error.hpp: fields)
};

// A `files` entry's merge patch: the object written inline ("{...}") or the file's. Throws
// FormatError / IoError / ConfigError (not an object) naming it.
nlohmann::json read_config_patch(const std::filesystem::path& given);
bool is_inline_config(const std::string& given);  // starts with '{' (after spaces)

// Applies overrides to a raw config. A --set value replaces what is at its path (null
// removes it); a file is merged as RFC 7386 says. Throws ConfigError / FormatError / IoError.
nlohmann::json apply_overrides(nlohmann::json config, const ConfigOverrides& overrides);

// Builds and validates the typed config. `source` names the config in error messages.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);

// Top-level keys of `config` that pert does not read (HF bookkeeping such as
// "architectures" or "torch_dtype"); shown by `pert inspect`.
std::vector<std::string> ignored_config_keys(const nlohmann::json& config);

// The resolved config, with every default filled in, as pert's own JSON.
nlohmann::json to_json(const ModelConfig& config);
nlohmann::json to_json(const PositionConfig& position);

// The layers whose scheme or span differs, in words ("" when every layer is alike), e.g.
// "layers 3, 7 (every 4th from 3): NoPE; the others: sliding window 8".
std::string describe_layers(const ModelConfig& config);
// True when some layer's scheme differs from the model's `position`.
bool has_layer_schemes(const ModelConfig& config);
// What the weights learned to depend on, layer by layer (SchemeConfig::identity), e.g. "rope"
// or "rope; layers 3, 7: none".
std::string position_identity(const ModelConfig& config);

// One line in words, e.g. "RoPE (half layout, base 10000, rotary dim 64/64), YaRN ×4 ...".
std::string describe(const PositionConfig& position, int head_dim);
// The scheme and the "extend" methods on top of it, in one line.
std::string describe_position(const ModelConfig& config);
// A short name of the same, e.g. "rope yarn x4 + self_extend", for tables and plots.
std::string position_label(const ModelConfig& config);

// The HF architectures pert reads ("LlamaForCausalLM", ...), in the registry's order, and each one's model_type.
std::vector<std::string> architecture_names();
std::string architecture_model_type(const std::string& architecture);
// The architecture and its extras in words, e.g. "Qwen2ForCausalLM: q/k/v biases; sliding window 4096 on layers 21-23".
std::string describe_architecture(const ModelConfig& config);

}  // namespace pert
