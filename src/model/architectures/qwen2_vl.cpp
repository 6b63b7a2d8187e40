// Qwen2VLForConditionalGeneration and Qwen2_5_VLForConditionalGeneration (HF models/qwen2_vl,
// qwen2_5_vl): their language model is Qwen2's block (q/k/v biases, Qwen's windows) with M-RoPE
// in contiguous sections (rope_scaling {"type": "mrope", "mrope_section": [t, h, w]}), rope_theta
// 1e6 by default. The vision tower's tensors (visual.*, model.visual.* in v5) are skipped.
// GGUF `qwen2vl` (both; text model files, no mmproj): Qwen2's keys and tensors with M-RoPE's
// rope.dimension_sections.
#include "model/architectures/architecture.hpp"

namespace pert {

namespace {
std::vector<bool> qwen2_vl_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers) {
  mc.qkv_bias = true;
  check_mrope(f, false);
  layers.rope_defaults = {{"base", 1e6}};  // Qwen2VLTextConfig's rope_theta
  return qwen_windows(f, mc, window);
}
void qwen2_vl_from_gguf(const GgufFile& f, const std::string& a, json& c) {
  qwen_from_gguf(f, a, c);
  gguf_mrope(f, a, c);
}
#define PERT_QWEN2_VL_KEYS "rms_norm_eps hidden_act sliding_window use_sliding_window max_window_layers layer_types"
}  // namespace

const ArchitectureSpec kQwen2VlArchitecture = vision_language(
    {"Qwen2VLForConditionalGeneration", "qwen2_vl", "qwen2vl", PERT_QWEN2_VL_KEYS, "", false, false, qwen2_vl_parse, qwen2_vl_from_gguf});

const ArchitectureSpec kQwen25VlArchitecture = vision_language(
    {"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", "", PERT_QWEN2_VL_KEYS, "", false, false, qwen2_vl_parse,
     qwen2_vl_from_gguf});  // (llama.cpp writes it as qwen2vl too: read as Qwen2-VL, the same language model)

}  // namespace pert
