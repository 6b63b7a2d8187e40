#include "pert/config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "config_fields.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;

namespace {

const std::pair<const char*, PositionType> kPositionTypes[] = {
    {"none", PositionType::None}, {"learned", PositionType::Learned}, {"sinusoidal", PositionType::Sinusoidal},
    {"rope", PositionType::Rope}, {"alibi", PositionType::Alibi},     {"t5", PositionType::T5}};

const std::pair<const char*, RopeScalingType> kScalingTypes[] = {
    {"none", RopeScalingType::None},       {"linear", RopeScalingType::Linear}, {"ntk", RopeScalingType::Ntk},
    {"dynamic", RopeScalingType::Dynamic}, {"yarn", RopeScalingType::Yarn},     {"llama3", RopeScalingType::Llama3},
    {"longrope", RopeScalingType::LongRope}};

template <class Table>
auto lookup(const Table& table, const std::string& name, Fields& f, const std::string& key) {
  std::string names;
  for (const auto& [n, value] : table) {
    if (name == n) return value;
    names += (names.empty() ? "" : ", ") + std::string(n);
  }
  f.fail(key, "'" + name + "' is not one of: " + names);
}

// Keys of HF's configs (and pert's "position") that pert reads.
const std::set<std::string> kReadKeys = {
    "vocab_size",        "hidden_size",          "intermediate_size",  "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim",           "max_position_embeddings",
    "rms_norm_eps",      "tie_word_embeddings",  "bos_token_id",       "eos_token_id",
    "rope_theta",        "rope_scaling",         "partial_rotary_factor", "original_max_position_embeddings",
    "hidden_act",        "attention_bias",       "mlp_bias",           "position",
    "architectures",     "model_type",           "sliding_window",     "use_sliding_window",
    "max_window_layers", "layer_types",          "rope_parameters"};

// HF configs describe RoPE with rope_theta / rope_scaling / partial_rotary_factor; turn them
// into pert's "position" block so one validator serves both.
json position_from_hf(const json& config, const std::string& source) {
  // transformers v5 writes rope_theta, partial_rotary_factor and the scaling as one
  // "rope_parameters" object: read it as the v4 keys it stands for.
  if (config.contains("rope_parameters") && !config["rope_parameters"].is_null()) {
    const json& rp = config["rope_parameters"];
    if (!rp.is_object() || !rp.contains("rope_type"))
      throw ConfigError(source + ": rope_parameters must be an object with a \"rope_type\" (per-layer-type RoPE is not supported), got " + json_brief(rp));
    for (const char* key : {"rope_scaling", "rope_theta"})
      if (config.contains(key) && !config[key].is_null())
        throw ConfigError(source + ": rope_parameters is set together with " + key + "; keep one");
    json v4 = config, scaling = rp;
    v4.erase("rope_parameters");
    for (const char* key : {"rope_theta", "partial_rotary_factor"})
      if (scaling.contains(key)) {
        v4[key] = scaling[key];
        scaling.erase(key);
      }
    v4["rope_scaling"] = scaling;
    return position_from_hf(v4, source);
  }
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
  if (type.empty()) throw ConfigError(source + ": rope_scaling has no \"rope_type\"");
  if (type == "default") return pos;
  if (type == "su") type = "longrope";  // HF's legacy name
  scaling["type"] = type;
  pos["scaling"] = scaling;
  return pos;
}

// `trained` is L unless the block names its own original_max_position_embeddings.
void parse_scaling(const json& obj, int trained, const std::string& source, ModelConfig& mc) {
  RopeScaling& s = mc.position.scaling;
  if (!obj.is_object()) throw ConfigError(source + ": position.scaling must be an object, got " + json_brief(obj));
  Fields f(obj, source, "position.scaling.");
  const std::string type = f.string("type");
  s.type = lookup(kScalingTypes, type, f, "type");
  if (s.type == RopeScalingType::None) {
    f.reject_unknown("scaling type 'none'");
    return;
  }
  const auto at_least_one = [](double x) { return x >= 1.0; };
  s.original_max_position = f.positive("original_max_position_embeddings", kMaxCount, trained);
  const double L = s.original_max_position;

  if (s.type == RopeScalingType::LongRope) {
    if (L < 2) f.fail("original_max_position_embeddings", "must be at least 2 for longrope (its attention factor divides by ln L)");
    s.factor = f.number("factor", mc.max_position_embeddings / L, at_least_one, "must be >= 1");
    const size_t pairs = size_t(mc.position.rotary_dim / 2);
    s.short_factor = f.numbers("short_factor", pairs);
    s.long_factor = f.numbers("long_factor", pairs);
    const double def = s.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s.factor) / std::log(L));
    s.attention_factor = f.number("attention_factor", def, [](double x) { return x > 0; }, "must be > 0");
    s.long_attention_factor = s.attention_factor;
    // Phi-3.5-MoE / Phi-3-small: one factor up to L (short_mscale), another beyond (long_mscale).
    if (f.has("short_mscale") || f.has("long_mscale")) {
      if (f.has("attention_factor")) f.fail("short_mscale", "and attention_factor are both set; keep one");
      s.attention_factor = f.number("short_mscale", std::nullopt, [](double x) { return x > 0; }, "must be > 0");
      s.long_attention_factor = f.number("long_mscale", std::nullopt, [](double x) { return x > 0; }, "must be > 0");
    }
  } else {
    s.factor = f.number("factor", std::nullopt, at_least_one, "must be >= 1");
  }
  if ((s.type == RopeScalingType::Ntk || s.type == RopeScalingType::Dynamic) && mc.position.rotary_dim < 4)
    f.fail("type", "'" + type + "' needs rotary_dim >= 4 (its exponent is r/(r-2)), got " + std::to_string(mc.position.rotary_dim));
  if (s.type == RopeScalingType::Yarn) {
    s.beta_fast = f.number("beta_fast", 32.0, [](double x) { return x > 0; }, "must be > 0");
    s.beta_slow = f.number("beta_slow", 1.0, [](double x) { return x > 0; }, "must be > 0");
    if (s.beta_fast <= s.beta_slow) f.fail("beta_fast", "must be greater than beta_slow");
    // HF's default: m(s) = 0.1·ln(s) + 1, or m(s, mscale) / m(s, mscale_all_dim) with
    // m(s, k) = 0.1·k·ln(s) + 1 when both are given and non-zero (DeepSeek's configs).
    s.mscale = f.number("mscale", 0.0, [](double x) { return x >= 0; }, "must be >= 0");
    s.mscale_all_dim = f.number("mscale_all_dim", 0.0, [](double x) { return x >= 0; }, "must be >= 0");
    const auto m = [&](double k) { return s.factor <= 1.0 ? 1.0 : 0.1 * k * std::log(s.factor) + 1.0; };
    const double def = s.mscale != 0 && s.mscale_all_dim != 0 ? m(s.mscale) / m(s.mscale_all_dim) : m(1.0);
    s.attention_factor = f.number("attention_factor", def, [](double x) { return x > 0; }, "must be > 0");
    s.truncate = f.boolean("truncate", true);
  }
  if (s.type == RopeScalingType::Llama3) {
    s.low_freq_factor = f.number("low_freq_factor", 1.0, [](double x) { return x > 0; }, "must be > 0");
    s.high_freq_factor = f.number("high_freq_factor", 4.0, [](double x) { return x > 0; }, "must be > 0");
    if (s.high_freq_factor <= s.low_freq_factor) f.fail("high_freq_factor", "must be greater than low_freq_factor");
  }
  f.reject_unknown("scaling type '" + type + "'");
}

void parse_position(const json& obj, int trained, const std::string& source, ModelConfig& mc) {
  if (!obj.is_object()) throw ConfigError(source + ": position must be an object, got " + json_brief(obj));
  PositionConfig& p = mc.position;
  Fields f(obj, source, "position.");
  const std::string type = f.string("type");
  p.type = lookup(kPositionTypes, type, f, "type");
  const auto above_one = [](double x) { return x > 1.0; };
  switch (p.type) {
    case PositionType::None:
      break;
    case PositionType::Learned: {
      p.max_positions = f.positive("max_positions", kMaxCount, mc.max_position_embeddings);
      const std::string beyond = f.string("beyond", "error");
      if (beyond != "error" && beyond != "clamp") f.fail("beyond", "must be \"error\" or \"clamp\", got \"" + beyond + "\"");
      p.clamp_beyond = beyond == "clamp";
      break;
    }
    case PositionType::Sinusoidal:
      p.base = f.number("base", 10000.0, above_one, "must be > 1");
      p.embed_scale = f.number("embed_scale", 1.0, [](double x) { return x > 0; }, "must be > 0");
      if (mc.hidden_size % 2) f.fail("type", "sinusoidal needs an even hidden_size, got " + std::to_string(mc.hidden_size));
      break;
    case PositionType::Rope: {
      p.base = f.number("base", 10000.0, above_one, "must be > 1");
      if (f.has("partial_rotary_factor")) {  // only from HF keys (see position_from_hf)
        const double prf = f.number("partial_rotary_factor", {}, [](double x) { return x > 0 && x <= 1; }, "must be in (0, 1]");
        p.rotary_dim = int(mc.head_dim * prf);
      } else {
        p.rotary_dim = f.positive("rotary_dim", kMaxDim, mc.head_dim);
      }
      if (p.rotary_dim % 2) f.fail("rotary_dim", "must be even, got " + std::to_string(p.rotary_dim) + " (head_dim " + std::to_string(mc.head_dim) + ")");
      if (p.rotary_dim < 2 || p.rotary_dim > mc.head_dim)
        f.fail("rotary_dim", "must be in [2, head_dim = " + std::to_string(mc.head_dim) + "], got " + std::to_string(p.rotary_dim));
      const std::string layout = f.string("layout", "half");
      if (layout != "half" && layout != "interleaved") f.fail("layout", "must be \"half\" or \"interleaved\", got \"" + layout + "\"");
      p.layout = layout == "half" ? RopeLayout::Half : RopeLayout::Interleaved;
      if (const json* s = f.get("scaling")) parse_scaling(*s, trained, source, mc);
      if (const json* x = f.get("xpos")) {
        if (!x->is_object()) f.fail("xpos", "must be an object like {\"gamma\": 0.4, \"scale_base\": 512}, got " + json_brief(*x));
        Fields xf(*x, source, "position.xpos.");
        p.xpos.enabled = true;
        p.xpos.gamma = xf.number("gamma", 0.4, [](double g) { return g > 0; }, "must be > 0");
        p.xpos.scale_base = xf.number("scale_base", 512.0, [](double b) { return b > 0; }, "must be > 0");
        xf.reject_unknown("xpos");
      }
      break;
    }
    case PositionType::Alibi:
      p.max_bias = f.number("max_bias", 8.0, [](double x) { return x > 0; }, "must be > 0");
      break;
    case PositionType::T5:
      p.num_buckets = f.positive("num_buckets", 4096, 32);
      p.max_distance = f.positive("max_distance", kMaxCount, 128);
      // HF's causal bucketing: exact below num_buckets/2, log-spaced up to max_distance.
      if (p.num_buckets < 2) f.fail("num_buckets", "must be at least 2");
      if (p.max_distance <= p.num_buckets / 2)
        f.fail("max_distance", "must exceed num_buckets / 2 = " + std::to_string(p.num_buckets / 2) + ", got " + std::to_string(p.max_distance));
      break;
  }
  f.reject_unknown("position type '" + type + "'");
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

ModelConfig parse_model_config(const json& config, const std::string& source) {
  if (!config.is_object()) throw ConfigError(source + ": must be a JSON object");
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
  if (f.has("hidden_act") && f.string("hidden_act") != "silu")
    f.fail("hidden_act", "must be \"silu\" (SwiGLU), got " + json_brief(config["hidden_act"]));
  parse_architecture(f, mc);

  const bool has_position = f.has("position");
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (has_position && config.contains(key) && !config[key].is_null())
      f.fail(key, "is set together with \"position\"; keep one (--set " + std::string(key) + "=null)");
  // Phi-3 style configs give the pre-extension length at the top level.
  const int trained = f.positive("original_max_position_embeddings", kMaxCount, mc.max_position_embeddings);
  parse_position(has_position ? config["position"] : position_from_hf(config, source), trained, source, mc);
  return mc;
}

std::vector<std::string> ignored_config_keys(const json& config) {
  std::vector<std::string> out;
  if (!config.is_object()) return out;
  const bool has_position = config.contains("position") && !config["position"].is_null();
  for (const auto& [key, _] : config.items())
    if (!kReadKeys.count(key) || (has_position && (key == "rope_theta" || key == "partial_rotary_factor")))
      out.push_back(key);
  return out;
}

json apply_overrides(json config, const ConfigOverrides& overrides) {
  for (const auto& file : overrides.files) {
    const json patch = read_json_file(file);
    if (!patch.is_object()) throw ConfigError(file.string() + ": a config override must be a JSON object");
    config.merge_patch(patch);
  }
  for (const std::string& set : overrides.sets) {
    const auto eq = set.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--set '" + set + "': expected key.path=value");
    const std::string path = set.substr(0, eq), text = set.substr(eq + 1);
    std::vector<std::string> keys;
    std::stringstream ss(path);
    for (std::string k; std::getline(ss, k, '.');) {
      if (k.empty()) throw ConfigError("--set '" + set + "': empty key in '" + path + "'");
      keys.push_back(k);
    }
    if (path.back() == '.') throw ConfigError("--set '" + set + "': empty key in '" + path + "'");
    if (keys.size() > size_t(kMaxJsonDepth))  // nested objects that deep would recurse in every copy
      throw ConfigError("--set: a key path of " + std::to_string(keys.size()) + " keys is deeper than " +
                        std::to_string(kMaxJsonDepth) + " levels");
    if (!kReadKeys.count(keys[0]) && !config.contains(keys[0]))
      throw ConfigError("--set '" + set + "': '" + keys[0] + "' is not a config key pert reads");
    check_json_depth(text, "--set " + path);
    json value;
    try {
      value = json::parse(text);  // numbers, booleans, null, objects, lists ...
    } catch (const json::exception&) {
      value = text;  // ... and anything else is a string: --set position.type=alibi
    }
    if (!config.is_object()) throw ConfigError("--set '" + set + "': the config is not a JSON object");
    json* node = &config;
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      json& next = (*node)[keys[i]];
      if (next.is_null()) next = json::object();
      if (!next.is_object())
        throw ConfigError("--set '" + set + "': '" + keys[i] + "' is " + json_brief(next) + ", not an object");
      node = &next;
    }
    if (value.is_null()) node->erase(keys.back());
    else (*node)[keys.back()] = value;
  }
  return config;
}

const char* position_type_name(PositionType type) {
  for (const auto& [name, t] : kPositionTypes)
    if (t == type) return name;
  return "?";
}

const char* rope_scaling_name(RopeScalingType type) {
  for (const auto& [name, t] : kScalingTypes)
    if (t == type) return name;
  return "?";
}

json to_json(const PositionConfig& p) {
  json j = {{"type", position_type_name(p.type)}};
  switch (p.type) {
    case PositionType::None:
      break;
    case PositionType::Learned:
      j["max_positions"] = p.max_positions;
      j["beyond"] = p.clamp_beyond ? "clamp" : "error";
      break;
    case PositionType::Sinusoidal:
      j["base"] = p.base;
      j["embed_scale"] = p.embed_scale;
      break;
    case PositionType::Rope: {
      j["base"] = p.base;
      j["rotary_dim"] = p.rotary_dim;
      j["layout"] = p.layout == RopeLayout::Half ? "half" : "interleaved";
      const RopeScaling& s = p.scaling;
      if (s.type != RopeScalingType::None) {
        json js = {{"type", rope_scaling_name(s.type)},
                   {"factor", s.factor},
                   {"original_max_position_embeddings", s.original_max_position}};
        if (s.type == RopeScalingType::Yarn) {
          js["beta_fast"] = s.beta_fast;
          js["beta_slow"] = s.beta_slow;
        }
        if (s.type == RopeScalingType::Yarn || s.type == RopeScalingType::LongRope)
          js["attention_factor"] = s.attention_factor;
        if (s.type == RopeScalingType::Yarn && !s.truncate) js["truncate"] = false;
        if (s.type == RopeScalingType::LongRope && s.long_attention_factor != s.attention_factor)
          js["long_attention_factor"] = s.long_attention_factor;
        if (s.type == RopeScalingType::Llama3) {
          js["low_freq_factor"] = s.low_freq_factor;
          js["high_freq_factor"] = s.high_freq_factor;
        }
        if (s.type == RopeScalingType::LongRope) {
          js["short_factor"] = s.short_factor;
          js["long_factor"] = s.long_factor;
        }
        j["scaling"] = js;
      }
      if (p.xpos.enabled) j["xpos"] = {{"gamma", p.xpos.gamma}, {"scale_base", p.xpos.scale_base}};
      break;
    }
    case PositionType::Alibi:
      j["max_bias"] = p.max_bias;
      break;
    case PositionType::T5:
      j["num_buckets"] = p.num_buckets;
      j["max_distance"] = p.max_distance;
      break;
  }
  return j;
}

json to_json(const ModelConfig& c) {
  json j = {{"architectures", {architecture_name(c.architecture)}},
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
  if (c.qk_norm) j["qk_norm"] = true;
  if (std::any_of(c.sliding_window.begin(), c.sliding_window.end(), [](int w) { return w > 0; }))
    j["sliding_window"] = c.sliding_window;
  return j;
}

namespace {
std::string num(double x) {
  std::ostringstream ss;
  ss << x;
  return ss.str();
}
}  // namespace

std::string describe(const PositionConfig& p, int head_dim) {
  switch (p.type) {
    case PositionType::None:
      return "NoPE: no positional signal; only the causal mask orders tokens";
    case PositionType::Learned:
      return "learned absolute embeddings (GPT-2 wpe), " + std::to_string(p.max_positions) +
             " positions added to the token embeddings; beyond them: " +
             (p.clamp_beyond ? "reuse the last row" : "error");
    case PositionType::Sinusoidal:
      return "sinusoidal absolute embeddings (Vaswani et al. 2017), base " + num(p.base) +
             ", added to the token embeddings scaled by " + num(p.embed_scale);
    case PositionType::Alibi:
      return "ALiBi (Press et al. 2022): per-head linear distance bias on the scores, max_bias " + num(p.max_bias);
    case PositionType::T5:
      return "T5 relative bias (Raffel et al. 2020): learned per head, " + std::to_string(p.num_buckets) +
             " causal buckets, log-spaced up to distance " + std::to_string(p.max_distance);
    case PositionType::Rope:
      break;
  }
  std::string s = "RoPE (Su et al. 2021): " + std::string(p.layout == RopeLayout::Half ? "half" : "interleaved") +
                  " layout, base " + num(p.base) + ", rotary dim " + std::to_string(p.rotary_dim) + " of " +
                  std::to_string(head_dim);
  const RopeScaling& sc = p.scaling;
  const std::string from = " x" + num(sc.factor) + " from L = " + std::to_string(sc.original_max_position);
  switch (sc.type) {
    case RopeScalingType::None: break;
    case RopeScalingType::Linear: s += "; linear position interpolation" + from; break;
    case RopeScalingType::Ntk: s += "; NTK-aware base scaling" + from; break;
    case RopeScalingType::Dynamic: s += "; dynamic NTK" + from + ", plain RoPE up to L"; break;
    case RopeScalingType::Yarn:
      s += "; YaRN" + from + " (beta_fast " + num(sc.beta_fast) + ", beta_slow " + num(sc.beta_slow) +
           ", attention factor " + num(sc.attention_factor) + ")";
      break;
    case RopeScalingType::Llama3:
      s += "; Llama 3" + from + " (low_freq_factor " + num(sc.low_freq_factor) + ", high_freq_factor " +
           num(sc.high_freq_factor) + ")";
      break;
    case RopeScalingType::LongRope:
      s += "; LongRoPE" + from + " (short factors up to L, long beyond; attention factor " +
           num(sc.attention_factor) + ")";
      break;
  }
  if (p.xpos.enabled)
    s += "; xPos (gamma " + num(p.xpos.gamma) + ", scale_base " + num(p.xpos.scale_base) + ")";
  return s;
}

}  // namespace pert
