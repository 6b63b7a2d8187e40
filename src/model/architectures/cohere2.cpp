// Cohere2ForCausalLM (HF models/cohere2): LayerNorm (weight only) for every norm, attention and
// MLP side by side on one norm's output, logits × logit_scale, head_dim = hidden / heads; a window
// on all but every sliding_window_pattern-th layer (4), RoPE (interleaved) only in those local
// layers: the global ones have no positions.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {
std::vector<bool> cohere2_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers) {
  mc.layer_norm = true;
  mc.parallel_block = true;
  mc.rms_norm_eps = f.number("layer_norm_eps", 1e-5, [](double x) { return x > 0; }, "must be > 0");
  mc.logit_scale = f.number("logit_scale", 0.0625, [](double x) { return x > 0; }, "must be > 0");
  if (mc.hidden_size % mc.n_heads)
    f.fail("num_attention_heads", "(" + std::to_string(mc.n_heads) + ") must divide hidden_size (" +
                                      std::to_string(mc.hidden_size) + "): Cohere2's head_dim is their quotient");
  f.get("head_dim");  // HF sets head_dim = hidden_size / num_attention_heads whatever the config says
  mc.head_dim = mc.hidden_size / mc.n_heads;
  if (!f.has("tie_word_embeddings")) mc.tie_word_embeddings = true;
  layers.key = "sliding_window_pattern";
  layers.positions.assign(size_t(mc.n_layers), json());
  layers.global_position = {{"type", "none"}};
  layers.rope_defaults = {{"layout", "interleaved"}};
  window = f.positive("sliding_window", kMaxCount, 4096);
  return windowed_but_every(mc.n_layers, f.positive("sliding_window_pattern", kMaxLayers, 4));
}

void cohere2_from_gguf(const GgufFile& f, const std::string& a, json& c) {  // LayerNorm's eps; the logits' scale
  c["layer_norm_eps"] = (f.require(a + "attention.layer_norm_epsilon"), gguf_positive_number(f, a + "attention.layer_norm_epsilon", 0));
  c["logit_scale"] = (f.require(a + "logit_scale"), gguf_positive_number(f, a + "logit_scale", 0));
  c.erase("head_dim");  // HF's Cohere2 takes hidden / heads
  gguf_window_pattern(f, a, 4, c);
  gguf_window(f, a, c);
}
}  // namespace

const ArchitectureSpec kCohere2Architecture = {
    "Cohere2ForCausalLM", "cohere2", "cohere2",
    "hidden_act layer_norm_eps logit_scale sliding_window sliding_window_pattern layer_types", "rms_norm_eps",
    false, false, cohere2_parse, cohere2_from_gguf,
};

}  // namespace pert
