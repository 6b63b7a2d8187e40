#include "pert/config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "attention/plugins.hpp"
#include "model/architectures/architecture.hpp"
#include "model/config_fields.hpp"
#include "model/mla.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;

namespace {

json position_from_hf(const json& config, const std::string& source, const std::string& scaling_key = "rope_scaling");

// transformers v5 writes rope_theta, partial_rotary_factor and the scaling as one object, `rp`
// (config's rope_parameters, or one layer type's block of it, named `key`): read as the v4 keys.
json position_from_rope_parameters(const json& config, const json& rp, const std::string& source, const std::string& key) {
  if (!rp.is_object() || !rp.contains("rope_type"))
    throw ConfigError(source + ": " + key + " must be an object with a \"rope_type\" (or one such object per layer type), got " + json_brief(rp));
  for (const char* other : {"rope_scaling", "rope_theta"})
    if (config.contains(other) && !config[other].is_null())
      throw ConfigError(source + ": rope_parameters is set together with " + other + "; keep one");
  json v4 = config, scaling = rp;
  v4.erase("rope_parameters");
  for (const char* k : {"rope_theta", "partial_rotary_factor"})
    if (scaling.contains(k)) {
      v4[k] = scaling[k];
      scaling.erase(k);
    }
  v4["rope_scaling"] = scaling;
  return position_from_hf(v4, source, key);
}

// HF configs describe RoPE with rope_theta / rope_scaling / partial_rotary_factor; turn them
// into pert's "position" block so one validator serves both.
json position_from_hf(const json& config, const std::string& source, const std::string& scaling_key) {
  if (config.contains("rope_parameters") && !config["rope_parameters"].is_null())
    return position_from_rope_parameters(config, config["rope_parameters"], source, "rope_parameters");
  json pos = {{"type", "rope"}};
  if (config.contains("rope_theta") && !config["rope_theta"].is_null()) pos["base"] = config["rope_theta"];
  if (config.contains("partial_rotary_factor") && !config["partial_rotary_factor"].is_null())
    pos["partial_rotary_factor"] = config["partial_rotary_factor"];  // resolved below, needs head_dim
  if (!config.contains("rope_scaling") || config["rope_scaling"].is_null()) return pos;
  const json& hf = config["rope_scaling"];
  if (!hf.is_object()) throw ConfigError(source + ": rope_scaling must be an object or null, got " + json_brief(hf));
  json scaling = hf;
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (scaling.contains(key)) {
      if (!scaling[key].is_string())
        throw ConfigError(source + ": rope_scaling." + key + " must be a string, got " + json_brief(scaling[key]));
      if (type.empty()) type = scaling[key].get<std::string>();
      scaling.erase(key);
    }
  // M-RoPE's keys (Qwen2/2.5/3-VL) go beside the scaling: "mrope" is HF's legacy name of default.
  for (const char* key : {"mrope_section", "mrope_interleaved"})
    if (scaling.contains(key)) {
      if (!scaling[key].is_null()) pos[key] = scaling[key];
      scaling.erase(key);
    }
  if (type == "mrope") type = "default";
  if (type.empty())
    throw ConfigError(source + ": rope_scaling has no \"rope_type\" (e.g. `set 'rope_scaling={\"rope_type\":\"yarn\",\"factor\":" +
                      (scaling.contains("factor") ? scaling["factor"].dump() : std::string("4")) + "}'`)");
  if (type == "default") {  // plain RoPE: a factor or any other scaling key beside it would be dropped
    for (const auto& [key, value] : scaling.items())
      if (!value.is_null() && !(key == "factor" && value == 1))  // (a factor of 1 scales nothing)
        throw ConfigError(source + ": " + scaling_key + "." + key + " is set (" + json_brief(value) +
                          "), but rope_type \"default\" reads no other key; remove it, or name the scaling's rope_type");
    return pos;
  }
  if (type == "su") type = "longrope";  // HF's legacy name
  scaling["type"] = type;
  pos["scaling"] = scaling;
  return pos;
}

// transformers v5's RoPE per layer type (Gemma 3's; Gemma 3n and ModernBERT write it too):
// rope_parameters {"full_attention": {...}, "sliding_attention": {...}}, one block per type.
bool rope_per_layer_type(const json& config) {
  if (!config.contains("rope_parameters")) return false;
  const json& rp = config["rope_parameters"];
  if (!rp.is_object() || rp.empty() || rp.contains("rope_type")) return false;
  for (const auto& [_, block] : rp.items())
    if (!block.is_object()) return false;
  return true;
}

// The model's block from rope_per_layer_type's form: the full_attention layers' (a layer is
// sliding_attention when it has a window: layer_types, or the architecture's pattern), and the
// sliding ones' block in `arch` for those layers (SmolLM3-like NoPE layers keep theirs). A type no
// layer has, a type without a block and an unknown rope_type are refused by key.
json position_per_layer_type(const json& config, const std::string& source, const ModelConfig& mc, ArchitectureLayers& arch) {
  static const char* const kTypes[] = {"full_attention", "sliding_attention"};
  static const char* const kRopeTypes[] = {"default", "linear", "dynamic", "yarn", "longrope", "llama3"};
  bool used[2] = {false, false};
  for (const LayerAttention& l : mc.layers) used[l.window > 0] = true;
  json blocks[2];
  for (const auto& [type, block] : config["rope_parameters"].items()) {
    const std::string key = "rope_parameters." + type;
    const int t = type == kTypes[0] ? 0 : type == kTypes[1] ? 1 : -1;
    if (t < 0) throw ConfigError(source + ": " + key + " is not a layer type (full_attention or sliding_attention)");
    const json rope_type = block.value("rope_type", json());
    if (!rope_type.is_string() ||
        std::find(std::begin(kRopeTypes), std::end(kRopeTypes), rope_type.get<std::string>()) == std::end(kRopeTypes))
      throw ConfigError(source + ": " + key + ".rope_type must be one of default, linear, dynamic, yarn, longrope, llama3, got " +
                        json_brief(rope_type));
    if (!used[t])
      throw ConfigError(source + ": " + key + " is given, but no layer is " + type +
                        (t ? " (none has a window: sliding_window, layer_types)" : " (every layer has a window)"));
    blocks[t] = position_from_rope_parameters(config, block, source, key);
  }
  for (int t = 0; t < 2; ++t)
    if (used[t] && blocks[t].is_null())
      throw ConfigError(source + ": rope_parameters has no " + kTypes[t] + " block, but layers are " + kTypes[t] +
                        " (each layer type the layers use needs its block)");
  if (!used[1]) return blocks[0];
  // The sliding block's defaults: the architecture's local RoPE (Gemma 3: rope_local_base_freq).
  const json& local = arch.sliding_position.is_object() && arch.sliding_position.value("type", json()) == "rope"
                          ? arch.sliding_position : arch.rope_defaults;
  for (const auto& [key, value] : local.items())
    if (key != "type" && !blocks[1].contains(key)) blocks[1][key] = value;
  arch.key = "rope_parameters.sliding_attention";
  if (arch.positions.empty()) arch.positions.assign(size_t(mc.n_layers), json());
  for (size_t i = 0; i < mc.layers.size(); ++i) {
    json& slot = arch.positions[i];
    if (mc.layers[i].window > 0 && (slot.is_null() || slot.value("type", json()) == "rope")) slot = blocks[1];
  }
  return used[0] ? blocks[0] : blocks[1];
}

// A "position" block, with an HF rope_scaling beside it read as its scaling: the way an HF
// config rescales RoPE works on pert's own configs too (--set 'rope_scaling={...}'), as long as
// the block is RoPE's and says nothing of scaling itself.
json with_hf_scaling(const json& config, const std::string& source) {
  json position = config["position"];
  if (config.contains("rope_parameters") && !config["rope_parameters"].is_null())
    throw ConfigError(source + ": rope_parameters is set together with \"position\"; keep one");
  if (!config.contains("rope_scaling") || config["rope_scaling"].is_null()) return position;
  const bool rope = position.is_object() && position.value("type", json()) == "rope";
  if (!rope)
    throw ConfigError(source + ": rope_scaling is set but position.type is " +
                      json_brief(position.is_object() ? position.value("type", json()) : position) +
                      ", not \"rope\": only RoPE rescales");
  if (position.contains("scaling") && !position["scaling"].is_null())
    throw ConfigError(source + ": rope_scaling is set together with position.scaling; keep one");
  const json hf = position_from_hf(json{{"rope_scaling", config["rope_scaling"]}}, source);
  if (hf.contains("scaling")) position["scaling"] = hf["scaling"];
  for (const char* key : {"mrope_section", "mrope_interleaved"})  // M-RoPE's, beside the scaling
    if (hf.contains(key) && !position.contains(key)) position[key] = hf[key];
  return position;
}

void parse_position(const json& obj, int trained, const std::string& source, ModelConfig& mc) {
  if (!obj.is_object()) throw ConfigError(source + ": position must be an object, got " + json_brief(obj));
  Fields f(obj, source, "position.");
  const std::string type = f.string("type");
  mc.position.scheme = parse_scheme(type, f, PluginContext{mc, trained});
  f.reject_unknown("position type '" + type + "'");
}

// Qwen2.5-1M's dual_chunk_attention_config (read by vLLM; transformers ignores it) as the
// "extend" block's dca method. vLLM runs it over plain RoPE, ignoring rope_scaling: both set are
// refused, as is MInference's sparse prefill (an approximation; pert computes dense DCA).
json dual_chunk_extend(Fields& f, const json& config, json extend) {
  const json& d = config["dual_chunk_attention_config"];
  if (!d.is_object()) f.fail("dual_chunk_attention_config", "must be an object, got " + json_brief(d));
  if (config.contains("rope_scaling") && !config["rope_scaling"].is_null())
    f.fail("dual_chunk_attention_config", "is set together with rope_scaling, which vLLM ignores under it; set rope_scaling=null");
  json dca = json::object();
  for (const auto& [key, value] : d.items()) {
    if (key == "chunk_size" || key == "local_size" || key == "original_max_position_embeddings") dca[key] = value;
    else if (key == "sparse_attention_enabled" && value == true)
      f.fail("dual_chunk_attention_config", "enables sparse attention (MInference), an approximation pert does not run; pert computes dense DCA");
    else if (key.rfind("sparse_attention", 0) != 0)
      f.fail("dual_chunk_attention_config", "has '" + key + "', which pert does not read (chunk_size, local_size, original_max_position_embeddings)");
  }
  if (extend.is_null()) extend = json::object();
  if (!extend.is_object()) return extend;  // parse_extend names the problem
  if (extend.contains("dca") && !extend["dca"].is_null())
    f.fail("dual_chunk_attention_config", "is set together with extend.dca; keep one");
  extend["dca"] = dca;
  return extend;
}

std::vector<int> token_ids(Fields& f, const json& config, const char* key, int vocab) {
  if (!f.has(key)) return {};
  const json& v = config[key];
  std::vector<int> ids;
  for (const json& id : v.is_array() ? v : json::array({v})) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= vocab)
      f.fail(key, "must be a token id in [0, vocab_size = " + std::to_string(vocab) + "), got " + json_brief(id));
    ids.push_back(id.get<int>());
  }
  return ids;
}

}  // namespace

ModelConfig parse_model_config(const json& given, const std::string& source) {
  if (!given.is_object()) throw ConfigError(source + ": must be a JSON object");
  const json config = language_model_config(given, source);  // a VL model's text_config at the top level
  ModelConfig mc;
  Fields f(config, source, "");
  mc.vocab_size = f.positive("vocab_size", kMaxCount);
  mc.hidden_size = f.positive("hidden_size", kMaxDim);
  mc.intermediate_size = f.positive("intermediate_size", kMaxDim);
  mc.n_layers = f.positive("num_hidden_layers", kMaxLayers);
  mc.n_heads = f.positive("num_attention_heads", kMaxDim);
  mc.n_kv_heads = f.positive("num_key_value_heads", kMaxDim, mc.n_heads);
  if (mc.n_kv_heads > mc.n_heads || mc.n_heads % mc.n_kv_heads)
    f.fail("num_key_value_heads", "(" + std::to_string(mc.n_kv_heads) + ") must divide num_attention_heads (" +
                                      std::to_string(mc.n_heads) + ")");
  if (f.has("head_dim")) {
    mc.head_dim = f.positive("head_dim", kMaxDim);
  } else {
    if (mc.hidden_size % mc.n_heads)
      f.fail("num_attention_heads", "(" + std::to_string(mc.n_heads) + ") must divide hidden_size (" +
                                        std::to_string(mc.hidden_size) + ") when head_dim is not given");
    mc.head_dim = mc.hidden_size / mc.n_heads;
  }
  mc.max_position_embeddings = f.positive("max_position_embeddings", kMaxCount, 2048);  // HF's default
  mc.rms_norm_eps = f.number("rms_norm_eps", 1e-6, [](double x) { return x > 0; }, "must be > 0");
  mc.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  const std::vector<int> bos = token_ids(f, config, "bos_token_id", mc.vocab_size);
  if (bos.size() > 1) f.fail("bos_token_id", "must be a single token id");
  mc.bos_token_id = bos.empty() ? -1 : bos[0];
  mc.eos_token_ids = token_ids(f, config, "eos_token_id", mc.vocab_size);

  // Architecture variants pert does not compute must not load as silent garbage.
  ArchitectureLayers arch_layers = parse_architecture(f, mc);

  const bool has_position = f.has("position");
  // Phi-3 style configs give the pre-extension length at the top level.
  const int trained = f.positive("original_max_position_embeddings", kMaxCount, mc.max_position_embeddings);
  json position = has_position                   ? with_hf_scaling(config, source)
                  : rope_per_layer_type(config) ? position_per_layer_type(config, source, mc, arch_layers)
                                                : position_from_hf(config, source);
  if (!has_position)  // the architecture's own defaults (Gemma 3's base 1e6, Cohere 2's interleaved layout)
    for (const auto& [key, value] : arch_layers.rope_defaults.items())
      if (!position.contains(key)) position[key] = value;
  parse_position(position, trained, source, mc);
  for (LayerAttention& l : mc.layers) l.position = mc.position;
  apply_architecture_layers(arch_layers, source, PluginContext{mc, trained}, mc);
  if (f.has("layers")) parse_layers(config["layers"], source, PluginContext{mc, trained}, mc);
  json extend = f.has("extend") ? config["extend"] : json();
  if (f.has("dual_chunk_attention_config"))  // Qwen2.5-1M's, as vLLM reads it: the "extend" block's dca
    extend = dual_chunk_extend(f, config, std::move(extend));
  if (!extend.is_null()) mc.extend = parse_extend(extend, source, PluginContext{mc, trained});
  if (mc.mla.enabled()) require_mla_rotation(mc, source);
  return mc;
}

std::vector<std::string> ignored_config_keys(const json& given) {
  std::vector<std::string> out;
  if (!given.is_object()) return out;
  json config;
  try {
    config = language_model_config(given, "config");
  } catch (const ConfigError&) {
    config = given;
  }
  const bool has_position = config.contains("position") && !config["position"].is_null();
  for (const auto& [key, _] : config.items())
    if (!architecture_reads(config, key) || (has_position && (key == "rope_theta" || key == "partial_rotary_factor")))
      out.push_back(key);
  return out;
}

bool is_inline_config(const std::string& given) {
  const size_t first = given.find_first_not_of(" \t\n");
  return first != std::string::npos && given[first] == '{';
}

json read_config_patch(const std::filesystem::path& given) {
  const std::string text = given.string();
  const bool inline_json = is_inline_config(text);
  const std::string where = inline_json ? "inline config " + printable(text.substr(0, 60)) : text;
  if (inline_json && text.size() > kMaxJsonBytes) throw FormatError("--config: inline JSON is larger than a config file may be");
  const json patch = inline_json ? parse_json(text, where) : read_json_file(given);
  if (!patch.is_object()) throw ConfigError(where + ": a config override must be a JSON object");
  return patch;
}

namespace {
// HF's RoPE keys that a "position" block supersedes (ignored_config_keys): an override that sets
// one asks for other math, which a model with the block would not do, silently.
constexpr const char* kSupersededKeys[] = {"rope_theta", "partial_rotary_factor"};

// The first key of kSupersededKeys that `patch` sets to a value, or "".
std::string superseded_key_in(const json& patch) {
  for (const char* key : kSupersededKeys)
    if (patch.contains(key) && !patch[key].is_null()) return key;
  return "";
}

// `--set key.path=value` each, in order (value JSON, else a string; null removes the key); the
// last that sets one of kSupersededKeys named in `superseded`.
void apply_sets(json& config, const std::vector<std::string>& sets, std::string& superseded) {
  for (const std::string& set : sets) {
    const auto eq = set.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("`set` '" + set + "': expected key.path=value");
    const std::string path = set.substr(0, eq), text = set.substr(eq + 1);
    std::vector<std::string> keys;
    std::stringstream ss(path);
    for (std::string k; std::getline(ss, k, '.');) {
      if (k.empty()) throw ConfigError("`set` '" + set + "': empty key in '" + path + "'");
      keys.push_back(k);
    }
    if (path.back() == '.') throw ConfigError("`set` '" + set + "': empty key in '" + path + "'");
    if (keys.size() > size_t(kMaxJsonDepth))  // nested objects that deep would recurse in every copy
      throw ConfigError("`set`: a key path of " + std::to_string(keys.size()) + " keys is deeper than " +
                        std::to_string(kMaxJsonDepth) + " levels");
    if (!any_architecture_reads(keys[0]) && !config.contains(keys[0]))
      throw ConfigError("`set` '" + set + "': '" + keys[0] + "' is not a config key pert reads");
    check_json_depth(text, "`set " + path + "`");
    json value;
    try {
      value = json::parse(text);  // numbers, booleans, null, objects, lists ...
    } catch (const json::exception&) {
      value = text;  // ... and anything else is a string: --set position.type=alibi
    }
    if (!config.is_object()) throw ConfigError("`set` '" + set + "': the config is not a JSON object");
    json* node = &config;
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      json& next = (*node)[keys[i]];
      if (next.is_null()) next = json::object();
      if (!next.is_object())
        throw ConfigError("`set` '" + set + "': '" + keys[i] + "' is " + json_brief(next) + ", not an object");
      node = &next;
    }
    if (value.is_null()) node->erase(keys.back());
    else (*node)[keys.back()] = value;
    if (keys.size() == 1 && !value.is_null())
      for (const char* key : kSupersededKeys)
        if (keys[0] == key) superseded = "`set " + path + "`";
  }
}
}  // namespace

json apply_overrides(json config, const ConfigOverrides& overrides) {
  std::string superseded;  // an override setting one of kSupersededKeys, as given
  for (const auto& file : overrides.files) {
    const json patch = read_config_patch(file);
    if (const std::string key = superseded_key_in(patch); !key.empty()) superseded = "`config` " + file.string() + "'s " + key;
    config.merge_patch(patch);
  }
  for (const json& patch : overrides.patches) {
    if (!patch.is_object()) throw ConfigError("config: a config override must be a JSON object, got " + json_brief(patch));
    if (const std::string key = superseded_key_in(patch); !key.empty()) superseded = "`config` " + key;
    config.merge_patch(patch);
  }
  apply_sets(config, overrides.sets, superseded);
  if (!superseded.empty() && config.is_object() && config.contains("position") && !config["position"].is_null())
    throw ConfigError(superseded + ": the model's positions are set by its \"position\" block, which that key would not "
                      "change; set the block's field instead (position.base, position.rotary_dim), or null \"position\"");
  return config;
}

json to_json(const PositionConfig& p) { return p.scheme->to_json(); }

json to_json(const ModelConfig& c) {
  json j = {{"architectures", {c.architecture}},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"intermediate_size", c.intermediate_size},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_kv_heads},
            {"head_dim", c.head_dim},
            {"max_position_embeddings", c.max_position_embeddings},
            {"rms_norm_eps", c.rms_norm_eps},
            {"tie_word_embeddings", c.tie_word_embeddings},
            {"bos_token_id", c.bos_token_id < 0 ? json() : json(c.bos_token_id)},
            {"eos_token_id", c.eos_token_ids},
            {"position", to_json(c.position)}};
  if (c.qkv_bias) j["qkv_bias"] = true;
  if (c.o_bias) j["o_bias"] = true;
  if (c.mlp_bias) j["mlp_bias"] = true;
  if (c.fused_projections) j["fused_projections"] = true;
  if (c.qk_norm) j["qk_norm"] = c.qk_norm_whole ? json("whole") : json(true);
  if (c.clip_qkv > 0) j["clip_qkv"] = c.clip_qkv;
  if (const MlaConfig& a = c.mla; a.enabled())
    j["mla"] = {{"q_lora_rank", a.q_lora_rank}, {"kv_lora_rank", a.kv_lora_rank}, {"qk_nope_head_dim", a.qk_nope_head_dim},
                {"qk_rope_head_dim", a.qk_rope_head_dim}, {"v_head_dim", a.v_head_dim}};
  if (const MoeConfig& m = c.moe; m.n_experts > 0) {
    json sparse = json::array();
    for (int i = 0; i < c.n_layers; ++i) sparse.push_back(m.sparse_layer(i));
    j["experts"] = {{"count", m.n_experts}, {"per_token", m.n_used}, {"width", m.expert_ffn}, {"renormalize", m.renormalize},
                    {"shared_width", m.shared_ffn}, {"sparse_layers", sparse}};
  }
  if (json layers = layers_to_json(c); !layers.empty()) j["layers"] = layers;
  for (const auto& e : c.extend) j["extend"][e->type()] = e->to_json();
  return j;
}

std::string describe(const PositionConfig& p, int head_dim) { return p.scheme->describe(head_dim); }

std::string position_label(const ModelConfig& c) {
  std::string s = c.position.scheme ? layers_label(c) : "?";
  for (const auto& e : c.extend) s += std::string(" + ") + e->type();
  return s;
}

std::string ConfigOverrides::describe() const {
  std::string s;
  for (const auto& f : files) s += (s.empty() ? "`config` " : " `config` ") + f.string();
  for (const auto& p : patches) s += (s.empty() ? "`config` " : " `config` ") + p.dump();
  for (const auto& v : sets) s += (s.empty() ? "`set " : " `set ") + v + "`";
  return s;
}

std::string describe_position(const ModelConfig& c) {
  std::string s = describe(c.position, c.head_dim);
  if (const std::string layers = describe_layers(c); !layers.empty()) s += "; " + layers;
  for (const auto& e : c.extend) s += "; " + e->describe();
  return s;
}

}  // namespace pert
