// LlamaForCausalLM (HF models/llama): the block every other architecture extends. attention_bias
// gives q/k/v and o biases, mlp_bias gate/up/down biases. GGUF `llama` also holds Mistral (a
// window) and other LlamaModel conversions; its q/k rows were permuted by the converter.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
void llama_from_gguf(const GgufFile& f, const std::string& prefix, json& c) {
  if (f.find(prefix + "expert_count")) {  // llama.cpp writes Mixtral as llama with experts
    c["architectures"] = {"MixtralForCausalLM"};
    gguf_experts(f, prefix, c, "num_local_experts", nullptr, true, false);
    if (const GgufValue* v = f.find(prefix + "expert_weights_norm"); v && v->int_at(0) == 0)
      throw FormatError(f.path() + ": key '" + prefix + "expert_weights_norm' is false; Mixtral always renormalises its experts' weights");
    gguf_window(f, prefix, c);
    return;
  }
  if (gguf_window(f, prefix, c)) c["architectures"] = {"MistralForCausalLM"};  // llama's window is Mistral's
  gguf_biases(f, c, true, true);
}
}  // namespace

const ArchitectureSpec kLlamaArchitecture = {
    "LlamaForCausalLM", "llama", "llama", "rms_norm_eps hidden_act", "",
    /*attention_bias=*/true, /*mlp_bias=*/true, nullptr, llama_from_gguf, /*gguf_permuted_qk=*/true,
};

}  // namespace pert
