// MistralForCausalLM (HF models/mistral): Llama's block with sliding_window on every layer.
// llama.cpp writes it as GGUF `llama` with attention.sliding_window (llama.cpp).
#include "model/architectures/architecture.hpp"

namespace pert {

const ArchitectureSpec kMistralArchitecture = {
    "MistralForCausalLM", "mistral", "", "rms_norm_eps hidden_act sliding_window layer_types", "",
    false, false, every_layer_windowed,
};

}  // namespace pert
