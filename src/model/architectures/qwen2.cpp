// Qwen2ForCausalLM (HF models/qwen2): q/k/v biases always; sliding_window only with
// use_sliding_window, and only on layers i >= max_window_layers.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
std::vector<bool> qwen2_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers&) {
  mc.qkv_bias = true;
  return qwen_windows(f, mc, window);
}
}  // namespace

// A GGUF window covers every layer (llama.cpp's reading).
void qwen_from_gguf(const GgufFile& f, const std::string& prefix, json& c) {
  if (gguf_window(f, prefix, c)) c["use_sliding_window"] = true, c["max_window_layers"] = 0;
}

const ArchitectureSpec kQwen2Architecture = {
    "Qwen2ForCausalLM", "qwen2", "qwen2",
    "rms_norm_eps hidden_act sliding_window use_sliding_window max_window_layers layer_types", "",
    false, false, qwen2_parse, qwen_from_gguf,
};

}  // namespace pert
