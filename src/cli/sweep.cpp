// A grid command's cells (sweep.hpp): every (model, config, length) cell measured, as a Markdown
// table, JSON and CSV. Resumable (cells already in --out are skipped), shardable (--shard K/N
// takes a fixed share of the cells) and mergeable (--merge joins the shards' files). `pert
// sweep`'s measure, perplexity, is here too.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "evaluate.hpp"
#include "sweep.hpp"
#include "sweep_file.hpp"
#include "task_grid.hpp"
#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/json_util.hpp"

namespace pert::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct SweepArgs {
  std::vector<std::string> models, configs, labels, merge, status;
  std::vector<int> lengths;
  std::string out, csv, shard;
  int threads = 0;
  bool quiet = false, json = false, partial = false;
  ConfigFlags overrides;  // --set, --allow-scheme-change and --dtype for every cell
  std::string command;    // "sweep", "attention"
  std::shared_ptr<Measure> measure;
};

struct Cell {
  int index;  // in the sweep's enumeration: model-major, then config, then length
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

void check_settings(const json& have, const json& want, const std::string& where) {
  const json a = comparable_settings(have), b = comparable_settings(want);
  json keys = b;
  keys.update(a);  // every key either side has; a missing one reads as null
  for (auto& [key, unused] : keys.items())
    if (a.value(key, json()) != b.value(key, json()))
      throw ConfigError(where + ": made with " + (key == "text_hash" ? "another text" : key + " = " + json_brief(a.value(key, json())) +
                                                                         ", not " + json_brief(b.value(key, json()))) +
                        "; use another --out or the same settings");
}

// Each --config's row label: --label if given, else the file's name ("plain" for the keyword),
// else, where two configs would share a name, the path as given.
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

// The CSV beside the JSON: --csv, or --out with .csv.
fs::path csv_path(const SweepArgs& a) { return a.csv.empty() ? fs::path(a.out).replace_extension(".csv") : fs::path(a.csv); }

// Refuses --out and the CSV naming one file, or one of `inputs`, before any work.
void check_outputs(const SweepArgs& a, const std::vector<NamedPath>& inputs) {
  check_distinct_paths({{"--out", a.out}, {a.csv.empty() ? "--csv (default: --out with .csv)" : "--csv", csv_path(a)}},
                       inputs);
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

// `cells` added to `sweep` where it lacks them (one cell per key: the one there first stays).
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
    } else {
      const json& kept = sweep["cells"][it->second];
      for (const char* result : {"ppl", "attention", "error"}) differing += kept.value(result, json()) != c.value(result, json());
    }
  }
  check_labels(sweep["cells"], where);
  return differing;
}

// --out as read (null when there is none yet) made the sweep to add to: an empty one, or the
// file's, whose settings must be `settings`.
json with_settings(json sweep, const json& settings, const std::string& out) {
  if (sweep.is_null()) return {{"pert_sweep", 1}, {"settings", settings}, {"cells", json::array()}};
  check_settings(sweep["settings"], settings, out);
  sweep["settings"] = settings;  // the text as spelled now, its hash, every default written out
  return sweep;
}

// "3 cells missing: rope plain @256, ...": grid entries named as tables name them.
std::string missing_text(const json& missing) {
  std::vector<std::string> names;
  for (const json& g : missing) names.push_back(cell_name(g));
  return missing_cells_text(names);
}

// A file of this command's measure, read and checked.
json read_grid_file(const SweepArgs& a, const std::string& file) {
  json sweep = read_sweep(file);
  const std::string measure = sweep["settings"].value("measure", "perplexity");
  if (measure != a.measure->name())
    throw FormatError(file + ": a pert file of " + measure + " cells, not " + a.measure->name() + " (" +
                      (measure == "attention" ? "pert attention" : "pert sweep") + " reads it)");
  return sweep;
}

// --out as it is now (another shard's cells included), or null. Call with the file's lock held.
json read_out(const SweepArgs& a) { return fs::exists(a.out) ? read_grid_file(a, a.out) : json(); }

// Cells grouped by model and config, lengths ascending, written to the JSON and the CSV. Call
// with the file's lock held.
// What stdout gets at the end: the cells as a Markdown table, or with --json the whole sweep.
void print(const SweepArgs& a, const json& sweep) {
  if (a.json)
    write_json("-", sweep);
  else
    std::cout << printable_lines(a.measure->table(sweep["cells"]));  // (names and labels from files, as text)
}

void finish(const SweepArgs& a, json& sweep) {
  order_cells(sweep["cells"]);
  sweep["pert_version"] = PERT_VERSION;
  write_json(a.out, sweep);
  write_file(csv_path(a), a.measure->csv(sweep));
}

// Writers of one --out (the shards of a Slurm array, a rerun beside the first run) take turns:
// each re-reads the file under its lock, adds the cells it made that the file lacks and replaces
// it, so no writer's cells are lost. Returns what was written.
// `grid`: every cell this run was asked for, all shards'; `shard`: its K/N.
json save(const SweepArgs& a, const json& settings, const json& made, const json& grid, const std::string& shard) {
  const FileLock lock = results_lock(a.out);
  json sweep = with_settings(read_out(a), settings, a.out);
  add_cells(sweep, made, a.out);
  add_grid(sweep, grid);
  add_shard(sweep, shard);
  finish(a, sweep);
  return sweep;
}

// --merge: the parts' cells added to --out's (an existing --out keeps its own). The grids the
// parts recorded must be whole in the result: a missing cell (a shard that failed or has not
// run) is refused, naming it, unless --partial.
void run_merge(const SweepArgs& a) {
  std::vector<NamedPath> parts;
  for (const std::string& file : a.merge) parts.push_back({"--merge", file});
  check_outputs(a, parts);
  const FileLock lock = results_lock(a.out);
  json merged = read_out(a);
  std::vector<std::string> gridless;
  for (const std::string& file : a.merge) {
    const json part = read_grid_file(a, file);
    if (merged.is_null())
      merged = {{"pert_sweep", 1}, {"settings", part["settings"]}, {"cells", json::array()}};
    else
      check_settings(part["settings"], merged["settings"], file);
    if (const int differing = add_cells(merged, part["cells"], file))
      std::fprintf(stderr, "pert: warning: %s: %d of its cells differ from the ones %s has already, which were kept\n",
                   file.c_str(), differing, fs::exists(a.out) ? a.out.c_str() : "the files before it");
    if (!part.contains("grid")) gridless.push_back(file);
    add_grid(merged, part.value("grid", json::array()));
    for (const json& k : part.value("shards", json::array())) add_shard(merged, k);
  }
  for (const std::string& file : gridless)
    std::fprintf(stderr, "pert: warning: %s: no grid recorded (written before sweeps kept one): its missing cells, if any, cannot "
                 "be named\n", file.c_str());
  const json missing = missing_cells(merged["grid"], merged["cells"]);
  if (!missing.empty()) {
    const std::string m = a.command + " --merge: the grid is not whole, " + missing_text(missing) +
                          " (`pert " + a.command + " --status` shows each shard's)";
    if (!a.partial) throw Error(m + "; --partial merges what there is");
    std::fprintf(stderr, "pert: warning: %s\n", printable(m).c_str());
  }
  finish(a, merged);
  print(a, merged);
}

// --status: each file's share of its grid done, failed (cells that could not run) and missing,
// then the whole grid's.
void run_status(const SweepArgs& a) {
  json files = json::array(), grid = json::array(), cells = json::array();
  json all = {{"grid", json::array()}};
  for (const std::string& file : a.status) {
    const json sweep = read_grid_file(a, file);
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
  json missing_names = json::array();
  for (const json& g : missing) missing_names.push_back(cell_name(g));
  const json report = {{"files", files},
                       {"grid", all["grid"].size()},
                       {"done", keys.size()},
                       {"failed", failed},
                       {"missing", missing.size()},
                       {"missing_cells", missing_names}};
  if (a.json) {
    write_json("-", report);
    return;
  }
  std::cout << "| file | shards | its share | done | failed | missing |\n|---|---|---:|---:|---:|---:|\n";
  for (const json& f : files) {
    std::string shards;
    for (const json& k : f["shards"]) shards += (shards.empty() ? "" : " ") + printable(k.get<std::string>());
    std::cout << "| " << printable(f["file"].get<std::string>()) << " | " << (shards.empty() ? "—" : shards) << " | "
              << (f["grid"].get<bool>() ? std::to_string(f["share"].get<size_t>()) : "—") << " | " << f["done"] << " | "
              << f["failed"] << " | " << (f["grid"].get<bool>() ? std::to_string(f["missing"].get<size_t>()) : "—") << " |\n";
  }
  std::cout << "\ngrid: " << report["grid"] << " cells, " << report["done"] << " done (" << failed << " failed), "
            << (missing.empty() ? "none missing" : printable(missing_text(missing))) << "\n";
}

void run_sweep(const SweepArgs& a) {
  const std::string& cmd = a.command;
  const EvalSpec& spec = a.measure->spec();
  if (a.models.empty()) throw Error(cmd + ": give at least one -m MODEL_DIR (or --merge FILES, or --status FILES)");
  if (a.out.empty()) throw Error(cmd + ": give --out FILE.json (where the cells go)");
  if (a.partial) throw Error(cmd + ": --partial goes with --merge");
  if (a.lengths.empty()) throw Error(cmd + ": give --lengths, e.g. --lengths 128,256,512");
  if (spec.text_file.empty()) throw Error(cmd + ": give -f TEXT");
  std::vector<std::string> config_files;
  for (const std::string& c : a.configs)
    if (c != kPlain) config_files.push_back(c);
  check_outputs(a, run_inputs(a.models, config_files, spec.text_file));
  use_threads(a.threads);
  const auto [shard_k, shard_n] = a.shard.empty() ? std::pair{1, 1} : parse_shard(a.shard);
  const std::vector<std::string> configs =
      unique_in_order(a.configs.empty() ? std::vector<std::string>{kPlain} : a.configs);
  if (configs.size() != (a.configs.empty() ? 1 : a.configs.size()) && !a.labels.empty())
    throw Error("--label: a --config is given twice");
  std::map<std::string, std::string> label_of, hash_of;  // by config as given
  const std::vector<std::string> labels = config_labels(configs, a.labels);
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string& c = configs[i];
    if (c != kPlain && !fs::is_regular_file(c)) throw IoError(c + ": --config file not found");
    label_of[c] = labels[i];
    hash_of[c] = c == kPlain ? kPlain : content_hash(c);
  }

  std::vector<std::string> models;
  std::map<std::string, std::string> weights_of;  // model dir -> model_hash
  for (const std::string& m : a.models) {
    models.push_back(normal_dir(m));
    weights_of[models.back()] = model_hash(models.back());
  }
  std::vector<Cell> cells;
  for (const std::string& m : unique_in_order(models))
    for (const std::string& c : configs)
      for (int n : unique_in_order(a.lengths)) {
        const int index = int(cells.size());
        cells.push_back({index, m, c, n});
      }
  std::vector<Cell> mine;
  json grid = json::array();  // every cell, all shards': what --merge and --status hold the files to
  for (const Cell& c : cells) {
    if (c.index % shard_n == shard_k - 1) mine.push_back(c);
    grid.push_back({{"model", c.model}, {"label", label_of[c.config]}, {"config", c.config},
                    {"config_hash", hash_of[c.config]}, {"length", c.length}, {"index", c.index}});
  }
  const std::string shard = std::to_string(shard_k) + "/" + std::to_string(shard_n);
  auto key_of = [&](const Cell& c) { return cell_key(c.model, hash_of[c.config], c.length); };

  json settings;
  json sweep;
  {
    const FileLock lock = results_lock(a.out);
    json found = read_out(a);
    settings = a.measure->settings(found.is_null() ? json() : found["settings"], a.out);
    settings["text_hash"] = content_hash(spec.text_file);
    // "auto" is recorded as "f32" unless a model is a GGUF file (whose own types it then means).
    const bool gguf = std::any_of(a.models.begin(), a.models.end(), [](const std::string& m) { return is_gguf_file(m); });
    settings["dtype"] = a.overrides.dtype == "auto" && !gguf ? "f32" : a.overrides.dtype;
    settings["cache_type"] = a.overrides.cache_type;
    settings["set"] = a.overrides.sets;
    settings["allow_scheme_change"] = a.overrides.allow_scheme_change;
    sweep = with_settings(std::move(found), settings, a.out);
  }
  std::map<std::string, bool> done;
  for (const json& c : sweep["cells"]) done[cell_key(c)] = true;
  json planned = sweep["cells"];
  for (const std::string& c : configs)
    planned.push_back({{"model", "?"}, {"config", c}, {"label", label_of[c]}, {"config_hash", hash_of[c]}});
  check_labels(planned, a.out);
  planned = sweep["cells"];
  for (const auto& [m, hash] : weights_of) planned.push_back({{"model", m}, {"model_hash", hash}});
  check_same_weights(planned, a.out);

  int todo = 0;
  for (const Cell& c : mine) todo += !done[key_of(c)];
  if (!a.quiet)
    std::fprintf(stderr, "%s: %zu cells, %zu in shard %d/%d, %d to run\n", cmd.c_str(), cells.size(), mine.size(), shard_k,
                 shard_n, todo);
  std::string loaded_key, load_error;
  LoadedModel m;
  std::map<std::pair<std::string, int>, std::vector<int>> tokens_of;  // (model dir, BOS) -> the text's tokens
  int ran = 0;
  json made = json::array();  // the cells this run made
  for (const Cell& cell : mine) {
    if (done[key_of(cell)]) continue;
    json c = {{"index", cell.index},          {"model", cell.model},
              {"config", cell.config},        {"label", label_of[cell.config]},
              {"config_hash", hash_of[cell.config]}, {"model_hash", weights_of[cell.model]}, {"length", cell.length},
              {"pert_version", PERT_VERSION}};
    const std::string label = model_name(cell.model) + " " + label_of[cell.config] + " @" + std::to_string(cell.length);
    // A model or config that does not load stops the sweep (what is done so far is saved); one
    // that would replace the trained scheme is a row of error cells.
    if (loaded_key != cell.model + "\n" + cell.config) {
      loaded_key.clear();
      load_error.clear();
      ConfigOverrides o = a.overrides.overrides();
      if (cell.config != kPlain) o.files.insert(o.files.begin(), cell.config);
      try {
        m = load_cli_model(cell.model, o, a.overrides.weight_type());
      } catch (const SchemeChangeError& e) {
        load_error = cli_words(e.what());
      }
      loaded_key = cell.model + "\n" + cell.config;
    }
    if (!load_error.empty()) {
      c["error"] = load_error;
      c["position_label"] = "—";
      std::fprintf(stderr, "[%d/%d] %s: error: %s\n", ran + 1, todo, label.c_str(), load_error.c_str());
    } else {
      const ModelConfig& mc = m.model->config();
      c["trained_length"] = mc.max_position_embeddings;
      c["position"] = describe_position(mc);
      c["position_label"] = position_label(mc);
      json resolved = to_json(mc);  // the whole positional block that ran, and the trained one
      c["position_config"] = {{"position", resolved["position"]}, {"extend", resolved.value("extend", json())}};
      if (mc.trained) c["trained_position"] = position_label(*mc.trained);
      const int bos = spec.bos(m.tokenizer, mc.bos_token_id);
      auto& tokens = tokens_of[{cell.model, bos}];  // a config may change the BOS
      if (tokens.empty()) {
        const size_t dropped = m.tokenizer.dropped_characters();
        tokens = spec.tokenize(m.tokenizer, bos);
        note_dropped(m.tokenizer, dropped, spec.text_file + " (" + cell.model + ")");
      }
      c["text_tokens"] = tokens.size();
      c["threads"] = omp_get_max_threads();
      try {
        c.update(a.measure->run(*m.model, tokens, cell.length, bos, a.overrides.kv_type(),
                                "[" + std::to_string(ran + 1) + "/" + std::to_string(todo) + "] " + label, a.quiet));
        if (!a.quiet)
          std::fprintf(stderr, "[%d/%d] %s: %s, %.1f s\n", ran + 1, todo, label.c_str(), a.measure->summary(c).c_str(),
                       c["seconds"].get<double>());
      } catch (const Error& e) {  // a cell that cannot run (past a learned table, text too short) is a result
        c["error"] = cli_words(e.what());
        std::fprintf(stderr, "[%d/%d] %s: error: %s\n", ran + 1, todo, label.c_str(), c["error"].get<std::string>().c_str());
      }
    }
    made.push_back(c);
    ++ran;
    sweep = save(a, settings, made, grid, shard);  // after every cell, so an interrupted sweep resumes
    for (const json& other : sweep["cells"]) done[cell_key(other)] = true;  // cells other writers made meanwhile
  }
  sweep = save(a, settings, made, grid, shard);
  print(a, sweep);
}

// `pert sweep`'s measure: perplexity (pert perplexity's evaluation) of each cell.
class PerplexityMeasure : public Measure {
 public:
  const char* name() const override { return "perplexity"; }
  void add_flags(CLI::App& cmd) override {
    eval_.add_to(cmd);
    cmd.get_option("--file")->required(false);
  }
  const EvalSpec& spec() const override { return eval_; }
  json settings(const json& file, const std::string& out) override {
    // Resumed without --buckets, a sweep keeps its file's (files from before log buckets: 16).
    if (eval_.buckets_flag->count() == 0 && file.is_object() && file.contains("buckets"))
      eval_.buckets = buckets_from_json(file["buckets"], out + ": settings.buckets");
    return eval_.settings();
  }
  json run(const Model& model, const std::vector<int>& tokens, int length, int bos, CacheType cache,
           const std::string& label, bool quiet) const override {
    PerplexityOptions o = eval_.options(length, bos);
    o.cache_type = cache;
    return perplexity_json(run_perplexity(model, tokens, o, label, quiet), o.mode);
  }
  std::string summary(const json& c) const override { return ppl_text(c["ppl"], c["ppl_stderr"]); }
  std::string table(const json& cells) const override { return markdown_table(cells); }
  std::string csv(const json& sweep) const override { return csv_text(sweep); }

 private:
  EvalFlags eval_;
};

}  // namespace

void add_grid_command(CLI::App& app, const std::string& name, const std::string& description,
                      std::shared_ptr<Measure> measure) {
  auto a = std::make_shared<SweepArgs>();
  a->command = name;
  a->measure = std::move(measure);
  CLI::App* cmd = app.add_subcommand(name, description);
  cmd->add_option("-m,--model", a->models, "Model directory or GGUF file (repeatable)")->allow_extra_args(false)->check(not_empty());
  cmd->add_option("--config", a->configs,
                  "Config override file, one row per file and model (repeatable; 'plain': config.json as is; "
                  "default: plain)")
      ->allow_extra_args(false);
  cmd->add_option("--label", a->labels,
                  "Row label of each --config, in order (default: the file's name, or its path where two share one)")
      ->allow_extra_args(false);
  cmd->add_option("--lengths", a->lengths, "Context lengths, e.g. 128,256,512")
      ->delimiter(',')
      ->check(int_in(2, 1 << 24));
  a->measure->add_flags(*cmd);
  a->overrides.add_to(*cmd, /*with_files=*/false);
  cmd->add_option("--out", a->out, "Result file (JSON); cells already in it are skipped")->check(writable_file());
  cmd->add_flag("--json", a->json, "Write the result (what --out holds) as JSON to stdout instead of the table");
  cmd->add_option("--csv", a->csv, "CSV file (default: --out with .csv)")->check(writable_file());
  cmd->add_option("--shard", a->shard, "Run only share K of N (1 <= K <= N) of the cells, e.g. for a Slurm array")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_shard(s).second ? "" : "must be K/N with 1 <= K <= N, got '" + s + "'";
          },
          "K/N"));
  cmd->add_option("--merge", a->merge,
                  "Add these files' cells to --out's instead of running; refused while a cell of their grid is missing")
      ->expected(1, -1)
      ->check(input_file());
  cmd->add_flag("--partial", a->partial, "With --merge: merge what there is, the missing cells named in a warning");
  cmd->add_option("--status", a->status,
                  "Show each file's share of its grid done, failed and missing, then the whole grid's; runs nothing")
      ->expected(1, -1)
      ->check(input_file());
  add_threads(*cmd, a->threads);
  add_quiet(*cmd, a->quiet);
  cmd->callback([a] {
    const std::string& c = a->command;
    if (!a->status.empty()) {
      if (!a->models.empty() || !a->merge.empty() || !a->out.empty())
        throw Error(c + ": --status only reads its files; drop -m, --merge and --out");
      run_status(*a);
    } else if (!a->merge.empty()) {
      if (!a->models.empty()) throw Error(c + ": --merge runs nothing; drop -m");
      if (a->out.empty()) throw Error(c + ": --merge needs --out");
      run_merge(*a);
    } else {
      run_sweep(*a);
    }
  });
}

void add_sweep(CLI::App& app) {
  add_grid_command(app, "sweep", "Perplexity of every model x config x length, as a table, JSON and CSV",
                   std::make_shared<PerplexityMeasure>());
}

}  // namespace pert::cli
