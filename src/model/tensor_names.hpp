// HF's tensor names, the one place they are spelled. The checkpoint's expected tensors
// (model/model_dir.cpp), the weights the forward pass takes (model/model.cpp) and a GGUF file's
// names mapped onto HF's (model/gguf_model.cpp) all go through these; the architectures differ
// only in which parts they have (architectures/: biases, q/k norms, Phi-3's fused parts).
#pragma once
#include <string>

namespace pert::tensor_names {

inline constexpr const char* kEmbed = "model.embed_tokens.weight";
inline constexpr const char* kFinalNorm = "model.norm.weight";
inline constexpr const char* kLmHead = "lm_head.weight";

// The parts of layer N, named "model.layers.N.<part>.weight" (or ".bias").
// Gemma's FfnNorm ("post_attention_layernorm") normalises the attention's output; its MLP's
// input norm is PreFfnNorm, its output's PostFfnNorm (ModelConfig::sandwich_norms).
enum class Part { AttnNorm, Q, K, V, QKV, QNorm, KNorm, O, FfnNorm, PreFfnNorm, PostFfnNorm, Gate, Up, GateUp, Down };

inline const char* part_name(Part p) {
  switch (p) {
    case Part::AttnNorm: return "input_layernorm";
    case Part::Q: return "self_attn.q_proj";
    case Part::K: return "self_attn.k_proj";
    case Part::V: return "self_attn.v_proj";
    case Part::QKV: return "self_attn.qkv_proj";  // Phi-3: q, k, v stacked by rows
    case Part::QNorm: return "self_attn.q_norm";
    case Part::KNorm: return "self_attn.k_norm";
    case Part::O: return "self_attn.o_proj";
    case Part::FfnNorm: return "post_attention_layernorm";
    case Part::PreFfnNorm: return "pre_feedforward_layernorm";
    case Part::PostFfnNorm: return "post_feedforward_layernorm";
    case Part::Gate: return "mlp.gate_proj";
    case Part::Up: return "mlp.up_proj";
    case Part::GateUp: return "mlp.gate_up_proj";  // Phi-3: gate, then up
    case Part::Down: return "mlp.down_proj";
  }
  return "?";
}

// gpt-oss's learned sink logits of layer N: [n_heads], a parameter without ".weight".
inline std::string sink_logits_tensor(int layer) { return "model.layers." + std::to_string(layer) + ".self_attn.sinks"; }

inline std::string layer_prefix(const std::string& layer) { return "model.layers." + layer + "."; }
inline std::string layer_tensor(int layer, Part part, const char* kind = "weight") {
  return layer_prefix(std::to_string(layer)) + part_name(part) + "." + kind;
}

}  // namespace pert::tensor_names
