// The registry of attention's plug-ins: adding a positional scheme or an "extend" method means
// one file, one entry here (and its parse function in plugins.hpp), one reference test.
#include <algorithm>

#include "attention/plugins.hpp"
#include "attention/positions/rope.hpp"

namespace pert {

namespace {
const std::pair<const char*, ParseScheme> kSchemes[] = {
    {"none", parse_none}, {"learned", parse_learned}, {"sinusoidal", parse_sinusoidal},
    {"rope", parse_rope}, {"alibi", parse_alibi},     {"t5", parse_t5},
    {"kerple", parse_kerple}, {"fire", parse_fire},   {"xl", parse_xl},
    {"deberta", parse_deberta}, {"fox", parse_fox},   {"stick_breaking", parse_stick_breaking},
    {"cope", parse_cope},
};

const std::pair<const char*, ParseExtension> kMethods[] = {
    {"self_extend", parse_self_extend}, {"rerope", parse_rerope},       {"leaky_rerope", parse_leaky_rerope},
    {"streaming", parse_streaming},     {"blockwise", parse_blockwise}, {"logn", parse_logn},
    {"dca", parse_dca},
};

// The entry of `table` named `name` (null if none), with every known name listed in `known`.
template <class Parse, size_t N>
Parse find(const std::pair<const char*, Parse> (&table)[N], const std::string& name, std::string& known) {
  known = comma_list(table, [](const std::pair<const char*, Parse>& entry) { return std::string(entry.first); });
  for (const auto& [n, parse] : table)
    if (name == n) return parse;
  return nullptr;
}
// The schemes an "extend" method must suit: every layer's, but NoPE layers' where others have
// positions (a method that moves positions changes nothing there), and the model's when it adds
// positions to the embeddings.
std::vector<const SchemeConfig*> schemes_to_check(const ModelConfig& c) {
  std::vector<const SchemeConfig*> out;
  auto add = [&](const SchemeConfig* s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  for (const LayerAttention& l : c.layers)
    if (l.position.scheme->kind() != SchemeKind::None) add(l.position.scheme.get());
  if (c.position.scheme->kind() == SchemeKind::Absolute || out.empty()) add(c.position.scheme.get());
  return out;
}
}  // namespace

std::shared_ptr<const SchemeConfig> parse_scheme(const std::string& type, Fields& f, const PluginContext& context) {
  std::string names;
  if (const ParseScheme parse = find(kSchemes, type, names)) return parse(f, context);
  f.fail("type", "'" + type + "' is not one of: " + names);
}

std::string past_position_table(const std::string& scheme, int max, const std::string& instead) {
  return "past the " + scheme + " position table (" + std::to_string(max) + " positions); " + instead +
         (scheme == "learned" ? ", or `set position.beyond=clamp` to reuse the last one" : "");
}

std::string PositionConfig::type() const { return scheme ? scheme->type() : "?"; }

std::vector<ExpectedTensor> position_tensors(const ModelConfig& c) { return c.position.scheme->tensors(c); }

std::unique_ptr<PositionEncoding> make_position_encoding(const ModelConfig& c, const TensorLookup& tensors) {
  return c.position.scheme->make(c, tensors);
}

std::unique_ptr<PositionEncoding> make_position_encoding(const ModelConfig& c, const PositionConfig& scheme,
                                                         const TensorLookup& tensors) {
  return scheme.scheme->make(c, tensors);
}

std::vector<std::shared_ptr<const ExtensionConfig>> parse_extend(const json& block, const std::string& source,
                                                                const PluginContext& context) {
  if (!block.is_object())
    throw ConfigError(source + ": extend must be an object of methods, e.g. {\"self_extend\": {\"window\": 128}}, got " +
                      json_brief(block));
  std::vector<std::shared_ptr<const ExtensionConfig>> out;
  const ExtensionConfig* pattern = nullptr;
  for (const auto& [name, fields] : block.items()) {
    if (fields.is_null()) continue;  // a merge patch's way of removing one
    std::string names;
    const ParseExtension parse = find(kMethods, name, names);
    const std::string key = "extend." + name;
    if (!parse) throw ConfigError(source + ": " + key + " is not a method pert knows (methods: " + names + ")");
    if (!fields.is_object()) throw ConfigError(source + ": " + key + " must be an object of its fields ({} for the defaults), got " + json_brief(fields));
    Fields f(fields, source, key + ".");
    std::shared_ptr<const ExtensionConfig> method = parse(f, context);
    f.reject_unknown("method '" + name + "'");
    if (method->masks() || method->remaps()) {
      if (pattern)
        throw ConfigError(source + ": " + key + " and extend." + pattern->type() +
                          " both choose which keys a query sees or where pairs sit; keep one (log-n combines with either)");
      pattern = method.get();
    }
    for (const SchemeConfig* scheme : schemes_to_check(context.model)) {
      const SchemeKind kind = scheme->kind();
      const bool moves_keys = method->remaps() && !method->far_keys_are_keys();
      if (method->remaps() && scheme->positions_from_content())
        throw ConfigError(source + ": " + key + " re-encodes positions, but '" + scheme->type() +
                          "' counts them from the content: there are none to move" +
                          (method->masks() ? "; for its mask alone use \"positions\": \"original\"" : ""));
      if (moves_keys && kind != SchemeKind::Rotary)
        throw ConfigError(source + ": " + key + " re-encodes key positions, which needs a rotary scheme (position.type rope), not '" +
                          scheme->type() + "'");
      if (method->remaps() && kind == SchemeKind::Absolute)
        throw ConfigError(source + ": " + key + " re-indexes positions, but '" + scheme->type() +
                          "' adds them to the token embeddings, where they cannot move; use its \"positions\": \"original\"");
      const auto* rope = dynamic_cast<const RopeConfig*>(scheme);
      if (method->remaps() && rope && rope->xpos.enabled)
        throw ConfigError(source + ": " + key + " re-encodes positions, which its source does not define for xPos; drop position.xpos" +
                          (method->far_keys_are_keys() ? " or use \"positions\": \"original\"" : ""));
    }
    out.push_back(std::move(method));
  }
  return out;
}

Extensions::Extensions(const ModelConfig& config) {
  for (const auto& e : config.extend) {
    if (e->masks() || e->remaps()) pattern = e.get();
    if (e->scales()) scales.push_back(e.get());
  }
}

}  // namespace pert
