// Typed reading of config.json objects with errors worded "<source>: <path>.<key> <problem>";
// shared by config.cpp (model and position blocks) and architectures/ (HF architectures).
#pragma once
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;

constexpr long long kMaxDim = 1 << 20;        // widths, head dims
constexpr long long kMaxCount = 1 << 24;      // vocab, positions, distances
constexpr long long kMaxLayers = 4096;

// Reads typed fields of one JSON object, remembers which were read, and words every error
// as "<source>: <path>.<key> <problem>".
class Fields {
 public:
  Fields(const json& obj, std::string source, std::string path)
      : obj_(obj), source_(std::move(source)), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw ConfigError(source_ + ": " + path_ + key + " " + problem);
  }
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }  // "position.", ...
  const json* get(const std::string& key) {
    used_.insert(key);
    auto it = obj_.find(key);
    return (it == obj_.end() || it->is_null()) ? nullptr : &*it;
  }
  bool has(const std::string& key) {
    return get(key) != nullptr;
  }
  bool obj_has(const std::string& key) const { return obj_.contains(key); }  // present, null included

  long long integer(const std::string& key, long long lo, long long hi, std::optional<long long> def = {}) {
    const json* v = get(key);
    if (!v) {
      if (def) return *def;
      fail(key, "is required");
    }
    if (!v->is_number_integer()) fail(key, "must be an integer, got " + json_brief(*v));
    if (v->is_number_unsigned() && v->get<unsigned long long>() > (unsigned long long)hi)
      fail(key, "must be at most " + std::to_string(hi) + ", got " + json_brief(*v));
    const long long x = v->get<long long>();
    if (x < lo || x > hi)
      fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
    return x;
  }
  int positive(const std::string& key, long long hi, std::optional<long long> def = {}) {
    return int(integer(key, 1, hi, def));
  }
  double number(const std::string& key, std::optional<double> def = {}) {
    const json* v = get(key);
    if (!v) {
      if (def) return *def;
      fail(key, "is required");
    }
    if (!v->is_number() || !in_float_range(v->get<double>()))
      fail(key, "must be a finite number in float's range (0 or 1.2e-38 to 3.4e38 in magnitude), got " + json_brief(*v));
    return v->get<double>();
  }
  // What the kernels compute in float: beyond it a value turns into inf, 0 or a denormal.
  static bool in_float_range(double x) {
    const double a = std::fabs(x);
    return std::isfinite(x) && a <= std::numeric_limits<float>::max() && (a == 0 || a >= std::numeric_limits<float>::min());
  }
  // A number that must satisfy `ok`; `rule` words it for the error ("must be > 0").
  template <class Ok>
  double number(const std::string& key, std::optional<double> def, Ok ok, const char* rule) {
    const double x = number(key, def);
    if (!ok(x)) fail(key, std::string(rule) + ", got " + json_brief(x));
    return x;
  }
  bool boolean(const std::string& key, bool def) {
    const json* v = get(key);
    if (!v) return def;
    if (!v->is_boolean()) fail(key, "must be true or false, got " + json_brief(*v));
    return v->get<bool>();
  }
  std::string string(const std::string& key, std::optional<std::string> def = {}) {
    const json* v = get(key);
    if (!v) {
      if (def) return *def;
      fail(key, "is required");
    }
    if (!v->is_string()) fail(key, "must be a string, got " + json_brief(*v));
    return v->get<std::string>();
  }
  std::vector<double> numbers(const std::string& key, size_t count) {
    const json* v = get(key);
    if (!v) fail(key, "is required (" + std::to_string(count) + " numbers, one per rotary pair)");
    if (!v->is_array() || v->size() != count)
      fail(key, "must be a list of " + std::to_string(count) + " numbers (rotary_dim / 2), got " + json_brief(*v));
    std::vector<double> out;
    for (const json& x : *v) {
      if (!x.is_number() || !(x.get<double>() > 0) || !in_float_range(x.get<double>()))
        fail(key, "entries must be numbers > 0 in float's range (1.2e-38 to 3.4e38), got " + json_brief(x));
      out.push_back(x.get<double>());
    }
    return out;
  }
  // Every key of a strict object (pert's own blocks) must have been read.
  void reject_unknown(const std::string& context) const {
    for (const auto& [key, _] : obj_.items())
      if (!used_.count(key)) fail(key, "is not a field of " + context + " (fields: " + comma_list(used_) + ")");
  }

 private:
  const json& obj_;
  std::string source_;
  std::string path_;
  std::set<std::string> used_;
};

struct ModelConfig;
struct PluginContext;
// What an architecture's config says of its layers' schemes: the HF key it comes from and, per
// layer, a position block in pert's form (null: the model's), e.g. SmolLM3's NoPE layers.
struct ArchitectureLayers {
  std::string key;
  std::vector<json> positions;  // [layer]
  json sliding_position;        // the windowed layers' block (Gemma 3), null: the model's
  json global_position;         // the other layers' block (Cohere 2: none), null: the model's
  json rope_defaults = json::object();  // keys of the HF keys' RoPE block where the config has none
};
// Whether the config's architecture (as its architectures / model_type name it) reads `key`.
bool architecture_reads(const json& config, const std::string& key);
bool any_architecture_reads(const std::string& key);  // `--set`'s check: a key some architecture reads
// Space-separated: the keys every architecture reads; what one reads beyond them, or (ignored)
// the keys of others that it lists as ignored rather than refusing.
const char* common_config_keys();
std::string architecture_keys(const std::string& architecture, bool ignored = false);
// Reads `architectures` / `model_type` and what that architecture adds to llama's blocks
// (biases, fused projections, sliding windows) into mc; n_layers must be set (architectures/registry.cpp).
ArchitectureLayers parse_architecture(Fields& f, ModelConfig& mc);
// Gives the layers the schemes an architecture names (before the "layers" block's rules).
void apply_architecture_layers(const ArchitectureLayers& arch, const std::string& source, const PluginContext& context,
                               ModelConfig& mc);

// pert's "layers" block over mc.layers (layers.cpp): each layer's scheme and span as its rules set them.
void parse_layers(const json& block, const std::string& source, const PluginContext& context, ModelConfig& mc);
std::string layers_label(const ModelConfig& c);  // position_label's part
json layers_to_json(const ModelConfig& c);       // the layers that differ, as rules; {} when none

}  // namespace pert
