// Gemma3ForCausalLM (HF models/gemma3, the text model): Gemma 2's block with (1 + w) RMSNorm of q
// and k heads before RoPE, no caps by default, a window on all but every sliding_window_pattern-th
// layer (6), those local layers with RoPE base rope_local_base_freq, unscaled.
#include "architecture.hpp"
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
}  // namespace

const ArchitectureSpec kGemma3Architecture = {
    "Gemma3ForCausalLM", "gemma3_text", "gemma3", PERT_GEMMA_CONFIG_KEYS " sliding_window_pattern rope_local_base_freq", "hidden_act",
    false, false, gemma3_parse, gemma3_from_gguf, false, {std::begin(kGemmaGgufParts), std::end(kGemmaGgufParts)},
};

}  // namespace pert
