// MixtralForCausalLM (HF models/mixtral): Mistral's attention (sliding_window on every layer when
// set) and in every layer a mixture of num_local_experts SwiGLU experts of width
// intermediate_size, num_experts_per_tok per token: softmax over all experts' router logits, the
// largest kept and always renormalised. Tensors under block_sparse_moe (gate: the router; experts
// w1 gate, w3 up, w2 down; transformers v5 fused: fused_experts_checkpoint). llama.cpp writes it as
// GGUF `llama` with expert_count (llama.cpp).
#include "model/architectures/architecture.hpp"

namespace pert {

namespace {
std::vector<bool> mixtral_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers) {
  read_experts(f, mc, "num_local_experts", 8, 2);
  mc.moe.expert_ffn = mc.intermediate_size;
  mc.moe.renormalize = true;
  return every_layer_windowed(f, mc, window, layers);
}
}  // namespace

const ArchitectureSpec kMixtralArchitecture = {
    "MixtralForCausalLM", "mixtral", "",
    "rms_norm_eps hidden_act sliding_window layer_types num_local_experts num_experts_per_tok", "",
    false, false, mixtral_parse, nullptr, false, {}, {"block_sparse_moe.gate", "block_sparse_moe.experts", "w1", "w3", "w2"},
    fused_experts_checkpoint,  // (transformers v5's mlp.experts.gate_up_proj, mlp.gate)
};

}  // namespace pert
