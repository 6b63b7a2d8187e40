// Gemma2ForCausalLM (HF models/gemma2): GeGLU (tanh GELU), RMSNorm gains 1 + w, a norm on each
// branch's output (post_attention_layernorm, pre_/post_feedforward_layernorm), embeddings × √hidden,
// q·k × query_pre_attn_scalar^−½, scores and logits soft-capped (50, 30), a window on even layers.
#include "model/architectures/architecture.hpp"

namespace pert {

namespace {
std::vector<bool> gemma2_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers&) {
  return gemma_block(f, mc, window, false, 2);
}
void gemma2_from_gguf(const GgufFile& f, const std::string& prefix, json& c) { gguf_gemma_keys(f, prefix, c, false); }
}  // namespace

const ArchitectureSpec kGemma2Architecture = {
    "Gemma2ForCausalLM", "gemma2", "gemma2", PERT_GEMMA_CONFIG_KEYS, "hidden_act",  // the MLP reads hidden_activation
    false, false, gemma2_parse, gemma2_from_gguf, false, {std::begin(kGemmaGgufParts), std::end(kGemmaGgufParts)},
};

}  // namespace pert
