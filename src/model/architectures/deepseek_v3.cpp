// DeepseekV3ForCausalLM and DeepseekV2ForCausalLM (HF models/deepseek_v3, deepseek_v2; DeepSeek-V3,
// -R1, -V2-Lite): multi-head latent attention (ModelConfig::mla, src/model/mla.cpp) and, from layer
// first_k_dense_replace on (every moe_layer_freq-th), n_routed_experts experts of width
// moe_intermediate_size plus n_shared_experts shared ones run as one MLP, ungated.
// V3 routes by σ(logits) + e_score_correction_bias within topk_group of n_group groups
// (MoeConfig::Router::SigmoidGroups); V2 by softmax top-k, "greedy" or "group_limited_greedy"
// (within the topk_group groups of the best probabilities), × routed_scaling_factor. RoPE turns
// only each head's qk_rope_head_dim dims, as interleaved pairs (V2 always, V3 when
// rope_interleave); pert keeps those dims first in the cached row (mla.hpp).
#include <cctype>
#include <cmath>

#include "model/architectures/architecture.hpp"
#include "model/mla.hpp"
#include "pert/gguf.hpp"

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

// MLA's softmax scale (DeepseekV3Attention's, and V2's since transformers PR 47435 as DeepSeek's own
// code): qk_head_dim^-½, × m² with m = 0.1·mscale_all_dim·ln(factor) + 1 when the RoPE scaling
// gives mscale_all_dim and a factor above 1 (yarn_get_mscale).
void mla_attention_scale(Fields& f, ModelConfig& mc) {
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
  mc.draft_layers = int(f.integer("num_nextn_predict_layers", 0, kMaxLayers, 0));
  mla_attention_scale(f, mc);
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
  read_mla(f, mc, layers, true);  // HF's V2 turns interleaved pairs (complex numbers)
  mla_attention_scale(f, mc);
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

// The layer N of a "model.layers.N." name, or -1.
int layer_of(const std::string& name) {
  const std::string prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  size_t at = prefix.size(), end = at;
  while (end < name.size() && end - at < 6 && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  return end > at && end < name.size() && name[end] == '.' ? std::stoi(name.substr(at, end - at)) : -1;
}

// DeepSeek's checkpoints: experts fused as transformers v5 keeps them (named as Qwen2-MoE's), and
// V3's draft layers (model.layers.61.* in V3) left out.
Checkpoint deepseek_checkpoint(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes) {
  Checkpoint out = fused_experts_checkpoint(std::move(stored), c, notes);
  std::vector<TensorView> kept;
  size_t skipped = 0;
  for (const auto& entry : out.tensors()) {
    const int layer = layer_of(entry.first);
    if (layer >= c.n_layers && layer < c.n_layers + c.draft_layers) ++skipped;
    else kept.push_back(*entry.second);
  }
  if (skipped == 0) return out;
  const std::string first = std::to_string(c.n_layers), last = std::to_string(c.n_layers + c.draft_layers - 1);
  notes.push_back("skipped " + std::to_string(skipped) + " tensors of the multi-token-prediction layers (model.layers." + first +
                  (c.draft_layers > 1 ? ".." + last : "") + ".*, num_nextn_predict_layers): a draft the forward never runs");
  return checkpoint_views(std::move(out), std::move(kept));
}

// GGUF "deepseek2" (llama.cpp's LLM_ARCH_DEEPSEEK2) into config.json's form, in both layouts llama.cpp
// has written: b4748's (attention.key_length / value_length the heads' qk and v widths, kv_b whole)
// and its MLA split's (key_length_mla / value_length_mla; key_length, value_length and head_count_kv
// the latent cache's row, kv_b as attn_k_b / attn_v_b, joined by gguf_model.cpp). Its graph: NORM
// RoPE (interleaved pairs, no q/k permutation), expert_gating_func 2 (sigmoid) is V3, 1 or absent
// (softmax) V2; groups only where the file gives expert_group_count (b4748 writes none: all experts
// in one group). YaRN: cos/sin unscaled and the softmax × m², m = 1 + yarn_log_multiplier·ln(factor),
// which is HF V3's with mscale = mscale_all_dim = yarn_log_multiplier / 0.1 (the converter's 0.1·).
void deepseek2_from_gguf(const GgufFile& f, const std::string& a, json& c) {
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw FormatError(f.path() + ": key '" + a + key + "' " + why);
  };
  auto count = [&](const std::string& key) {  // a count that may be 0
    const int64_t n = f.get_int(a + key);
    if (n < 0 || n > kMaxLayers * 64) refuse(key, "is " + std::to_string(n) + ", expected a count >= 0");
    return int(n);
  };
  const int64_t gating = f.opt_int(a + "expert_gating_func").value_or(1);  // absent: softmax, as llama.cpp reads V2's files
  if (gating != 1 && gating != 2)
    refuse("expert_gating_func", "is " + std::to_string(gating) + "; deepseek2 routes by 1 (softmax, DeepSeek V2) or 2 (sigmoid, V3)");
  const bool v3 = gating == 2;
  c["architectures"] = {v3 ? kDeepseekV3Architecture.hf_name : kDeepseekV2Architecture.hf_name};
  if (f.opt_int(a + "nextn_predict_layers").value_or(0) > 0)
    refuse("nextn_predict_layers", "is set: pert reads no multi-token-prediction layers from a GGUF file");

  // MLA's widths
  const int heads = c["num_attention_heads"];
  const int rope = gguf_positive(f, a + "rope.dimension_count"), latent = gguf_positive(f, a + "attention.kv_lora_rank");
  const bool split = f.find(a + "attention.key_length_mla") != nullptr;
  const std::string qk_key = split ? "attention.key_length_mla" : "attention.key_length";
  const int qk = gguf_positive(f, a + qk_key), v = gguf_positive(f, a + (split ? "attention.value_length_mla" : "attention.value_length"));
  if (split) {  // the cached row as llama.cpp's MQA sees it: one kv head [latent | rope key]
    if (gguf_positive(f, a + "attention.key_length") != latent + rope)
      refuse("attention.key_length", "must be kv_lora_rank + rope.dimension_count (" + std::to_string(latent + rope) + ") beside key_length_mla");
    if (gguf_positive(f, a + "attention.value_length") != latent)
      refuse("attention.value_length", "must be kv_lora_rank (" + std::to_string(latent) + ") beside value_length_mla");
    if (gguf_positive(f, a + "attention.head_count_kv", 1) != 1) refuse("attention.head_count_kv", "must be 1 beside key_length_mla");
  } else if (gguf_positive(f, a + "attention.head_count_kv", heads) != heads) {
    refuse("attention.head_count_kv", "must equal attention.head_count (" + std::to_string(heads) + "): kv_b gives every head its key");
  }
  if (qk <= rope) refuse(qk_key, "(" + std::to_string(qk) + ") must exceed rope.dimension_count (" + std::to_string(rope) + ")");
  c["head_dim"] = rope;  // (HF's head_dim here: the rotary width)
  c["num_key_value_heads"] = heads;
  c["qk_rope_head_dim"] = rope;
  c["qk_nope_head_dim"] = qk - rope;
  c["v_head_dim"] = v;
  c["kv_lora_rank"] = latent;
  c["q_lora_rank"] = f.find(a + "attention.q_lora_rank") ? json(gguf_positive(f, a + "attention.q_lora_rank")) : json();
  if (v3) c["rope_interleave"] = true;  // (V2 always turns pairs)

  // The experts
  gguf_experts(f, a, c, "n_routed_experts", "norm_topk_prob", false, false);
  c["moe_intermediate_size"] = gguf_positive(f, a + "expert_feed_forward_length");
  const int shared = count("expert_shared_count");
  c["n_shared_experts"] = shared ? json(shared) : json();
  c["first_k_dense_replace"] = count("leading_dense_block_count");
  c["routed_scaling_factor"] = gguf_positive_number(f, a + "expert_weights_scale", 1.0);
  const bool grouped = f.find(a + "expert_group_count") != nullptr;
  const int groups = grouped ? gguf_positive(f, a + "expert_group_count") : 1;
  const int kept = grouped ? gguf_positive(f, a + "expert_group_used_count") : 1;
  if (v3) {
    c["scoring_func"] = "sigmoid";
    c["topk_method"] = "noaux_tc";
    c["n_group"] = groups;
    c["topk_group"] = kept;
  } else {
    if (groups > 1 && kept < groups)
      refuse("expert_group_count", "is " + std::to_string(groups) + " with softmax gating: llama.cpp scores a group by its two best "
             "experts' sum, DeepSeek V2's group_limited_greedy by its best; pert refuses the difference");
    if (c["norm_topk_prob"] == true)
      refuse("expert_weights_norm", "is true with softmax gating: llama.cpp renormalises, HF's DeepSeek V2 does not; pert refuses the difference");
    c["scoring_func"] = "softmax";
    c["topk_method"] = "greedy";
  }

  // RoPE: YaRN as llama.cpp's deepseek2 graph computes it; no other scaling
  const std::string scaling = f.opt_string(a + "rope.scaling.type").value_or("none");
  if (scaling != "none" && scaling != "yarn")
    refuse("rope.scaling.type", "is '" + scaling + "'; llama.cpp's deepseek2 rescales cos/sin for it, which pert does not: none or yarn");
  if (scaling == "yarn") {
    const std::optional<double> log_mul = f.opt_float(a + "rope.scaling.yarn_log_multiplier");
    if (!log_mul || !(*log_mul > 0) || !std::isfinite(*log_mul))
      refuse("rope.scaling.yarn_log_multiplier", "is missing or not positive: a deepseek2 YaRN file without it is scaled differently by "
             "llama.cpp b4748 and later versions (the converter writes 0.1 x mscale_all_dim)");
    if (f.find(a + "rope.scaling.attn_factor"))
      refuse("rope.scaling.attn_factor", "is set; llama.cpp's deepseek2 folds it into the softmax scale, which pert does not read");
    const double all_dim = double(float(*log_mul) / 0.1f);  // as llama.cpp undoes the converter's factor
    c["rope_scaling"] = {{"mscale", all_dim}, {"mscale_all_dim", all_dim}, {"attention_factor", 1.0}};
  }
}

constexpr MoeTensorNames kDeepseekMoeNames = {"mlp.gate", "mlp.experts", "gate_proj", "up_proj", "down_proj", "mlp.shared_experts"};

}  // namespace

const ArchitectureSpec kDeepseekV3Architecture = {
    "DeepseekV3ForCausalLM", "deepseek_v3", "", PERT_DEEPSEEK_KEYS " rope_interleave num_nextn_predict_layers", "", false, false,
    deepseek_v3_parse, nullptr, false, {}, kDeepseekMoeNames, deepseek_checkpoint,
};

const ArchitectureSpec kDeepseekV2Architecture = {
    "DeepseekV2ForCausalLM", "deepseek_v2", "deepseek2", PERT_DEEPSEEK_KEYS, "", false, false, deepseek_v2_parse,
    deepseek2_from_gguf, false, {}, kDeepseekMoeNames, deepseek_checkpoint,  // (a deepseek2 file with sigmoid gating: V3)
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
