// Qwen3VLForConditionalGeneration (HF models/qwen3_vl): its language model (text_config,
// tensors under model.language_model.) is Qwen3's block (q/k norms; attention_bias) with M-RoPE
// interleaved t, h, w, ... (apply_interleaved_mrope; mrope_section [24, 20, 20] by default) and
// rope_theta 5e5 by default. With text alone DeepStack adds nothing: the vision tower's tensors
// (model.visual.*) are skipped. GGUF `qwen3vl` (text model files, no mmproj): Qwen3's keys and
// tensors with M-RoPE's rope.dimension_sections; n_deepstack_layers, unused by text, is checked.
//
// Qwen3VLMoeForConditionalGeneration (HF models/qwen3_vl_moe; Qwen3-VL-30B-A3B, -235B-A22B): its
// language model (text_config, tensors under model.language_model.) is Qwen3-VL's attention (q/k
// norms, M-RoPE interleaved t, h, w, ..., mrope_section [24, 20, 20] and rope_theta 5e6 by
// default) with Qwen3-MoE's sparse layers (num_experts 60, num_experts_per_tok 4,
// moe_intermediate_size 1408 by default; mlp_only_layers, decoder_sparse_step). The router always
// renormalises its top k (the HF class ignores norm_topk_prob: false is refused). The experts are
// published fused and input-first (mlp.experts.gate_up_proj [E][d][2·ff], down_proj [E][ff][d]),
// read as per-expert matrices (input_first_experts_checkpoint); v5's in-memory layout and
// per-expert tensors are read too. The vision tower (model.visual.*) is skipped; text alone
// leaves DeepStack unused. No GGUF here (llama.cpp's qwen3vlmoe is not read).
#include "model/architectures/architecture.hpp"

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

namespace {
std::vector<bool> qwen3_vl_moe_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers) {
  mc.qk_norm = true;
  check_mrope(f, true);
  layers.rope_defaults = {{"base", 5e6}, {"mrope_section", {24, 20, 20}}, {"mrope_interleaved", true}};
  if (!f.boolean("norm_topk_prob", true))
    f.fail("norm_topk_prob", "is false, but Qwen3VLMoeForConditionalGeneration's router renormalises its top k whatever it says");
  std::vector<bool> windowed = qwen_moe(f, mc, window, 60, 4, 1408);
  mc.moe.renormalize = true;
  return windowed;
}

// model_dir runs this hook before it leaves the vision tower out: the language model's names
// first (the vision tensors kept for it), then the experts split.
Checkpoint qwen3_vl_moe_checkpoint(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes) {
  return input_first_experts_checkpoint(language_model_named(std::move(stored), kQwen3VlMoeArchitecture), c, notes);
}
}  // namespace

const ArchitectureSpec kQwen3VlMoeArchitecture = vision_language(
    {"Qwen3VLMoeForConditionalGeneration", "qwen3_vl_moe", "",
     "rms_norm_eps hidden_act num_experts num_experts_per_tok moe_intermediate_size norm_topk_prob decoder_sparse_step "
     "mlp_only_layers",
     "", /*attention_bias=*/true, false, qwen3_vl_moe_parse, nullptr, false, {}, {}, qwen3_vl_moe_checkpoint});

}  // namespace pert
