// OlmoeForCausalLM (HF models/olmoe; OLMoE-1B-7B): q_norm and k_norm RMS-normalise the whole q and
// k projections (not each head), then q, k and v are clamped to ±clip_qkv when it is set; every
// layer a mixture of num_experts SwiGLU experts of width intermediate_size, num_experts_per_tok
// per token (softmax over all, the largest kept, renormalised iff norm_topk_prob). GGUF `olmoe`.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
std::vector<bool> olmoe_parse(Fields& f, ModelConfig& mc, int&, ArchitectureLayers&) {
  mc.qk_norm = mc.qk_norm_whole = true;
  mc.clip_qkv = f.has("clip_qkv") ? f.number("clip_qkv", {}, [](double x) { return x > 0; }, "must be > 0 (or null: none)") : 0.0;
  read_experts(f, mc, "num_experts", 64, 8);
  mc.moe.expert_ffn = mc.intermediate_size;
  mc.moe.renormalize = f.boolean("norm_topk_prob", false);
  return std::vector<bool>(size_t(mc.n_layers), false);
}
void olmoe_from_gguf(const GgufFile& f, const std::string& a, json& c) {
  gguf_experts(f, a, c, "num_experts", "norm_topk_prob", false, false);
  if (f.find(a + "attention.clamp_kqv")) c["clip_qkv"] = gguf_positive_number(f, a + "attention.clamp_kqv", 0);
  gguf_biases(f, c, true, false);
}
}  // namespace

const ArchitectureSpec kOlmoeArchitecture = {
    "OlmoeForCausalLM", "olmoe", "olmoe", "rms_norm_eps hidden_act num_experts num_experts_per_tok norm_topk_prob clip_qkv", "",
    /*attention_bias=*/true, false, olmoe_parse, olmoe_from_gguf, false, {}, {}, fused_experts_checkpoint,
};

}  // namespace pert
