// What the vision-language architectures share (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): pert runs
// their language model. Its config keys may sit under text_config (transformers v5, Qwen3-VL) or
// at the top level (v4's Qwen2-VL); its tensors under model.language_model. (v5) or model. (v4);
// the vision tower's tensors are left out. M-RoPE is checked here against the HF class's own rule.
#include <algorithm>

#include "architecture.hpp"
#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/json_util.hpp"
#include "pert/safetensors.hpp"

namespace pert {

namespace {
// A string prefix test.
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The vision prefixes of a spec, split.
std::vector<std::string> vision_prefixes(const ArchitectureSpec& spec) {
  std::vector<std::string> out;
  for (const char* p = spec.vision_tensors; p && *p;) {
    const char* end = p;
    while (*end && *end != ' ') ++end;
    if (end > p) out.emplace_back(p, size_t(end - p));
    p = *end ? end + 1 : end;
  }
  return out;
}

const char kLanguageModel[] = "model.language_model.";
}  // namespace

ArchitectureSpec vision_language(ArchitectureSpec spec) {
  spec.vision_tensors = "visual. model.visual.";  // v4's and v5's names of the vision tower
  return spec;
}

nlohmann::json language_model_config(const nlohmann::json& config, const std::string& source) {
  using nlohmann::json;
  if (!config.is_object() || !config.contains("text_config") || config["text_config"].is_null()) return config;
  const json a = config.value("architectures", json());
  const ArchitectureSpec* spec = find_architecture(a.is_array() && a.size() == 1 && a[0].is_string() ? a[0].get<std::string>() : "",
                                                   config.value("model_type", json()).is_string() ? config["model_type"].get<std::string>() : "");
  if (!spec || !spec->vision_tensors) return config;  // (another's text_config stays an ignored key)
  const json& text = config["text_config"];
  if (!text.is_object()) throw ConfigError(source + ": text_config must be an object, got " + json_brief(text));
  // The top level's keys win (v4 writes them there, an override sets them there); text_config's
  // own model_type ("qwen3_vl_text") names the sub-config, not the model.
  json out = config;
  out.erase("text_config");
  for (const auto& [key, value] : text.items())
    if (key != "model_type" && key != "architectures" && (!out.contains(key) || out[key].is_null())) out[key] = value;
  return out;
}

Checkpoint language_model_checkpoint(Checkpoint all, const ArchitectureSpec& spec, int& skipped) {
  const std::vector<std::string> vision = vision_prefixes(spec);
  std::vector<TensorView> views;
  bool nested = false, plain = false;  // model.language_model.* (v5) or model.layers.* (v4)
  skipped = 0;
  for (const auto& [name, t] : all.tensors()) {
    const std::string& tensor = name;  // (a structured binding is not captured before C++20)
    if (std::any_of(vision.begin(), vision.end(), [&](const std::string& p) { return starts_with(tensor, p); })) {
      ++skipped;
      continue;
    }
    TensorView v = *t;
    if (starts_with(name, kLanguageModel)) v.name = "model." + name.substr(sizeof(kLanguageModel) - 1), nested = true;
    else plain = plain || starts_with(name, "model.layers.");
    views.push_back(std::move(v));
  }
  if (!nested && !plain)
    throw ConfigError(all.source() + ": no language model tensors (" + kLanguageModel + "layers.* or model.layers.*): pert runs " +
                      spec.hf_name + "'s language model, and this checkpoint holds " + std::to_string(skipped) +
                      " vision tensors and " + std::to_string(views.size()) + " others");
  if (nested && plain)
    throw ConfigError(all.source() + ": holds both " + kLanguageModel + "layers.* and model.layers.*: one language model, please");
  return checkpoint_views(std::move(all), std::move(views));
}

void check_mrope(Fields& f, bool interleaved) {
  const char* key = f.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const nlohmann::json* rope = f.get(key);
  const bool has_section = rope && rope->is_object() && rope->contains("mrope_section") && !(*rope)["mrope_section"].is_null();
  if (!interleaved && !has_section)
    f.fail(key, "has no mrope_section, which this architecture's attention reads (e.g. {\"type\": \"mrope\", \"mrope_section\": [16, 24, 24]})");
  // HF's class fixes the layout whatever the key says: a key saying otherwise is refused.
  if (rope && rope->is_object() && rope->contains("mrope_interleaved") && (*rope)["mrope_interleaved"] != interleaved)
    f.fail(std::string(key) + ".mrope_interleaved", "is " + (*rope)["mrope_interleaved"].dump() + ", but this architecture's M-RoPE is " +
                                                       (interleaved ? "interleaved (Qwen3-VL)" : "contiguous (Qwen2-VL)"));
}

// llama.cpp writes the HF config's mrope_section padded to four with 0 (ggml's fourth section
// turns image positions' extra axis); for text only, [t, h, w] and a fourth of 0. Qwen3-VL's
// DeepStack adds vision features to the first n_deepstack_layers layers' inputs at image tokens:
// with text alone there are none, so the key changes nothing here (read and checked only).
void gguf_mrope(const GgufFile& f, const std::string& a, nlohmann::json& c) {
  const std::string key = a + "rope.dimension_sections";
  const GgufValue& v = f.require(key);
  if (!v.is_array() || !v.is_integer() || v.count < 3 || v.count > 4)
    throw FormatError(f.path() + ": key '" + key + "' is " + v.type_name() + " of " + std::to_string(v.count) +
                      ", expected 4 integers (M-RoPE's t, h, w sections and 0)");
  nlohmann::json sections = nlohmann::json::array();
  for (uint64_t i = 0; i < v.count; ++i) {
    const int64_t n = v.int_at(i);
    if (n < 0 || n > 65536 || (i == 3 && n != 0))
      throw FormatError(f.path() + ": key '" + key + "' holds " + std::to_string(n) + " at " + std::to_string(i) +
                        (i == 3 ? ", expected 0 (pert's M-RoPE has the three axes t, h, w)" : ", expected a count of rotary pairs"));
    if (i < 3) sections.push_back(n);
  }
  const int64_t pairs = f.opt_int(a + "rope.dimension_count").value_or(c["head_dim"].get<int64_t>()) / 2;
  if (sections[0].get<int64_t>() + sections[1].get<int64_t>() + sections[2].get<int64_t>() != pairs)
    throw FormatError(f.path() + ": key '" + key + "' is " + sections.dump() + ", which does not sum to the " + std::to_string(pairs) +
                      " rotary pairs (rope.dimension_count / 2)");
  c["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", sections}};
  const int layers = c["num_hidden_layers"];
  if (const GgufValue* deep = f.find(a + "n_deepstack_layers");
      deep && (deep->is_array() || !deep->is_integer() || deep->int_at(0) < 0 || deep->int_at(0) > layers))
    throw FormatError(f.path() + ": key '" + a + "n_deepstack_layers' is " + deep->type_name() + " " +
                      (deep->is_number() && !deep->is_array() ? std::to_string(deep->int_at(0)) : std::string()) +
                      ", expected a layer count from 0 to " + std::to_string(layers));
}

}  // namespace pert
