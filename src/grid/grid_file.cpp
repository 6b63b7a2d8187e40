// A sweep file read and checked field by field, its older forms completed, the grid its runs
// asked for and what of it is missing, its cells in table order (pert/grid_file.hpp).
#include "pert/grid_file.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "pert/config.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool is_int(const json& v) { return v.is_number_integer() && v.get<long long>() >= 0 && v.get<long long>() <= (1 << 30); }

// The fields a cell may carry and the type each must have (results only without "error").
struct FieldRule {
  const char* key;
  bool (*ok)(const json&);
  const char* what;
  bool result;
};
const FieldRule kCellFields[] = {
    {"model", [](const json& v) { return v.is_string(); }, "a string", false},
    {"config", [](const json& v) { return v.is_string(); }, "a string", false},
    {"length", [](const json& v) { return is_int(v) && v.get<int>() >= 2; }, "an integer >= 2", false},
    {"index", is_int, "an integer >= 0", false},
    {"label", [](const json& v) { return v.is_string(); }, "a string", false},
    {"config_hash", [](const json& v) { return v.is_string(); }, "a string", false},
    {"model_hash", [](const json& v) { return v.is_string(); }, "a string", false},
    {"trained_length", is_int, "an integer >= 0", false},
    {"position", [](const json& v) { return v.is_string(); }, "a string", false},
    {"position_label", [](const json& v) { return v.is_string(); }, "a string", false},
    {"error", [](const json& v) { return v.is_string(); }, "a string", false},
    {"pert_version", [](const json& v) { return v.is_string(); }, "a string", false},
    {"ppl", [](const json& v) { return v.is_number(); }, "a number", true},
    {"ppl_stderr", [](const json& v) { return v.is_number(); }, "a number", true},
    {"nll", [](const json& v) { return v.is_number(); }, "a number", true},
    {"tokens", is_int, "an integer >= 0", true},
    {"windows", is_int, "an integer >= 0", true},
    {"seconds", [](const json& v) { return v.is_number(); }, "a number", true},
    {"tokens_per_second", [](const json& v) { return v.is_number(); }, "a number", true},
};

// An attention cell's result (attention_report.hpp's attention_json) as tables and CSVs read it:
// "layers", "heads", "windows" counts, "buckets" [[first, last]...], "queries" per range, and
// per range each statistic [layers][heads] of numbers or nulls (mass [layers][heads][buckets]).
void check_attention_cell(const json& c, const std::string& at) {
  auto count = [&](const char* key) {
    if (!c.contains(key) || !is_int(c[key])) throw FormatError(at + "\"" + key + "\" must be an integer >= 0");
    return c[key].get<size_t>();
  };
  const size_t layers = count("layers"), heads = count("heads");
  count("windows");
  if (!c.contains("seconds") || !c["seconds"].is_number()) throw FormatError(at + "\"seconds\" must be a number");
  if (!c.contains("buckets") || !c["buckets"].is_array()) throw FormatError(at + "\"buckets\" must be an array");
  for (const json& b : c["buckets"])
    if (!b.is_array() || b.size() != 2 || !is_int(b[0]) || !is_int(b[1]))
      throw FormatError(at + "\"buckets\" must hold [first, last] distances, got " + json_brief(b));
  const size_t buckets = c["buckets"].size();
  if (!c.contains("attention") || !c["attention"].is_object() || !c["attention"].contains("all"))
    throw FormatError(at + "\"attention\" must be an object with \"all\"");
  if (!c.contains("queries") || !c["queries"].is_object()) throw FormatError(at + "\"queries\" must be an object");
  for (auto& [range, stats] : c["attention"].items()) {
    const std::string r = at + "attention." + range;
    if (range != "all" && range != "in_L" && range != "past_L") throw FormatError(r + ": not a query range (all, in_L, past_L)");
    if (!c["queries"].contains(range) || !is_int(c["queries"][range]))
      throw FormatError(at + "queries." + range + " must be an integer >= 0");
    for (const char* name : {"entropy", "sink_mass", "mean_distance", "max_weight", "mass"}) {
      const json* v = stats.is_object() && stats.contains(name) ? &stats[name] : nullptr;
      const size_t inner = name == std::string("mass") ? buckets : 0;
      bool ok = v && v->is_array() && v->size() == layers;
      for (size_t l = 0; ok && l < layers; ++l) {
        ok = (*v)[l].is_array() && (*v)[l].size() == heads;
        for (size_t h = 0; ok && h < heads; ++h) {
          const json& x = (*v)[l][h];
          ok = inner ? x.is_array() && x.size() == inner : x.is_number() || x.is_null();
          for (size_t k = 0; ok && inner && k < inner; ++k) ok = x[k].is_number() || x[k].is_null();
        }
      }
      if (!ok)
        throw FormatError(r + "." + name + " must be [" + std::to_string(layers) + " layers][" + std::to_string(heads) +
                          " heads]" + (inner ? "[" + std::to_string(inner) + " buckets]" : "") + " of numbers");
    }
  }
}

// Where an older file left a field out, what it meant. Each model's hash, config's hash and
// (model, config)'s scheme is worked out once per file: 20,000 cells naming one 4 MB config
// would read it 20,000 times (and hashing a model reads its weights).
struct Completions {
  std::map<std::string, std::string> model_hash, config_hash, position_label;
};

void complete_cell(json& c, Completions& known) {
  const std::string config = c["config"];
  if (!c.contains("label")) c["label"] = config_stem(config);
  if (!c.contains("config_hash")) {
    auto it = known.config_hash.find(config);
    if (it == known.config_hash.end()) it = known.config_hash.emplace(config, config_hash(config)).first;
    c["config_hash"] = it->second;
  }
  const std::string model = c["model"];
  if (!c.contains("model_hash")) {  // the weights as they are now
    auto it = known.model_hash.find(model);
    if (it == known.model_hash.end()) it = known.model_hash.emplace(model, model_hash(model)).first;
    c["model_hash"] = it->second;
  }
  if (!c.contains("position_label")) {  // the scheme that ran, from the configs as they are now
    auto it = known.position_label.find(model + "\n" + config);
    if (it == known.position_label.end()) {
      std::string label = "?";
      try {
        ConfigOverrides o;
        if (config != kPlain) o.files.push_back(config);
        const fs::path path = fs::path(model) / "config.json";
        label = position_label(parse_model_config(apply_overrides(read_json_file(path), o), path.string()));
      } catch (const Error&) {
      }
      it = known.position_label.emplace(model + "\n" + config, label).first;
    }
    c["position_label"] = it->second;
  }
}

}  // namespace

json read_sweep(const fs::path& path) { return parse_sweep(read_json_file(path), path.string()); }

json parse_sweep(json j, const std::string& source) {
  const std::string where = source + ": ";
  if (!j.is_object() || !j.contains("pert_sweep")) throw FormatError(where + "not a pert sweep file");
  if (j["pert_sweep"] != 1) throw FormatError(where + "pert_sweep must be 1, got " + json_brief(j["pert_sweep"]));
  if (!j.contains("settings") || !j["settings"].is_object()) throw FormatError(where + "settings must be an object");
  if (!j.contains("cells") || !j["cells"].is_array()) throw FormatError(where + "cells must be an array");
  json& s = j["settings"];
  if (!s.contains("text") || !s["text"].is_string()) throw FormatError(where + "settings.text must be a string");
  for (const char* key : {"mode", "dtype", "cache_type", "text_hash"})
    if (s.contains(key) && !s[key].is_string()) throw FormatError(where + "settings." + key + " must be a string");
  for (const char* key : {"split_docs", "allow_scheme_change"})
    if (s.contains(key) && !s[key].is_boolean()) throw FormatError(where + "settings." + key + " must be true or false");
  if (s.contains("key_config")) {
    bool strings = s["key_config"].is_array();
    for (const json& c : strings ? s["key_config"] : json::array()) strings &= c.is_string();
    if (!strings) throw FormatError(where + "settings.key_config must be an array of strings, got " + json_brief(s["key_config"]));
  }
  if (!s.contains("dtype")) s["dtype"] = "f32";  // files from before --dtype
  if (!s.contains("cache_type")) s["cache_type"] = "f32";  // files from before --cache-type
  if (!s.contains("set")) s["set"] = json::array();  // files from before sweep's --set
  if (!s.contains("allow_scheme_change")) s["allow_scheme_change"] = false;
  if (s.contains("measure") && s["measure"] != "perplexity" && s["measure"] != "attention")
    throw FormatError(where + "settings.measure must be \"perplexity\" or \"attention\", got " + json_brief(s["measure"]));
  const bool attention = s.value("measure", "") == "attention";
  Completions known;
  for (size_t i = 0; i < j["cells"].size(); ++i) {
    json& c = j["cells"][i];
    const std::string at = where + "cell " + std::to_string(i) + ": ";
    if (!c.is_object()) throw FormatError(at + "must be an object");
    if (attention && !c.contains("error")) check_attention_cell(c, at);
    for (const FieldRule& r : kCellFields) {
      if (r.result && attention) continue;
      const bool needed = !r.result ? (r.key == std::string("model") || r.key == std::string("config") ||
                                       r.key == std::string("length"))
                                    : !c.contains("error");
      if (!c.contains(r.key)) {
        if (needed) throw FormatError(at + "lacks \"" + r.key + "\"" + (r.result ? " (and has no \"error\")" : ""));
        continue;
      }
      if (!r.ok(c[r.key])) throw FormatError(at + "\"" + r.key + "\" must be " + r.what + ", got " + json_brief(c[r.key]));
    }
    complete_cell(c, known);
  }
  if (j.contains("grid")) {
    if (!j["grid"].is_array()) throw FormatError(where + "grid must be an array");
    for (size_t i = 0; i < j["grid"].size(); ++i) {
      const json& g = j["grid"][i];
      const std::string at = where + "grid entry " + std::to_string(i) + ": ";
      if (!g.is_object()) throw FormatError(at + "must be an object");
      for (const FieldRule& r : kCellFields) {
        const std::string key = r.key;
        if (key != "model" && key != "config" && key != "length" && key != "index" && key != "label" && key != "config_hash")
          continue;
        if (!g.contains(key)) throw FormatError(at + "lacks \"" + key + "\"");
        if (!r.ok(g[key])) throw FormatError(at + "\"" + key + "\" must be " + r.what + ", got " + json_brief(g[key]));
      }
    }
  }
  if (j.contains("shards")) {
    if (!j["shards"].is_array()) throw FormatError(where + "shards must be an array");
    for (const json& k : j["shards"])
      if (!k.is_string()) throw FormatError(where + "shards must hold strings (K/N), got " + json_brief(k));
  }
  return j;
}

void add_grid(json& sweep, const json& grid) {
  if (!sweep.contains("grid")) sweep["grid"] = json::array();
  std::set<std::string> have;
  for (const json& g : sweep["grid"]) have.insert(cell_key(g));
  for (const json& g : grid)
    if (have.insert(cell_key(g)).second) sweep["grid"].push_back(g);
}

json missing_cells(const json& grid, const json& cells) {
  std::set<std::string> have;
  for (const json& c : cells) have.insert(cell_key(c));
  json missing = json::array();
  for (const json& g : grid)
    if (!have.count(cell_key(g))) missing.push_back(g);
  return missing;
}

std::string cell_name(const json& c) {
  return model_name(c["model"]) + " " + c.value("label", config_stem(c["config"])) + " @" + std::to_string(c["length"].get<int>());
}

bool scheme_refused(const json& cell) { return cell.contains("error") && !cell.contains("position"); }

void order_cells(json& cells) {
  std::map<std::string, size_t> model_rank, row_rank;
  for (const json& c : cells) {
    const std::string model = real_path(c["model"]);
    model_rank.emplace(model, model_rank.size());
    row_rank.emplace(model + "\n" + c["config_hash"].get<std::string>(), row_rank.size());
  }
  // Each cell's rank once (a real path is a filesystem call), then the cells in rank order.
  std::vector<std::pair<std::tuple<size_t, size_t, int>, size_t>> order;
  for (size_t i = 0; i < cells.size(); ++i) {
    const json& c = cells[i];
    const std::string model = real_path(c["model"]);
    order.push_back({{model_rank[model], row_rank[model + "\n" + c["config_hash"].get<std::string>()],
                      c["length"].get<int>()},
                     i});
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  json sorted = json::array();
  for (const auto& [rank, i] : order) sorted.push_back(std::move(cells[i]));
  cells = std::move(sorted);
}

}  // namespace pert
