// SmolLM3ForCausalLM (HF models/smollm3): Llama's blocks; no RoPE in the layers where
// no_rope_layers[i] is 0 (by default every no_rope_layer_interval-th: (i + 1) % 4 == 0); a window
// (use_sliding_window) only on those layers. GGUF `smollm3`: llama.cpp's fixed step of 4.
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {

// no_rope_layers: [layer] 1 where the layer rotates, 0 where it has no positions (the name reads
// the other way), or every no_rope_layer_interval-th layer without.
std::vector<bool> smollm3_rope_layers(Fields& f, int n_layers) {
  std::vector<bool> rope(size_t(n_layers), true);
  const json* list = f.get("no_rope_layers");
  if (list && !(list->is_array() && list->empty())) {  // HF: an empty list means derive it
    if (!list->is_array() || list->size() != size_t(n_layers))
      f.fail("no_rope_layers", "must list 1 (RoPE) or 0 (no positions) per layer (" + std::to_string(n_layers) + "), got " + json_brief(*list));
    for (size_t i = 0; i < list->size(); ++i) {
      const json& v = (*list)[i];
      if (v != 0 && v != 1) f.fail("no_rope_layers", "entries must be 1 (RoPE) or 0 (no positions), got " + json_brief(v) + " at " + std::to_string(i));
      rope[i] = v == 1;
    }
    f.get("no_rope_layer_interval");  // read, unused: the list wins (as in HF)
    return rope;
  }
  const int interval = f.positive("no_rope_layer_interval", kMaxLayers, 4);
  for (int i = 0; i < n_layers; ++i) rope[size_t(i)] = (i + 1) % interval != 0;
  return rope;
}

std::vector<bool> smollm3_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers& layers) {
  const std::vector<bool> rope = smollm3_rope_layers(f, mc.n_layers);
  layers.key = "no_rope_layers";
  for (bool r : rope) layers.positions.push_back(r ? json() : json{{"type", "none"}});
  if (!f.boolean("use_sliding_window", false)) window = 0;  // HF: only when asked for, only on the NoPE layers
  std::vector<bool> windowed(size_t(mc.n_layers));
  for (int i = 0; i < mc.n_layers; ++i) windowed[size_t(i)] = window > 0 && !rope[size_t(i)];
  return windowed;
}

void smollm3_from_gguf(const GgufFile& f, const std::string& prefix, json& c) {
  if (f.find(prefix + "attention.sliding_window"))
    throw FormatError(f.path() + ": key '" + prefix + "attention.sliding_window' is set, but GGUF records no use_sliding_window to say "
                      "which layers it covers (HF's SmolLM3: its NoPE layers, when enabled; llama.cpp's: none); pert does not guess");
  gguf_biases(f, c, true, true);
}

}  // namespace

const ArchitectureSpec kSmolLM3Architecture = {
    "SmolLM3ForCausalLM", "smollm3", "smollm3",
    "rms_norm_eps hidden_act sliding_window use_sliding_window no_rope_layers no_rope_layer_interval layer_types",
    "max_window_layers",  // SmolLM3-3B's config.json has it; SmolLM3Config does not read it
    /*attention_bias=*/true, /*mlp_bias=*/true, smollm3_parse, smollm3_from_gguf, /*gguf_permuted_qk=*/true,
};

}  // namespace pert
