#include "pert/grid_file.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "pert/config.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;
namespace fs = std::filesystem;

std::string real_path(const std::string& p) {
  std::error_code ec;
  const fs::path r = fs::weakly_canonical(p, ec);
  return ec ? fs::path(p).lexically_normal().string() : r.string();
}

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

std::string csv_number(const json& v) { return v.is_null() ? "" : v.dump(); }


}  // namespace

std::string config_stem(const std::string& config) {
  if (config == kPlain) return kPlain;
  return is_inline_config(config) ? read_config_patch(config).dump() : fs::path(config).stem().string();
}

std::string config_hash(const std::string& config) {
  if (config == kPlain) return kPlain;
  if (is_inline_config(config)) return bytes_hash(read_config_patch(config).dump());
  std::error_code ec;
  return fs::is_regular_file(config, ec) ? content_hash(config) : "missing " + config;
}

std::string model_name(const std::string& dir) {
  const fs::path p = fs::path(dir).lexically_normal();
  return (p.has_filename() ? p : p.parent_path()).filename().string();
}

std::map<std::string, std::string> model_names(const json& cells) {
  std::map<std::string, std::string> path_of_name, name;
  std::map<std::string, bool> clash;
  for (const json& c : cells) {
    const std::string model = c["model"], key = real_path(model), n = model_name(model);
    if (path_of_name.count(n) && path_of_name[n] != key) clash[n] = true;
    path_of_name[n] = key;
  }
  for (const json& c : cells) {
    const std::string model = c["model"];
    name[model] = clash[model_name(model)] ? fs::path(model).lexically_normal().string() : model_name(model);
  }
  return name;
}

namespace {

constexpr uint64_t kFnvBasis = 14695981039346656037ull;
uint64_t fnv(uint64_t h, const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(p[i])) * 1099511628211ull;
  return h;
}

std::string hex16(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return hex;
}

}  // namespace

std::string bytes_hash(std::string_view bytes) { return hex16(fnv(kFnvBasis, bytes.data(), bytes.size())); }

std::string content_hash(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open");
  uint64_t h = kFnvBasis;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h = fnv(h, buf, size_t(in.gcount()));
    if (in.eof()) break;
  }
  return hex16(h);
}

std::string model_hash(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename() == "config.json" || e.path().extension() == ".safetensors") files.push_back(e.path());
  if (ec || files.empty()) return "missing " + dir;
  std::sort(files.begin(), files.end());
  uint64_t h = kFnvBasis;
  std::vector<char> block(1 << 16);
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    const uintmax_t size = fs::file_size(f, ec);
    if (ec) return "missing " + f.string();
    h = fnv(fnv(h, name.data(), name.size()), reinterpret_cast<const char*>(&size), sizeof size);
    std::ifstream in(f, std::ios::binary);
    // The whole file when small, else its first block (the header) and 64 spread over the rest.
    const uintmax_t blocks = (size + block.size() - 1) / block.size();
    for (uintmax_t i = 0, step = std::max<uintmax_t>(1, blocks / 64); i < blocks; i += (i == 0 ? 1 : step)) {
      in.seekg(std::streamoff(i * block.size()));
      in.read(block.data(), std::streamsize(block.size()));
      h = fnv(h, block.data(), size_t(in.gcount()));
      in.clear();
    }
  }
  return hex16(h);
}

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

json comparable_settings(const json& settings) {
  json s = settings;
  if (!s.contains("text_hash")) {
    std::error_code ec;
    const std::string text = s.value("text", "");
    s["text_hash"] = fs::is_regular_file(text, ec) ? content_hash(text) : "missing " + text;
  }
  s.erase("text");
  s.erase("text_path");
  // It only lets a cell run that would otherwise be refused: a cell that ran either way is the
  // same, so a grid may be re-run with it into the file that has its refused cells.
  s.erase("allow_scheme_change");
  return s;
}

bool scheme_refused(const json& cell) { return cell.contains("error") && !cell.contains("position"); }

std::string cell_key(const std::string& model, const std::string& config_hash, int length) {
  return real_path(model) + "\n" + config_hash + "\n" + std::to_string(length);
}

std::string cell_key(const json& c) { return cell_key(c["model"], c["config_hash"], c["length"]); }

void check_same_weights(const json& cells, const std::string& where) {
  std::map<std::string, std::string> hash_of;
  for (const json& c : cells) {
    const std::string model = c["model"], hash = c["model_hash"];
    if (hash_of.emplace(real_path(model), hash).first->second != hash)
      throw FormatError(where + ": cells of " + model + " come from other weights than its directory holds now (or " +
                        "than other cells'); re-run them into another --out, or delete that file");
  }
}

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

std::string markdown_table(const json& cells, const std::string& value) {
  struct Row {
    std::string model, label, positions;
    int trained = 0;
    std::map<int, const json*> at;
  };
  std::vector<Row> rows;
  std::map<std::string, size_t> row_of;
  std::vector<int> lengths;
  const std::map<std::string, std::string> names = model_names(cells);
  for (const json& c : cells) {
    const std::string key = real_path(c["model"]) + "\n" +
                            c["config_hash"].get<std::string>();
    if (!row_of.count(key)) {
      row_of[key] = rows.size();
      rows.push_back({names.at(c["model"]), c["label"], c.value("position_label", "?"), 0, {}});
    }
    Row& row = rows[row_of[key]];
    row.at[c["length"]] = &c;
    if (c.contains("trained_length")) row.trained = c["trained_length"];
    if (std::find(lengths.begin(), lengths.end(), c["length"].get<int>()) == lengths.end()) lengths.push_back(c["length"]);
  }
  std::sort(lengths.begin(), lengths.end());
  int shared_L = -1;  // the trained length every row that knows one shares, else 0
  for (const Row& r : rows)
    if (r.trained > 0) shared_L = shared_L < 0 || shared_L == r.trained ? r.trained : 0;
  shared_L = std::max(shared_L, 0);
  std::ostringstream o;
  o << "| model | config | positions |";
  for (int n : lengths) o << ' ' << n << (n == shared_L ? " (L)" : "") << " |";
  o << "\n|---|---|---|";
  for (size_t i = 0; i < lengths.size(); ++i) o << "---:|";
  o << '\n';
  bool any_trained = false;
  for (const Row& row : rows) {
    o << "| " << row.model << " | " << row.label << " | " << row.positions << " |";
    any_trained |= row.trained > 0;
    for (int n : lengths) {
      auto it = row.at.find(n);
      const json* c = it == row.at.end() ? nullptr : it->second;
      char v[64] = "";
      if (c && c->contains(value) && (*c)[value].is_number())
        std::snprintf(v, sizeof v, shared_L == 0 && row.trained == n ? "**%.2f**" : "%.2f", (*c)[value].get<double>());
      else if (c)
        std::snprintf(v, sizeof v, "—");
      o << ' ' << v;
      if (c && value != "ppl" && c->contains("key_tokens")) o << " (" << (*c)["key_tokens"].get<long long>() << ")";
      o << " |";
    }
    o << '\n';
  }
  if (shared_L == 0 && any_trained) o << "\nBold: the model's trained length.\n";
  std::map<std::string, bool> told;  // each distinct reason once
  for (const json& c : cells)
    if (c.contains("error") && !told[c["error"]]) {
      told[c["error"]] = true;
      o << "\n— " << names.at(c["model"]) << " " << c["label"].get<std::string>() << " @" << c["length"].get<int>()
        << ": " << c["error"].get<std::string>() << "\n";
    }
  return o.str();
}

// The evaluator's configs (settings.key_config) in one CSV field, space-separated as on the command line.
std::string key_configs(const json& settings) {
  std::string joined;
  for (const json& c : settings.value("key_config", json::array())) joined += (joined.empty() ? "" : " ") + c.get<std::string>();
  return joined;
}

std::string csv_text(const json& sweep) {
  const json& s = sweep["settings"];
  const std::string shared = csv_field(s.value("mode", "chunks")) + ',' + (s.value("split_docs", false) ? "true" : "false") +
                             ',' + csv_field(s.value("dtype", "f32")) + ',' + csv_field(s.value("cache_type", "f32"));
  std::ostringstream o;
  // Key tokens (LongPPL), where the sweep chose them: their settings and results after the rest.
  const bool keys = s.value("key_tokens", false);
  const char* key_fields[] = {"key_tokens", "key_candidates", "key_ppl", "key_ppl_stderr", "key_nll"};
  std::string key_shared;
  if (keys)
    key_shared = ',' + csv_number(s.value("key_short", json())) + ',' + csv_number(s.value("key_step", json())) + ',' +
                 csv_number(s.value("key_alpha", json())) + ',' + csv_number(s.value("key_beta", json())) + ',' +
                 csv_field(s.value("key_model", "")) + ',' + csv_field(key_configs(s));
  o << "model,config,label,positions,length,trained_length,mode,split_docs,dtype,cache_type,ppl,ppl_stderr,nll,tokens,windows,"
       "seconds,tokens_per_second,pert_version,error"
    << (keys ? ",key_short,key_step,key_alpha,key_beta,key_model,key_config,key_tokens,key_candidates,key_ppl,key_ppl_stderr,"
               "key_nll"
             : "")
    << '\n';
  for (const json& c : sweep["cells"]) {
    o << csv_field(c["model"]) << ',' << csv_field(c["config"]) << ',' << csv_field(c["label"]) << ','
      << csv_field(c.value("position_label", "")) << ',' << c["length"] << ',' << csv_number(c.value("trained_length", json()))
      << ',' << shared;
    for (const char* key : {"ppl", "ppl_stderr", "nll", "tokens", "windows", "seconds", "tokens_per_second"})
      o << ',' << csv_number(c.value(key, json()));
    o << ',' << csv_field(c.value("pert_version", "")) << ',' << csv_field(c.value("error", ""));
    if (keys) {
      o << key_shared;
      for (const char* key : key_fields) o << ',' << csv_number(c.value(key, json()));
    }
    o << '\n';
  }
  return o.str();
}


std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

}  // namespace pert
