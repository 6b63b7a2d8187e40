// Gemma3ForCausalLM (HF models/gemma3, the text model): Gemma 2's block with (1 + w) RMSNorm of q
// and k heads before RoPE, no caps by default, a window on all but every sliding_window_pattern-th
// layer (6), those local layers with RoPE base rope_local_base_freq, unscaled.
// Gemma3ForConditionalGeneration (google/gemma-3-4b/12b/27b, -it and -pt): that language model
// under text_config, which the published configs leave sparse (Gemma3TextConfig's defaults
// below), its tensors under language_model.model. (v4, as published) or model.language_model.
// (transformers >= 4.52, v5); the SigLIP tower and projector skipped. Image tokens are the
// tokenizer's: text alone runs as Gemma3ForCausalLM.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
std::vector<bool> gemma3_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers) {
  const int period = f.positive("sliding_window_pattern", kMaxLayers, 6);
  std::vector<bool> windowed = gemma_block(f, mc, window, true, period);
  mc.qk_norm = true;
  const double local = f.number("rope_local_base_freq", 10000.0, [](double x) { return x > 0; }, "must be > 0");
  layers.key = "rope_local_base_freq";
  layers.positions.assign(size_t(mc.n_layers), json());
  layers.sliding_position = {{"type", "rope"}, {"base", local}};
  layers.rope_defaults = {{"base", 1e6}};  // the global layers' rope_theta (Gemma3TextConfig)
  return windowed;
}
void gemma3_from_gguf(const GgufFile& f, const std::string& prefix, json& c) {
  gguf_gemma_keys(f, prefix, c, true);
  c["rope_local_base_freq"] = 10000.0;  // llama.cpp's, not in the file
  gguf_window_pattern(f, prefix, 6, c);
}

// Gemma3TextConfig's defaults that differ from what pert assumes of a config without them
// (the others, head_dim 256, query_pre_attn_scalar 256, rope_theta 1e6, rope_local_base_freq 1e4,
// sliding_window 4096, every 6th layer global, tied embeddings, are gemma3_parse's already).
const VisionLanguageLayout kGemma3VisionLanguage = {
    "vision_tower. multi_modal_projector. model.vision_tower. model.multi_modal_projector.",
    {"language_model.model.=model. language_model.lm_head.=lm_head.", "model.language_model.=model."},
    R"({"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
        "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 131072,
        "bos_token_id": 2, "eos_token_id": 1})",
};
#define PERT_GEMMA3_KEYS PERT_GEMMA_CONFIG_KEYS " sliding_window_pattern rope_local_base_freq"
}  // namespace

const ArchitectureSpec kGemma3Architecture = {
    "Gemma3ForCausalLM", "gemma3_text", "gemma3", PERT_GEMMA3_KEYS, "hidden_act",
    false, false, gemma3_parse, gemma3_from_gguf, false, {std::begin(kGemmaGgufParts), std::end(kGemmaGgufParts)},
};

// (no GGUF of its own: llama.cpp writes the language model as gemma3, read as Gemma3ForCausalLM)
const ArchitectureSpec kGemma3VlArchitecture = vision_language(
    {"Gemma3ForConditionalGeneration", "gemma3", "", PERT_GEMMA3_KEYS, "hidden_act", false, false, gemma3_parse},
    kGemma3VisionLanguage);

}  // namespace pert
