// Qwen2MoeForCausalLM (HF models/qwen2_moe; Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2's attention (q/k/v
// biases) and, in the layers decoder_sparse_step and mlp_only_layers leave sparse, num_experts
// SwiGLU experts of width moe_intermediate_size, num_experts_per_tok per token (softmax over all,
// the largest kept, renormalised iff norm_topk_prob), plus a shared expert of width
// shared_expert_intermediate_size behind σ(x·shared_expert_gate). GGUF `qwen2moe`.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
std::vector<bool> qwen2_moe_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers&) {
  if (!f.boolean("qkv_bias", true)) f.fail("qkv_bias", "is false, but Qwen2-MoE's checkpoints have q/k/v biases");
  mc.qkv_bias = true;
  mc.moe.shared_ffn = f.positive("shared_expert_intermediate_size", kMaxDim, 5632);
  mc.moe.gated_shared = true;
  return qwen_moe(f, mc, window, 60, 4, 1408);
}
void qwen2_moe_from_gguf(const GgufFile& f, const std::string& a, json& c) {
  gguf_experts(f, a, c, "num_experts", "norm_topk_prob", false, true);
  c["moe_intermediate_size"] = gguf_positive(f, a + "expert_feed_forward_length");
  c["shared_expert_intermediate_size"] = gguf_positive(f, a + "expert_shared_feed_forward_length");
}
}  // namespace

const ArchitectureSpec kQwen2MoeArchitecture = {
    "Qwen2MoeForCausalLM", "qwen2_moe", "qwen2moe",
    "rms_norm_eps hidden_act sliding_window use_sliding_window max_window_layers layer_types qkv_bias num_experts "
    "num_experts_per_tok moe_intermediate_size shared_expert_intermediate_size norm_topk_prob decoder_sparse_step "
    "mlp_only_layers",
    "", false, false, qwen2_moe_parse, qwen2_moe_from_gguf, false, {}, {}, fused_experts_checkpoint,
};

}  // namespace pert
