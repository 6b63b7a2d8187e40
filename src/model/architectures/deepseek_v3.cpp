// DeepseekV3ForCausalLM and DeepseekV2ForCausalLM (HF models/deepseek_v3, deepseek_v2; DeepSeek-V3,
// -R1, -V2-Lite): multi-head latent attention (ModelConfig::mla, src/model/mla.cpp) and, from layer
// first_k_dense_replace on (every moe_layer_freq-th), n_routed_experts experts of width
// moe_intermediate_size plus n_shared_experts shared ones run as one MLP, ungated.
// V3 routes by σ(logits) + e_score_correction_bias within topk_group of n_group groups
// (MoeConfig::Router::SigmoidGroups); V2 by softmax top-k, "greedy" or "group_limited_greedy"
// (within the topk_group groups of the best probabilities), × routed_scaling_factor. RoPE turns
// only each head's qk_rope_head_dim dims, as interleaved pairs (V2 always, V3 when
// rope_interleave); pert keeps those dims first in the cached row (mla.hpp).
#include <cmath>

#include "architecture.hpp"
#include "../mla.hpp"

namespace pert {

namespace {

// MLA's shapes into mc.mla. The attention then sees one kv head of width qk_rope_head_dim +
// kv_lora_rank, the rope key and the latent (mla.hpp), scaled as HF scales qk_head_dim-wide heads.
void read_mla(Fields& f, ModelConfig& mc, ArchitectureLayers& layers, bool interleaved) {
  MlaConfig& m = mc.mla;
  // q_lora_rank null: one projection q_proj (V2-Lite)
  m.q_lora_rank = f.obj_has("q_lora_rank") && !f.has("q_lora_rank") ? 0 : f.positive("q_lora_rank", kMaxDim, 1536);
  m.kv_lora_rank = f.positive("kv_lora_rank", kMaxDim, 512);
  m.qk_nope_head_dim = f.positive("qk_nope_head_dim", kMaxDim, 128);
  m.qk_rope_head_dim = f.positive("qk_rope_head_dim", kMaxDim, 64);
  m.v_head_dim = f.positive("v_head_dim", kMaxDim, 128);
  if (m.qk_rope_head_dim % 2) f.fail("qk_rope_head_dim", "must be even (RoPE turns pairs), got " + std::to_string(m.qk_rope_head_dim));
  // HF's head_dim here is the rotary width (the config class sets it to qk_rope_head_dim)
  if (f.has("head_dim") && mc.head_dim != m.qk_rope_head_dim)
    f.fail("head_dim", "(" + std::to_string(mc.head_dim) + ") must equal qk_rope_head_dim (" + std::to_string(m.qk_rope_head_dim) +
                           "), the rotary width in DeepSeek's configs");
  if (f.has("num_key_value_heads") && mc.n_kv_heads != mc.n_heads)
    f.fail("num_key_value_heads", "(" + std::to_string(mc.n_kv_heads) + ") must equal num_attention_heads (" +
                                      std::to_string(mc.n_heads) + "): kv_b_proj gives every head its own key and value");
  if (f.has("partial_rotary_factor"))
    f.fail("partial_rotary_factor", "is set, but DeepSeek's RoPE turns exactly the qk_rope_head_dim dims");
  mc.head_dim = m.qk_rope_head_dim + m.kv_lora_rank;
  mc.n_kv_heads = 1;
  mc.attention_scale = 1.0 / std::sqrt(double(m.qk_head_dim()));
  layers.rope_defaults = {{"rotary_dim", m.qk_rope_head_dim}, {"layout", interleaved ? "interleaved" : "half"}};
}

// DeepseekV3Attention's softmax scale: qk_head_dim^-½, × m² with m = 0.1·mscale_all_dim·ln(factor) + 1
// when the RoPE scaling gives mscale_all_dim and a factor above 1 (yarn_get_mscale).
void v3_attention_scale(Fields& f, ModelConfig& mc) {
  const json* rs = f.get("rope_scaling");
  if (!rs) rs = f.get("rope_parameters");
  double m = 1.0;
  if (rs && rs->is_object()) {
    const json all = rs->value("mscale_all_dim", json(0)), factor = rs->value("factor", json(1.0));
    if (all.is_number() && factor.is_number() && all.get<double>() != 0 && factor.get<double>() > 1)
      m = 0.1 * all.get<double>() * std::log(factor.get<double>()) + 1.0;
  }
  mc.attention_scale = m / std::sqrt(double(mc.mla.qk_head_dim())) * m;
}

// The experts (none when n_routed_experts is null), their shared MLP and which layers have them.
void read_deepseek_experts(Fields& f, ModelConfig& mc, int def_experts, int def_used, int def_shared, int def_dense, int def_ffn) {
  if (f.obj_has("n_routed_experts") && !f.has("n_routed_experts")) return;  // a dense model
  read_experts(f, mc, "n_routed_experts", def_experts, def_used);
  MoeConfig& m = mc.moe;
  m.expert_ffn = f.positive("moe_intermediate_size", kMaxDim, def_ffn);
  const int shared = f.obj_has("n_shared_experts") && !f.has("n_shared_experts") ? 0 : f.positive("n_shared_experts", 64, def_shared);
  m.shared_ffn = shared * m.expert_ffn;  // the shared experts side by side: one MLP, added ungated
  const int dense = int(f.integer("first_k_dense_replace", 0, kMaxLayers, def_dense));
  const int freq = f.positive("moe_layer_freq", kMaxLayers, 1);
  for (int i = 0; i < mc.n_layers; ++i) m.sparse[size_t(i)] = i >= dense && i % freq == 0;
}

void require_string(Fields& f, const char* key, const char* def, const char* want, const char* why) {
  const std::string got = f.string(key, def);
  if (got != want) f.fail(key, "is \"" + got + "\"; " + why);
}

// n_group groups of which the topk_group best are kept (V3's noaux_tc, V2's group_limited_greedy)
void read_groups(Fields& f, MoeConfig& m, int def_groups, int def_kept) {
  m.n_groups = f.positive("n_group", kMaxDim, def_groups);
  m.topk_groups = f.positive("topk_group", kMaxDim, def_kept);
  if (m.n_experts > 0) {
    if (m.n_experts % m.n_groups)
      f.fail("n_group", "(" + std::to_string(m.n_groups) + ") must divide n_routed_experts (" + std::to_string(m.n_experts) + ")");
    if (m.topk_groups > m.n_groups)
      f.fail("topk_group", "(" + std::to_string(m.topk_groups) + ") keeps more groups than n_group (" + std::to_string(m.n_groups) + ")");
    if (m.n_used > m.topk_groups * (m.n_experts / m.n_groups))
      f.fail("num_experts_per_tok", "(" + std::to_string(m.n_used) + ") is more than the topk_group groups hold (" +
                                        std::to_string(m.topk_groups * (m.n_experts / m.n_groups)) + ")");
  }
}

std::vector<bool> deepseek_v3_parse(Fields& f, ModelConfig& mc, int&, ArchitectureLayers& layers) {
  read_mla(f, mc, layers, f.boolean("rope_interleave", true));
  v3_attention_scale(f, mc);
  read_deepseek_experts(f, mc, 256, 8, 1, 3, 2048);
  MoeConfig& m = mc.moe;
  m.router = MoeConfig::Router::SigmoidGroups;
  require_string(f, "scoring_func", "sigmoid", "sigmoid", "DeepSeek V3 scores experts by sigmoid (pert computes no other)");
  require_string(f, "topk_method", "noaux_tc", "noaux_tc", "DeepSeek V3 chooses by noaux_tc (pert computes no other)");
  m.renormalize = f.boolean("norm_topk_prob", true);
  m.routed_scale = f.number("routed_scaling_factor", 2.5, [](double x) { return x > 0; }, "must be > 0");
  read_groups(f, m, 8, 4);
  return std::vector<bool>(size_t(mc.n_layers), false);
}

std::vector<bool> deepseek_v2_parse(Fields& f, ModelConfig& mc, int&, ArchitectureLayers& layers) {
  read_mla(f, mc, layers, true);  // HF's V2 turns interleaved pairs (complex numbers), and scales by qk_head_dim^-½ alone
  read_deepseek_experts(f, mc, 64, 6, 2, 0, 1407);
  require_string(f, "scoring_func", "softmax", "softmax", "DeepSeek V2 scores experts by softmax (pert computes no other)");
  const std::string method = f.string("topk_method", "greedy");
  if (method != "greedy" && method != "group_limited_greedy")
    f.fail("topk_method", "is \"" + method + "\": DeepSeek V2 chooses by \"greedy\" or \"group_limited_greedy\" (pert computes no other)");
  if (f.boolean("norm_topk_prob", false))
    f.fail("norm_topk_prob", "is true: HF's DeepseekV2 ignores it while DeepSeek's code renormalises; pert refuses the ambiguity");
  MoeConfig& m = mc.moe;
  m.router = MoeConfig::Router::Softmax;  // softmax over all experts, the chosen not renormalised, × routed_scaling_factor
  m.renormalize = false;
  m.routed_scale = f.number("routed_scaling_factor", 1.0, [](double x) { return x > 0; }, "must be > 0");
  if (method == "group_limited_greedy") {  // groups scored by their best probability
    read_groups(f, m, 1, 1);
  } else {
    f.get("n_group");  // (read: greedy uses no groups)
    f.get("topk_group");
  }
  return std::vector<bool>(size_t(mc.n_layers), false);
}

#define PERT_DEEPSEEK_KEYS                                                                                             \
  "rms_norm_eps hidden_act n_routed_experts num_experts_per_tok moe_intermediate_size n_shared_experts n_group "    \
  "topk_group routed_scaling_factor norm_topk_prob scoring_func topk_method first_k_dense_replace moe_layer_freq " \
  "q_lora_rank kv_lora_rank qk_nope_head_dim qk_rope_head_dim v_head_dim"

constexpr MoeTensorNames kDeepseekMoeNames = {"mlp.gate", "mlp.experts", "gate_proj", "up_proj", "down_proj", "mlp.shared_experts"};

}  // namespace

const ArchitectureSpec kDeepseekV3Architecture = {
    "DeepseekV3ForCausalLM", "deepseek_v3", "", PERT_DEEPSEEK_KEYS " rope_interleave", "", false, false, deepseek_v3_parse,
    nullptr, false, {}, kDeepseekMoeNames,
};

const ArchitectureSpec kDeepseekV2Architecture = {
    "DeepseekV2ForCausalLM", "deepseek_v2", "", PERT_DEEPSEEK_KEYS, "", false, false, deepseek_v2_parse,
    nullptr, false, {}, kDeepseekMoeNames,
};

// DeepSeek's tensor names (declared in mla.hpp; here, with the architecture, so that the config
// and checkpoint readers need no forward-pass code).
std::string mla_tensor(int layer, const char* part) {
  return tensor_names::layer_prefix(std::to_string(layer)) + "self_attn." + part + ".weight";
}

std::vector<std::pair<std::string, std::vector<int64_t>>> mla_tensors(const ModelConfig& c, int layer) {
  const MlaConfig& m = c.mla;
  const int64_t d = c.hidden_size, H = c.n_heads, qk = m.qk_head_dim();
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  if (m.q_lora_rank > 0) {
    out.push_back({mla_tensor(layer, "q_a_proj"), {m.q_lora_rank, d}});
    out.push_back({mla_tensor(layer, "q_a_layernorm"), {m.q_lora_rank}});
    out.push_back({mla_tensor(layer, "q_b_proj"), {H * qk, m.q_lora_rank}});
  } else {
    out.push_back({mla_tensor(layer, "q_proj"), {H * qk, d}});
  }
  out.push_back({mla_tensor(layer, "kv_a_proj_with_mqa"), {m.kv_lora_rank + m.qk_rope_head_dim, d}});
  out.push_back({mla_tensor(layer, "kv_a_layernorm"), {m.kv_lora_rank}});
  out.push_back({mla_tensor(layer, "kv_b_proj"), {H * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank}});
  return out;
}

void require_mla_rotation(const ModelConfig& c, const std::string& source) {
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const json p = c.layers[l].position.scheme->to_json();
    const int rope = c.mla.qk_rope_head_dim;
    if (p.contains("rotary_dim") && p["rotary_dim"] != rope)
      throw ConfigError(source + ": position.rotary_dim is " + p["rotary_dim"].dump() + " (layer " + std::to_string(l) +
                        "), but MLA's heads rotate exactly qk_rope_head_dim = " + std::to_string(rope) +
                        " dims: the rest of the cached row is the latent");
  }
}

}  // namespace pert
