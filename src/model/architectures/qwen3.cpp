// Qwen3ForCausalLM (HF models/qwen3): Qwen2's windows; RMSNorm of each query and key head before
// RoPE (q_norm, k_norm over head_dim); attention_bias as Llama's, no q/k/v biases otherwise.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
std::vector<bool> qwen3_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers&) {
  mc.qk_norm = true;
  return qwen_windows(f, mc, window);
}
void qwen3_from_gguf(const GgufFile& f, const std::string& prefix, json& c) {
  qwen_from_gguf(f, prefix, c);
  gguf_biases(f, c, true, false);
}
}  // namespace

const ArchitectureSpec kQwen3Architecture = {
    "Qwen3ForCausalLM", "qwen3", "qwen3",
    "rms_norm_eps hidden_act sliding_window use_sliding_window max_window_layers layer_types", "",
    /*attention_bias=*/true, false, qwen3_parse, qwen3_from_gguf,
};

}  // namespace pert
