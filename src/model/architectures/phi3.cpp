// Phi3ForCausalLM (HF models/phi3): fused qkv_proj and gate_up_proj (gate first), split into
// llama's parts at load; sliding_window on every layer; its longrope and partial_rotary_factor go
// through the rope block. GGUF `phi3`: ffn_up holds gate, then up.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
std::vector<bool> phi3_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers) {
  mc.fused_projections = true;
  return every_layer_windowed(f, mc, window, layers);
}
void phi3_from_gguf(const GgufFile& f, const std::string& prefix, json& c) { gguf_window(f, prefix, c); }
}  // namespace

const ArchitectureSpec kPhi3Architecture = {
    "Phi3ForCausalLM", "phi3", "phi3", "rms_norm_eps hidden_act sliding_window layer_types", "",
    false, false, phi3_parse, phi3_from_gguf, false, {{"ffn_up", tensor_names::Part::GateUp}},
};

}  // namespace pert
