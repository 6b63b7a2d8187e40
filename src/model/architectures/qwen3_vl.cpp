// Qwen3VLForConditionalGeneration (HF models/qwen3_vl): its language model (text_config,
// tensors under model.language_model.) is Qwen3's block (q/k norms; attention_bias) with M-RoPE
// interleaved t, h, w, ... (apply_interleaved_mrope; mrope_section [24, 20, 20] by default) and
// rope_theta 5e5 by default. With text alone DeepStack adds nothing: the vision tower's tensors
// (model.visual.*) are skipped. GGUF `qwen3vl` (text model files, no mmproj): Qwen3's keys and
// tensors with M-RoPE's rope.dimension_sections; n_deepstack_layers, unused by text, is checked.
#include "architecture.hpp"

namespace pert {

namespace {
std::vector<bool> qwen3_vl_parse(Fields& f, ModelConfig& mc, int&, ArchitectureLayers& layers) {
  mc.qk_norm = true;
  check_mrope(f, true);
  layers.rope_defaults = {{"base", 5e5}, {"mrope_section", {24, 20, 20}}, {"mrope_interleaved", true}};
  return std::vector<bool>(size_t(mc.n_layers), false);  // (Qwen3VLTextConfig has no window)
}
void qwen3_vl_from_gguf(const GgufFile& f, const std::string& a, json& c) {
  gguf_biases(f, c, true, false);
  gguf_mrope(f, a, c);
  // (attention.sliding_window, if a file has it, is not read: neither Qwen3VLTextConfig nor
  // llama.cpp's qwen3vl windows any layer)
}
}  // namespace

const ArchitectureSpec kQwen3VlArchitecture = vision_language(
    {"Qwen3VLForConditionalGeneration", "qwen3_vl", "qwen3vl", "rms_norm_eps hidden_act", "", /*attention_bias=*/true, false,
     qwen3_vl_parse, qwen3_vl_from_gguf});

}  // namespace pert
