// pert's "layers" block: positions and attention spans layer by layer (docs/config.md, "The layers block"), e.g.
// Cohere's RNoPE-SWA, RoPE in sliding-window layers and a global NoPE layer every 4th:
//   "layers": {"global": {"every": 4, "position": {"type": "none"}},
//              "local":  {"others": true, "window": 4096}}
// Each named rule selects layers by exactly one of
//   "layers": [i, ...]        those layers (0-based)
//   "every": k, "from": f     layers f, f + k, f + 2k, ... (f defaults to k − 1: every k-th layer)
//   "others": true            the layers no other rule selects
// and sets any of
//   "position": {...}         a whole position block, that layer's scheme
//   "window": W               sliding window (0: every earlier key)
//   "chunk": C                chunked local attention (Llama 4): keys of the query's own C-block
//   "temperature": {"scale": s, "floor": f}   iRoPE's query temperature
// Two rules may not set the same field of one layer, so the block means the same in any key
// order. A layer's scheme has no weights and does not add to the embeddings: such a scheme is
// the model's (`position`), not a layer's.
#include <algorithm>
#include <map>

#include "attention/plugins.hpp"
#include "model/config_fields.hpp"
#include "pert/config.hpp"

namespace pert {

namespace {

const char* const kFields[] = {"position", "window", "chunk", "temperature"};

// The layers a rule selects (every rule but "others"); empty for "others".
std::vector<int> selected_layers(Fields& f, int n_layers, bool& others) {
  const int selectors = int(f.has("layers")) + int(f.has("every")) + int(f.has("others"));
  if (selectors != 1)
    throw ConfigError(f.source() + ": " + f.path().substr(0, f.path().size() - 1) +
                      " must select its layers by exactly one of \"layers\": [i, ...], \"every\": k (with \"from\"), \"others\": true");
  others = f.has("others");
  if (others) {
    if (!f.boolean("others", false)) f.fail("others", "must be true (it selects the layers no other rule selects)");
    return {};
  }
  std::vector<int> out;
  if (f.has("every")) {
    const int every = f.positive("every", n_layers);
    const int from = int(f.integer("from", 0, n_layers - 1, every - 1));
    for (int i = from; i < n_layers; i += every) out.push_back(i);
    return out;
  }
  const json& list = *f.get("layers");
  if (!list.is_array() || list.empty()) f.fail("layers", "must be a non-empty list of layer indices, got " + json_brief(list));
  for (const json& i : list) {
    if (!i.is_number_integer() || i.get<long long>() < 0 || i.get<long long>() >= n_layers)
      f.fail("layers", "entries must be layer indices in [0, " + std::to_string(n_layers) + "), got " + json_brief(i));
    if (std::count(out.begin(), out.end(), i.get<int>())) f.fail("layers", "lists layer " + i.dump() + " twice");
    out.push_back(i.get<int>());
  }
  return out;
}

PositionConfig layer_scheme(Fields& f, const std::string& path, const PluginContext& context) {
  const json& block = *f.get("position");
  if (!block.is_object()) f.fail("position", "must be a position block (an object with a \"type\"), got " + json_brief(block));
  Fields p(block, f.source(), path + "position.");
  const std::string type = p.string("type");
  PositionConfig out{parse_scheme(type, p, context)};
  p.reject_unknown("position type '" + type + "'");
  if (out.scheme->kind() == SchemeKind::Absolute)
    f.fail("position", "is '" + type + "', which adds positions to the embeddings, once for every layer: it can only be the model's `position`");
  if (!out.scheme->tensors(context.model).empty())
    f.fail("position", "is '" + type + "', which has weights of its own: a scheme with weights can only be the model's `position`");
  return out;
}

// A set of layers in words: "every layer", "every 4th layer from 3", "layers 2-5", "layers 0, 3, 9",
// "every layer but layer 5".
std::string layer_set(const std::vector<int>& ls, int n_layers) {
  if (int(ls.size()) == n_layers) return "every layer";
  if (2 * ls.size() > size_t(n_layers)) {
    std::vector<int> rest;
    for (int i = 0; i < n_layers; ++i)
      if (!std::binary_search(ls.begin(), ls.end(), i)) rest.push_back(i);
    return "every layer but " + layer_set(rest, n_layers);
  }
  if (ls.size() == 1) return "layer " + std::to_string(ls[0]);
  const int step = ls[1] - ls[0];
  bool arithmetic = true;
  for (size_t i = 1; i < ls.size(); ++i) arithmetic = arithmetic && ls[i] - ls[i - 1] == step;
  if (arithmetic && step == 1) return "layers " + std::to_string(ls.front()) + "-" + std::to_string(ls.back());
  if (arithmetic && ls.size() > 2 && ls.back() + step >= n_layers) {
    const std::string th = step == 2 ? "nd" : step == 3 ? "rd" : "th";
    return "every " + std::to_string(step) + th + " layer from " + std::to_string(ls[0]);
  }
  std::string s = "layers ";
  for (size_t i = 0; i < ls.size(); ++i) s += (i ? ", " : "") + std::to_string(ls[i]);
  return s;
}

// Layers grouped by what their attention does: the scheme, chunk and temperature (and the
// window, `with_window`), in the order of their first layer.
struct LayerGroup {
  const LayerAttention* first;
  std::vector<int> layers;
};
std::vector<LayerGroup> layer_groups(const ModelConfig& c, bool with_window = false) {
  std::vector<LayerGroup> groups;
  std::map<std::string, size_t> index;
  for (int i = 0; i < int(c.layers.size()); ++i) {
    const LayerAttention& l = c.layers[size_t(i)];
    const std::string key = l.position.scheme->to_json().dump() + "|" + std::to_string(l.chunk) + "|" +
                            json(l.temperature_scale).dump() + "|" + std::to_string(l.temperature_floor) + "|" +
                            std::to_string(with_window ? l.window : 0);
    auto [it, added] = index.emplace(key, groups.size());
    if (added) groups.push_back({&l, {}});
    groups[it->second].layers.push_back(i);
  }
  return groups;
}

std::string temperature_words(const LayerAttention& l) {
  return "query temperature 1 + " + json(l.temperature_scale).dump() + "·ln(1 + ⌊(m + 1)/" +
         std::to_string(l.temperature_floor) + "⌋)";
}

}  // namespace

void parse_layers(const json& block, const std::string& source, const PluginContext& context, ModelConfig& mc) {
  if (!block.is_object())
    throw ConfigError(source + ": layers must be an object of named rules, e.g. {\"global\": {\"every\": 4, \"position\": "
                               "{\"type\": \"none\"}}}, got " + json_brief(block));
  const int n = mc.n_layers;
  struct Rule {
    std::string name;
    Fields fields;
    std::vector<int> layers;
  };
  std::vector<Rule> rules;
  std::vector<bool> taken(size_t(n), false);
  const Rule* others = nullptr;
  rules.reserve(block.size());
  for (const auto& [name, rule] : block.items()) {
    if (rule.is_null()) continue;  // a merge patch's way of removing one
    if (!rule.is_object()) throw ConfigError(source + ": layers." + name + " must be an object (a rule), got " + json_brief(rule));
    rules.push_back({name, Fields(rule, source, "layers." + name + "."), {}});
    bool is_others = false;
    rules.back().layers = selected_layers(rules.back().fields, n, is_others);
    if (is_others && others)
      throw ConfigError(source + ": layers." + name + " and layers." + others->name + " both select the other layers; keep one");
    if (is_others) others = &rules.back();
    for (int i : rules.back().layers) taken[size_t(i)] = true;
  }
  for (int i = 0; others && i < n; ++i)
    if (!taken[size_t(i)]) rules[size_t(others - rules.data())].layers.push_back(i);
  std::map<std::pair<int, std::string>, std::string> set_by;  // (layer, field) -> the rule that set it
  for (Rule& rule : rules) {
    const std::string path = "layers." + rule.name + ".";
    Fields& f = rule.fields;
    const std::vector<int>& ls = rule.layers;
    for (const char* field : kFields) {
      if (!f.has(field)) continue;
      for (int i : ls) {
        auto [it, fresh] = set_by.emplace(std::pair{i, std::string(field)}, rule.name);
        if (!fresh)
          f.fail(field, "is set for layer " + std::to_string(i) + ", which layers." + it->second + " sets too; keep one");
      }
    }
    LayerAttention rule_values;
    if (f.has("position")) {
      rule_values.position = layer_scheme(f, path, context);
      if (rule_values.position.scheme->to_json() == mc.position.scheme->to_json()) rule_values.position = mc.position;
    }
    const int window = f.has("window") ? int(f.integer("window", 0, kMaxCount)) : 0;
    const int chunk = f.has("chunk") ? int(f.integer("chunk", 0, kMaxCount)) : 0;
    double t_scale = 0.0;
    int t_floor = 1;
    if (const json* t = f.get("temperature")) {
      if (!t->is_object()) f.fail("temperature", "must be an object {\"scale\": s, \"floor\": f}, got " + json_brief(*t));
      Fields tf(*t, source, path + "temperature.");
      t_scale = tf.number("scale", {}, [](double x) { return x >= 0; }, "must be >= 0");
      t_floor = tf.positive("floor", kMaxCount);
      tf.reject_unknown("a layer's temperature");
    }
    f.reject_unknown("a layers rule");
    json& named = mc.layer_rules[rule.name] = {{"given", block[rule.name]}, {"layers", ls}, {"fields", json::array()}};
    std::sort(named["layers"].begin(), named["layers"].end());
    for (const char* field : kFields)
      if (f.has(field)) named["fields"].push_back(field);
    for (int i : ls) {
      LayerAttention& l = mc.layers[size_t(i)];
      if (rule_values.position.scheme) l.position = rule_values.position;
      if (f.has("window")) l.window = window;
      if (f.has("chunk")) l.chunk = chunk;
      if (f.has("temperature")) l.temperature_scale = t_scale, l.temperature_floor = t_floor;
    }
  }
  // A rule that sets nothing only keeps its layers from the "others" rule; without one that sets
  // something (e.g. `--set layers.global.every=4` on a model with no block) it would change nothing.
  auto sets_any = [](Fields& f) { return std::any_of(std::begin(kFields), std::end(kFields), [&](const char* k) { return f.has(k); }); };
  const bool others_set = others && sets_any(rules[size_t(others - rules.data())].fields);
  for (Rule& rule : rules)
    if (!sets_any(rule.fields) && (&rule == others || !others_set))
      throw ConfigError(source + ": layers." + rule.name + " sets none of \"position\", \"window\", \"chunk\", \"temperature\"" +
                        (&rule == others ? std::string() : others ? ", nor does layers." + others->name + ", which takes the layers it leaves" :
                                            ", and no rule with \"others\": true takes the layers it leaves") +
                        ": it would change nothing");
}

std::string position_identity(const ModelConfig& c) {
  std::string s = c.position.scheme->identity();
  for (const LayerGroup& g : layer_groups(c))
    if (g.first->position.scheme->identity() != c.position.scheme->identity())
      s += "; " + layer_set(g.layers, c.n_layers) + ": " + g.first->position.scheme->identity();
  return s;
}

void apply_architecture_layers(const ArchitectureLayers& arch, const std::string& source, const PluginContext& context,
                               ModelConfig& mc) {
  std::map<std::string, PositionConfig> parsed;  // one scheme per distinct block
  for (size_t i = 0; i < arch.positions.size(); ++i) {
    const json& block = arch.positions[i];
    if (block.is_null()) continue;
    auto it = parsed.find(block.dump());
    if (it == parsed.end()) {
      Fields p(block, source, arch.key + ".");
      const std::string type = p.string("type");
      PositionConfig scheme{parse_scheme(type, p, context)};
      p.reject_unknown("position type '" + type + "'");
      if (scheme.scheme->to_json() == mc.position.scheme->to_json()) scheme = mc.position;
      it = parsed.emplace(block.dump(), scheme).first;
    }
    mc.layers[i].position = it->second;
  }
}

bool has_layer_schemes(const ModelConfig& c) {
  for (const LayerAttention& l : c.layers)
    if (l.position.scheme != c.position.scheme) return true;
  return false;
}

std::string describe_layers(const ModelConfig& c) {
  std::string s;
  for (const LayerGroup& g : layer_groups(c)) {
    const LayerAttention& l = *g.first;
    std::vector<std::string> parts;
    if (l.position.scheme != c.position.scheme) parts.push_back(describe(l.position, c.head_dim));
    if (l.chunk > 0) parts.push_back("chunked local attention of " + std::to_string(l.chunk) + " positions");
    if (l.temperature_scale != 0.0) parts.push_back(temperature_words(l));
    if (parts.empty()) continue;
    s += (s.empty() ? "" : "; ") + layer_set(g.layers, c.n_layers) + ":";
    for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : " ") + parts[i];
  }
  return s;
}

std::string layers_label(const ModelConfig& c) {
  // Windows are named where layers differ in them (Mistral's, on every layer, is the architecture's).
  const bool windows = std::any_of(c.layers.begin(), c.layers.end(), [&](const LayerAttention& l) { return l.window != c.layers[0].window; });
  const std::vector<LayerGroup> groups = layer_groups(c, windows);  // "rope w64 x4 + none x1"
  if (groups.size() == 1 && groups[0].first->chunk == 0 && groups[0].first->temperature_scale == 0.0)
    return c.position.scheme->label();
  std::string s;
  for (const LayerGroup& g : groups) {
    const LayerAttention& l = *g.first;
    s += (s.empty() ? "" : " + ") + l.position.scheme->label();
    if (windows && l.window > 0) s += " w" + std::to_string(l.window);
    if (l.chunk > 0) s += " chunk" + std::to_string(l.chunk);
    if (l.temperature_scale != 0.0) s += " temp";
    if (groups.size() > 1) s += " x" + std::to_string(g.layers.size());
  }
  return s;
}

namespace {

// A layer's value of a rule's field, as a rule writes it.
json field_value(const LayerAttention& l, const std::string& field) {
  if (field == "position") return l.position.scheme->to_json();
  if (field == "window") return l.window;
  if (field == "chunk") return l.chunk;
  return json{{"scale", l.temperature_scale}, {"floor", l.temperature_floor}};  // temperature
}

// Whether a layer's field differs from what a layer no rule touches has: the model's scheme, no
// window, chunk or temperature.
bool differs(const LayerAttention& l, const std::string& field, const ModelConfig& c) {
  if (field == "position") return l.position.scheme != c.position.scheme;
  if (field == "window") return l.window > 0;
  if (field == "chunk") return l.chunk > 0;
  return l.temperature_scale != 0.0;  // temperature
}

}  // namespace

json layers_to_json(const ModelConfig& c) {
  // The block's rules under their own names (what `set layers.NAME...` reaches), each with what
  // it set, resolved; then what the architecture's layout gives the layers besides, grouped.
  ModelConfig rest = c;  // each layer with the fields a rule set back at the model's
  for (const auto& [name, r] : c.layer_rules.items())
    for (const std::string field : r["fields"])
      for (int i : r["layers"]) {
        LayerAttention& l = rest.layers[size_t(i)];
        if (field == "position") l.position = c.position;
        if (field == "window") l.window = 0;
        if (field == "chunk") l.chunk = 0;
        if (field == "temperature") l.temperature_scale = 0.0, l.temperature_floor = 1;
      }
  json architecture = json::object();
  for (const LayerGroup& g : layer_groups(rest, true)) {
    json rule = {{"layers", g.layers}};
    for (const char* field : kFields)
      if (differs(*g.first, field, c)) rule[field] = field_value(*g.first, field);
    if (rule.size() > 1) architecture["layers_from_" + std::to_string(g.layers[0])] = rule;
  }
  // Beside the architecture's groups each rule lists its layers, so that "others" reads as it did
  // (a rule that sets nothing then says nothing); alone, each is as written, its values resolved.
  json out = json::object();
  for (const auto& [name, r] : c.layer_rules.items()) {
    const std::vector<int> ls = r["layers"];
    if (!architecture.empty() && (ls.empty() || r["fields"].empty())) continue;
    json rule = architecture.empty() ? r["given"] : json{{"layers", ls}};
    for (const std::string field : r["fields"])
      if (!ls.empty()) rule[field] = field_value(c.layers[size_t(ls[0])], field);
    out[name] = rule;
  }
  for (const auto& [name, rule] : architecture.items()) {  // (a rule given that name keeps it)
    std::string key = name;
    while (out.contains(key)) key += "_";
    out[key] = rule;
  }
  return out;
}

}  // namespace pert
