// Qwen3MoeForCausalLM (HF models/qwen3_moe; Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention
// (RMSNorm of each q and k head) and, in the layers decoder_sparse_step and mlp_only_layers leave
// sparse, num_experts SwiGLU experts of width moe_intermediate_size, num_experts_per_tok per
// token (softmax over all, the largest kept, renormalised iff norm_topk_prob: false in the class,
// true in the published configs). GGUF `qwen3moe`.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
std::vector<bool> qwen3_moe_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers&) {
  mc.qk_norm = true;
  return qwen_moe(f, mc, window, 128, 8, 768);
}
void qwen3_moe_from_gguf(const GgufFile& f, const std::string& a, json& c) {
  gguf_experts(f, a, c, "num_experts", "norm_topk_prob", true, true);
  c["moe_intermediate_size"] = gguf_positive(f, a + "expert_feed_forward_length");
  gguf_biases(f, c, true, false);
}
}  // namespace

const ArchitectureSpec kQwen3MoeArchitecture = {
    "Qwen3MoeForCausalLM", "qwen3_moe", "qwen3moe",
    "rms_norm_eps hidden_act sliding_window use_sliding_window max_window_layers layer_types num_experts "
    "num_experts_per_tok moe_intermediate_size norm_topk_prob decoder_sparse_step mlp_only_layers",
    "", /*attention_bias=*/true, false, qwen3_moe_parse, qwen3_moe_from_gguf, false, {}, {}, fused_experts_checkpoint,
};

}  // namespace pert
