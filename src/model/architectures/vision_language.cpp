// What the vision-language architectures share (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3-VL-MoE,
// Gemma 3): pert runs their language model. Its config keys may sit under text_config
// (transformers v5, Qwen3-VL, Gemma 3) or at the top level (v4's Qwen2-VL); its tensors under the
// names of its family's layouts (VisionLanguageLayout); the vision tower's tensors are left out.
// M-RoPE is checked here against the HF class's own rule.
#include <algorithm>
#include <map>

#include "model/architectures/architecture.hpp"
#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/json_util.hpp"
#include "pert/safetensors.hpp"

namespace pert {

// (constant-initialized: the specs built from it at start-up read it)
const VisionLanguageLayout kQwenVisionLanguage = {
    "visual. model.visual.", {"model.language_model.=model.", "model.layers.=model.layers."}, nullptr};

namespace {
// A string prefix test.
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The space-separated words of `list`.
std::vector<std::string> words(const char* list) {
  std::vector<std::string> out;
  for (const char* p = list; p && *p;) {
    const char* end = p;
    while (*end && *end != ' ') ++end;
    if (end > p) out.emplace_back(p, size_t(end - p));
    p = *end ? end + 1 : end;
  }
  return out;
}

struct PrefixRename {
  std::string stored, pert;
  int layout;  // its index in VisionLanguageLayout::language_model
};

// The layout's renames, longest stored prefix first (model.language_model. before model.).
std::vector<PrefixRename> renames(const VisionLanguageLayout& layout) {
  std::vector<PrefixRename> out;
  for (int i = 0; i < 3 && layout.language_model[i]; ++i)
    for (const std::string& rule : words(layout.language_model[i])) {
      const size_t eq = rule.find('=');
      out.push_back({rule.substr(0, eq), rule.substr(eq + 1), i});
    }
  std::stable_sort(out.begin(), out.end(), [](const PrefixRename& a, const PrefixRename& b) { return a.stored.size() > b.stored.size(); });
  return out;
}

// "model.language_model.* or model.layers.*": the layouts' first prefixes.
std::string layout_names(const VisionLanguageLayout& layout) {
  std::string s;
  for (int i = 0; i < 3 && layout.language_model[i]; ++i) {
    const std::string first = words(layout.language_model[i]).at(0);
    s += (s.empty() ? "" : " or ") + first.substr(0, first.find('=')) + "*";
  }
  return s;
}

const ArchitectureSpec* spec_of(const nlohmann::json& config) {
  using nlohmann::json;
  const json a = config.value("architectures", json());
  return find_architecture(a.is_array() && a.size() == 1 && a[0].is_string() ? a[0].get<std::string>() : "",
                           config.value("model_type", json()).is_string() ? config["model_type"].get<std::string>() : "");
}

// The checkpoint's tensors under pert's names (the vision tower's left out and counted in
// `skipped`, or kept as stored with keep_vision).
Checkpoint rename_language_model(Checkpoint all, const ArchitectureSpec& spec, int& skipped, bool keep_vision) {
  const VisionLanguageLayout& layout = *spec.language_model;
  const std::vector<std::string> vision = words(layout.vision);
  const std::vector<PrefixRename> rules = renames(layout);
  std::vector<TensorView> views;
  const TensorView* first_of[3] = {nullptr, nullptr, nullptr};  // a stored tensor of each layout found
  std::map<std::string, const TensorView*> named;               // pert's name: the stored tensor
  skipped = 0;
  for (const auto& [name, t] : all.tensors()) {
    const std::string& tensor = name;  // (a structured binding is not captured before C++20)
    if (std::any_of(vision.begin(), vision.end(), [&](const std::string& p) { return starts_with(tensor, p); })) {
      ++skipped;
      if (keep_vision) views.push_back(*t);
      continue;
    }
    TensorView v = *t;
    for (const PrefixRename& r : rules)
      if (starts_with(name, r.stored)) {
        v.name = r.pert + name.substr(r.stored.size());
        if (!first_of[r.layout]) first_of[r.layout] = t;
        break;
      }
    if (const auto [at, fresh] = named.emplace(v.name, t); !fresh)
      throw ConfigError(all.source() + ": tensors '" + at->second->name + "' and '" + name + "' are both " + spec.hf_name +
                        "'s '" + v.name + "': one language model, please");
    views.push_back(std::move(v));
  }
  const int found = int(std::count_if(std::begin(first_of), std::end(first_of), [](const TensorView* t) { return t; }));
  if (found == 0)
    throw ConfigError(all.source() + ": no language model tensors (" + layout_names(layout) + "): pert runs " + spec.hf_name +
                      "'s language model, and this checkpoint holds " + std::to_string(skipped) + " vision tensors and " +
                      std::to_string(views.size() - (keep_vision ? size_t(skipped) : 0)) + " others");
  if (found > 1) {
    std::string both;
    for (const TensorView* t : first_of)
      if (t) both += (both.empty() ? "'" : "' and '") + t->name;
    throw ConfigError(all.source() + ": holds both " + both + "', two namings of " + spec.hf_name +
                      "'s language model (" + layout_names(layout) + "): one language model, please");
  }
  return checkpoint_views(std::move(all), std::move(views));
}
}  // namespace

ArchitectureSpec vision_language(ArchitectureSpec spec, const VisionLanguageLayout& layout) {
  spec.vision_tensors = layout.vision;
  spec.language_model = &layout;
  return spec;
}

nlohmann::json language_model_config(const nlohmann::json& config, const std::string& source) {
  using nlohmann::json;
  if (!config.is_object()) return config;
  const ArchitectureSpec* spec = spec_of(config);
  const bool has_text = config.contains("text_config") && !config["text_config"].is_null();
  if (!spec || !spec->language_model) return config;  // (another's text_config stays an ignored key)
  json out = config;
  if (has_text) {
    const json& text = config["text_config"];
    if (!text.is_object()) throw ConfigError(source + ": text_config must be an object, got " + json_brief(text));
    // The top level's keys win (v4 writes them there, an override sets them there); text_config's
    // own model_type ("qwen3_vl_text") names the sub-config, not the model.
    out.erase("text_config");
    for (const auto& [key, value] : text.items())
      if (key != "model_type" && key != "architectures" && (!out.contains(key) || out[key].is_null())) out[key] = value;
  }
  // What the HF text config class fills in where the published text_config is sparse (Gemma 3's)
  if (const char* text_defaults = spec->language_model->text_defaults) {
    const json defaults = parse_json(text_defaults, std::string(spec->hf_name) + "'s text defaults");
    for (const auto& [key, value] : defaults.items())
      if (!out.contains(key)) out[key] = value;
  }
  return out;
}

Checkpoint language_model_checkpoint(Checkpoint all, const ArchitectureSpec& spec, int& skipped) {
  return rename_language_model(std::move(all), spec, skipped, false);
}

Checkpoint language_model_named(Checkpoint all, const ArchitectureSpec& spec) {
  int vision = 0;
  return rename_language_model(std::move(all), spec, vision, true);
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
