// A grid's run, merge and status (grid.hpp), and the shard rules every grid shares.
#include "pert/grid.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/grid_file.hpp"
#include "pert/json_util.hpp"
#include "pert/tokenizer.hpp"

namespace pert {

using nlohmann::json;
namespace fs = std::filesystem;

std::pair<int, int> parse_shard(const std::string& s) {
  int k = 0, n = 0;
  char slash = 0, extra = 0;
  std::istringstream in(s);
  if (!(in >> k >> slash >> n) || slash != '/' || (in >> extra) || n < 1 || k < 1 || k > n) return {0, 0};
  return {k, n};
}

void add_shard(json& report, const json& shard) {
  json& shards = report["shards"];
  if (!shards.is_array()) shards = json::array();
  if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
}

FileLock results_lock(const std::string& path) {
  FileLock lock(path);
  static bool warned = false;
  if (!lock.unlocked().empty() && !warned) {
    warned = true;
    std::fprintf(stderr, "pert: warning: %s: two runs writing this file at once could lose cells; give each its own\n",
                 lock.unlocked().c_str());
  }
  return lock;
}

std::string settings_difference(const json& have, const json& want) {
  json keys = want;
  keys.update(have);  // every key either side has; a missing one reads as null
  for (auto& [key, unused] : keys.items())
    if (have.value(key, json()) != want.value(key, json()))
      return key + " = " + json_brief(have.value(key, json())) + ", not " + json_brief(want.value(key, json()));
  return "";
}

std::string missing_cells_text(const std::vector<std::string>& missing) {
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 6; ++i) names += (i ? ", " : "") + missing[i];
  if (missing.size() > 6) names += ", and " + std::to_string(missing.size() - 6) + " more";
  return std::to_string(missing.size()) + (missing.size() == 1 ? " cell" : " cells") + " missing: " + names;
}

void check_whole(const std::string& command, const std::vector<std::string>& missing, const std::string& hint,
                 bool partial) {
  if (missing.empty()) return;
  const std::string m = command + " --merge: the grid is not whole, " + missing_cells_text(missing) + hint;
  if (!partial) throw Error(m + "; --partial merges what there is");
  std::fprintf(stderr, "pert: warning: %s\n", printable(m).c_str());
}

namespace {

struct Cell {
  int index;  // in the grid's enumeration: model-major, then config, then length
  std::string model, config;
  int length;
};

// "models/rope/" and "./models/rope" are one model: "models/rope".
std::string normal_dir(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  return (p.has_filename() ? p : p.parent_path()).string();
}

template <class T>
std::vector<T> unique_in_order(const std::vector<T>& v) {
  std::vector<T> out;
  for (const T& x : v)
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return out;
}

// The text is compared by its content ("another text"), every other setting by value.
void check_settings(const json& have, const json& want, const std::string& where) {
  const json a = comparable_settings(have), b = comparable_settings(want);
  const std::string differs = settings_difference(a, b);
  if (differs.empty()) return;
  throw ConfigError(where + ": made with " + (differs.rfind("text_hash = ", 0) == 0 ? "another text" : differs) +
                    "; use another --out or the same settings");
}

// Each config's row label: the one given, else the file's name ("plain" for the keyword), else,
// where two configs would share a name, the path as given.
std::vector<std::string> config_labels(const std::vector<std::string>& configs, const std::vector<std::string>& given) {
  if (!given.empty() && given.size() != configs.size())
    throw Error("--label: " + std::to_string(given.size()) + " labels for " + std::to_string(configs.size()) +
                " --config values; give one per --config, in order");
  std::vector<std::string> labels = given;
  if (labels.empty()) {
    std::map<std::string, int> uses;
    for (const std::string& c : configs) ++uses[config_stem(c)];
    for (const std::string& c : configs) labels.push_back(uses[config_stem(c)] > 1 ? c : config_stem(c));
  }
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (labels[i] == labels[j])
        throw Error("--label: '" + labels[i] + "' names two configs (" + configs[j] + ", " + configs[i] + ")");
  return labels;
}

// One label, one config: rows of different content never share a name in a table or plot.
void check_labels(const json& cells, const std::string& where) {
  std::map<std::string, std::string> hash_of;
  for (const json& c : cells) {
    const std::string label = c["label"], hash = c["config_hash"];
    if (hash_of.emplace(label, hash).first->second != hash)
      throw ConfigError(where + ": the label '" + label + "' would name two different configs (" + c["config"].get<std::string>() +
                        " is not the one it names already); give this one another --label");
  }
}

// `cells` added to `sweep` where it lacks them (one cell per key: the one there first stays,
// unless it is an error cell and the new one ran).
// Returns how many of `cells` were left out although their result differs from the one kept.
int add_cells(json& sweep, const json& cells, const std::string& where) {
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < sweep["cells"].size(); ++i) at.emplace(cell_key(sweep["cells"][i]), i);
  json both = sweep["cells"];
  both.insert(both.end(), cells.begin(), cells.end());
  check_same_weights(both, where);  // before a cell of other weights is dropped as a duplicate
  int differing = 0;
  for (const json& c : cells) {
    const auto [it, added] = at.emplace(cell_key(c), sweep["cells"].size());
    if (added) {
      sweep["cells"].push_back(c);
    } else if (sweep["cells"][it->second].contains("error") && !c.contains("error")) {
      sweep["cells"][it->second] = c;  // a cell that ran replaces one that could not (a rerun, e.g. with allow_scheme_change)
    } else {
      const json& kept = sweep["cells"][it->second];
      for (const char* result : {"ppl", "attention", "error"}) differing += kept.value(result, json()) != c.value(result, json());
    }
  }
  check_labels(sweep["cells"], where);
  return differing;
}

// The results file as read (null when there is none yet) made the sweep to add to: an empty
// one, or the file's, whose settings must be `settings`.
json with_settings(json sweep, const json& settings, const std::string& out) {
  if (sweep.is_null()) return {{"pert_sweep", 1}, {"settings", settings}, {"cells", json::array()}};
  check_settings(sweep["settings"], settings, out);
  const bool allowed = sweep["settings"].value("allow_scheme_change", false);
  sweep["settings"] = settings;  // the text as spelled now, its hash, every default written out
  if (allowed) sweep["settings"]["allow_scheme_change"] = true;  // some cells may have run with it
  return sweep;
}

// Grid entries named as tables name them ("rope plain @256").
std::vector<std::string> cell_names(const json& entries) {
  std::vector<std::string> names;
  for (const json& g : entries) names.push_back(cell_name(g));
  return names;
}

// The results file as it is now (another shard's cells included), or null. Call with its lock held.
json read_out(const GridRequest& r, const Measure& measure) {
  return fs::exists(r.out) ? read_grid_file(r.out, measure) : json();
}

// Cells grouped by model and config, lengths ascending, written to the JSON and the CSV. Call
// with the file's lock held.
void finish(const GridRequest& r, const Measure& measure, json& sweep) {
  order_cells(sweep["cells"]);
  sweep["pert_version"] = PERT_VERSION;
  write_file(r.out, json_file_text(sweep));
  write_file(grid_csv_path(r), measure.csv(sweep));
}

// Writers of one file (the shards of a Slurm array, a rerun beside the first run) take turns:
// each re-reads the file under its lock, adds the cells it made that the file lacks and replaces
// it, so no writer's cells are lost. Returns what was written.
// `grid`: every cell this run was asked for, all shards'; `shard`: its K/N.
json save(const GridRequest& r, const Measure& measure, const json& settings, const json& made, const json& grid,
          const std::string& shard) {
  std::optional<FileLock> lock;  // no `out`: a quick look, nothing read or written
  if (!r.out.empty()) lock.emplace(results_lock(r.out));
  json sweep = with_settings(read_out(r, measure), settings, r.out);
  add_cells(sweep, made, r.out);
  add_grid(sweep, grid);
  add_shard(sweep, shard);
  if (r.out.empty())
    order_cells(sweep["cells"]);
  else
    finish(r, measure, sweep);
  return sweep;
}

}  // namespace

std::string grid_csv_path(const GridRequest& r) {
  return r.csv.empty() && !r.out.empty() ? fs::path(r.out).replace_extension(".csv").string() : r.csv;
}

json read_grid_file(const std::string& file, const Measure& measure) {
  json sweep = read_sweep(file);
  const std::string kind = sweep["settings"].value("measure", "perplexity");
  if (kind != measure.name())
    throw FormatError(file + ": a pert file of " + kind + " cells, not " + measure.name() + " (" +
                      (kind == "attention" ? "pert attention" : "pert sweep") + " reads it)");
  return sweep;
}

json merge_grid(const std::vector<std::string>& parts, const GridRequest& r, Measure& measure) {
  const FileLock lock = results_lock(r.out);
  json merged = read_out(r, measure);
  std::vector<std::string> gridless;
  for (const std::string& file : parts) {
    const json part = read_grid_file(file, measure);
    if (merged.is_null())
      merged = {{"pert_sweep", 1}, {"settings", part["settings"]}, {"cells", json::array()}};
    else
      check_settings(part["settings"], merged["settings"], file);
    if (part["settings"].value("allow_scheme_change", false)) merged["settings"]["allow_scheme_change"] = true;
    if (const int differing = add_cells(merged, part["cells"], file))
      std::fprintf(stderr, "pert: warning: %s: %d of its cells differ from the ones %s has already, which were kept\n",
                   file.c_str(), differing, fs::exists(r.out) ? r.out.c_str() : "the files before it");
    if (!part.contains("grid")) gridless.push_back(file);
    add_grid(merged, part.value("grid", json::array()));
    for (const json& k : part.value("shards", json::array())) add_shard(merged, k);
  }
  for (const std::string& file : gridless)
    std::fprintf(stderr, "pert: warning: %s: no grid recorded (written before sweeps kept one): its missing cells, if any, cannot "
                 "be named\n", file.c_str());
  check_whole(r.command, cell_names(missing_cells(merged["grid"], merged["cells"])),
              " (`pert " + r.command + " --status` shows each shard's)", r.partial);
  finish(r, measure, merged);
  return merged;
}

json grid_status(const std::vector<std::string>& status_files, const Measure& measure) {
  json files = json::array(), cells = json::array();
  json all = {{"grid", json::array()}};
  for (const std::string& file : status_files) {
    const json sweep = read_grid_file(file, measure);
    std::vector<std::pair<int, int>> shards;
    for (const json& k : sweep.value("shards", json::array())) {
      const auto kn = parse_shard(k.get<std::string>());
      if (kn.second) shards.push_back(kn);
    }
    json share = json::array();  // the grid entries this file's shards were to run
    for (const json& g : sweep.value("grid", json::array()))
      for (const auto& [k, n] : shards)
        if (g["index"].get<int>() % n == k - 1) {
          share.push_back(g);
          break;
        }
    int failed = 0;
    for (const json& c : sweep["cells"]) failed += c.contains("error");
    const json missing = missing_cells(share, sweep["cells"]);
    files.push_back({{"file", file}, {"shards", sweep.value("shards", json::array())}, {"grid", sweep.contains("grid")},
                     {"share", share.size()}, {"done", sweep["cells"].size()}, {"failed", failed},
                     {"missing", missing.size()}});
    add_grid(all, sweep.value("grid", json::array()));
    cells.insert(cells.end(), sweep["cells"].begin(), sweep["cells"].end());
  }
  const json missing = missing_cells(all["grid"], cells);
  std::set<std::string> keys;
  int failed = 0;
  for (const json& c : cells)
    if (keys.insert(cell_key(c)).second) failed += c.contains("error");
  return {{"files", files},  {"grid", all["grid"].size()}, {"done", keys.size()},
          {"failed", failed}, {"missing", missing.size()}, {"missing_cells", cell_names(missing)}};
}

std::string grid_status_table(const json& report) {
  std::ostringstream o;
  o << "| file | shards | its share | done | failed | missing |\n|---|---|---:|---:|---:|---:|\n";
  for (const json& f : report["files"]) {
    std::string shards;
    for (const json& k : f["shards"]) shards += (shards.empty() ? "" : " ") + printable(k.get<std::string>());
    o << "| " << printable(f["file"].get<std::string>()) << " | " << (shards.empty() ? "—" : shards) << " | "
      << (f["grid"].get<bool>() ? std::to_string(f["share"].get<size_t>()) : "—") << " | " << f["done"] << " | "
      << f["failed"] << " | " << (f["grid"].get<bool>() ? std::to_string(f["missing"].get<size_t>()) : "—") << " |\n";
  }
  const std::vector<std::string> missing = report["missing_cells"];
  o << "\ngrid: " << report["grid"] << " cells, " << report["done"] << " done (" << report["failed"] << " failed), "
    << (missing.empty() ? "none missing" : printable(missing_cells_text(missing))) << "\n";
  return o.str();
}

json run_grid(const GridRequest& r, Measure& measure, GridOutcome* outcome) {
  const EvalSpec& spec = measure.spec();
  const auto [shard_k, shard_n] = r.shard.empty() ? std::pair{1, 1} : parse_shard(r.shard);
  const std::vector<std::string> configs = unique_in_order(r.configs.empty() ? std::vector<std::string>{kPlain} : r.configs);
  if (configs.size() != (r.configs.empty() ? 1 : r.configs.size()) && !r.labels.empty())
    throw Error("--label: a --config is given twice");
  std::map<std::string, std::string> label_of, hash_of;  // by config as given
  const std::vector<std::string> labels = config_labels(configs, r.labels);
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string& c = configs[i];
    hash_of[c] = config_hash(c);  // an inline config that is not JSON is refused here, naming it
    if (hash_of[c].rfind("missing ", 0) == 0) throw IoError(c + ": --config file not found");
    label_of[c] = labels[i];
  }

  std::vector<std::string> models;
  std::map<std::string, std::string> weights_of;  // model dir -> model_hash
  for (const std::string& m : r.models) {
    models.push_back(normal_dir(m));
    weights_of[models.back()] = model_hash(models.back());
  }
  models = unique_in_order(models);
  const std::vector<int> lengths = unique_in_order(r.lengths);
  auto cells_of = [&](const std::string& shard) {
    std::vector<Cell> cells;
    for (const GridPlace& p : grid_places(models.size(), configs.size(), lengths.size(), shard))
      cells.push_back({p.index, models[p.model], configs[p.config], lengths[p.length]});
    return cells;
  };
  const std::vector<Cell> cells = cells_of(""), mine = cells_of(r.shard);
  json grid = json::array();  // every cell, all shards': what merges and statuses hold the files to
  for (const Cell& c : cells)
    grid.push_back({{"model", c.model}, {"label", label_of[c.config]}, {"config", c.config},
                    {"config_hash", hash_of[c.config]}, {"length", c.length}, {"index", c.index}});
  const std::string shard = std::to_string(shard_k) + "/" + std::to_string(shard_n);

  json settings;
  json sweep;
  {
    std::optional<FileLock> lock;
    if (!r.out.empty()) lock.emplace(results_lock(r.out));
    json found = read_out(r, measure);
    settings = measure.settings(found.is_null() ? json() : found["settings"], r.out);
    settings["text_hash"] = content_hash(spec.text_file);
    // "auto" is recorded as "f32" unless a model is a GGUF file (whose own types it then means).
    const bool gguf = std::any_of(r.models.begin(), r.models.end(), [](const std::string& m) { return is_gguf_file(m); });
    settings["dtype"] = r.dtype == "auto" && !gguf ? "f32" : r.dtype;
    settings["cache_type"] = r.cache_type;
    settings["set"] = r.overrides.sets;
    settings["allow_scheme_change"] = r.overrides.allow_scheme_change;
    sweep = with_settings(std::move(found), settings, r.out);
  }
  std::map<std::string, bool> done;  // (a refused cell is done unless the scheme change is now allowed)
  auto mark_done = [&](const json& c) { done[cell_key(c)] = done[cell_key(c)] || !(r.overrides.allow_scheme_change && scheme_refused(c)); };
  for (const json& c : sweep["cells"]) mark_done(c);
  json planned = sweep["cells"];
  for (const std::string& c : configs)
    planned.push_back({{"model", "?"}, {"config", c}, {"label", label_of[c]}, {"config_hash", hash_of[c]}});
  check_labels(planned, r.out.empty() ? "--label" : r.out);
  planned = sweep["cells"];
  for (const auto& [m, hash] : weights_of) planned.push_back({{"model", m}, {"model_hash", hash}});
  check_same_weights(planned, r.out);

  std::vector<GridCell> to_run;
  for (const Cell& c : mine)
    to_run.push_back({c.index, c.model, c.config, label_of[c.config], hash_of[c.config], weights_of[c.model], c.length});
  auto key = [&](const GridCell& c) { return cell_key(c.model, c.config_hash, c.length); };
  if (!r.quiet) {
    int todo = 0;
    for (const GridCell& c : to_run) todo += !done[key(c)];
    std::fprintf(stderr, "%s: %zu cells, %zu in shard %d/%d, %d to run\n", r.command.c_str(), cells.size(), mine.size(),
                 shard_k, shard_n, todo);
  }
  json made = json::array();  // the cells this run made
  run_cells(to_run, r, measure, [&](const GridCell& c) { return done[key(c)]; },
            [&](json& c, int ran, int todo, const std::string& name) {
              if (c.contains("error"))
                std::fprintf(stderr, "[%d/%d] %s: error: %s\n", ran, todo, name.c_str(), c["error"].get<std::string>().c_str());
              else if (!r.quiet)
                std::fprintf(stderr, "[%d/%d] %s: %s, %.1f s\n", ran, todo, name.c_str(), measure.summary(c).c_str(),
                             c["seconds"].get<double>());
              made.push_back(c);
              sweep = save(r, measure, settings, made, grid, shard);  // after every cell, so an interrupted grid resumes
              for (const json& other : sweep["cells"]) mark_done(other);  // cells other writers made meanwhile
            });
  sweep = save(r, measure, settings, made, grid, shard);
  if (outcome) {
    std::map<std::string, bool> failed;  // cell key -> an error cell
    for (const json& c : sweep["cells"]) failed[cell_key(c)] = c.contains("error");
    *outcome = {};
    for (const GridCell& c : to_run)
      if (const auto it = failed.find(key(c)); it != failed.end()) ++outcome->cells, outcome->failed += it->second;
  }
  return sweep;
}

}  // namespace pert
