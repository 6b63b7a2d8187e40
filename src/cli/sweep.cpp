// pert sweep: perplexity for every (model, config, length) cell, as a Markdown table, JSON and
// CSV. Resumable (cells already in --out are skipped), shardable (--shard K/N takes a fixed
// share of the cells) and mergeable (--merge joins the shards' files).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "evaluate.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kPlain = "plain";  // --config plain: the model's own config.json

struct SweepArgs {
  std::vector<std::string> models, configs, merge;
  std::vector<int> lengths;
  std::string out, csv, shard, dtype = "f32";
  int threads = 0;
  EvalFlags eval;
};

struct Cell {
  int index;  // in the sweep's enumeration: model-major, then config, then length
  std::string model, config;
  int length;
};

std::string cell_key(const json& c) {
  return c.at("model").get<std::string>() + "\n" + c.at("config").get<std::string>() + "\n" +
         std::to_string(c.at("length").get<int>());
}

std::string stem_of(const std::string& path) { return path == kPlain ? kPlain : fs::path(path).stem().string(); }
// "models/rope/" and "./models/rope" are one model: "models/rope".
std::string normal_dir(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  return (p.has_filename() ? p : p.parent_path()).string();
}
std::string name_of(const std::string& dir) { return fs::path(normal_dir(dir)).filename().string(); }

template <class T>
std::vector<T> unique_in_order(const std::vector<T>& v) {
  std::vector<T> out;
  for (const T& x : v)
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return out;
}

// K/N, or {0, 0} when `s` is not that.
std::pair<int, int> parse_shard(const std::string& s) {
  int k = 0, n = 0;
  char slash = 0, extra = 0;
  std::istringstream in(s);
  if (!(in >> k >> slash >> n) || slash != '/' || (in >> extra) || n < 1 || k < 1 || k > n) return {0, 0};
  return {k, n};
}

// A sweep file: {"pert_sweep": 1, "settings": {...}, "cells": [...]}.
json read_sweep(const fs::path& path) {
  json j = read_json_file(path);
  if (!j.is_object() || j.value("pert_sweep", 0) != 1 || !j.contains("settings") || !j.contains("cells") ||
      !j["cells"].is_array())
    throw FormatError(path.string() + ": not a pert sweep file");
  for (const json& c : j["cells"])
    if (!c.is_object() || !c.contains("model") || !c.contains("config") || !c.contains("length") ||
        !c["model"].is_string() || !c["config"].is_string() || !c["length"].is_number_integer())
      throw FormatError(path.string() + ": a cell lacks model, config or length");
  return j;
}

void check_settings(const json& have, const json& want, const std::string& where) {
  json keys = want;
  keys.update(have);  // every key either side has; a missing one reads as null
  for (auto& [key, unused] : keys.items())
    if (have.value(key, json()) != want.value(key, json()))
      throw ConfigError(where + ": made with " + key + " = " + json_brief(have.value(key, json())) + ", not " +
                        json_brief(want.value(key, json())) + "; use another --out or the same settings");
}

std::string csv_field(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

void write_csv(const fs::path& path, const json& cells) {
  std::ostringstream o;
  o << "model,config,length,trained_length,ppl,ppl_stderr,nll,tokens,windows,seconds,tokens_per_second,error\n";
  for (const json& c : cells) {
    o << csv_field(c["model"]) << ',' << csv_field(c["config"]) << ',' << c["length"] << ','
      << c.value("trained_length", 0);
    if (c.contains("error")) {
      o << ",,,,,,,," << csv_field(c["error"]) << '\n';
      continue;
    }
    o << ',' << c["ppl"] << ',' << c["ppl_stderr"] << ',' << c["nll"] << ',' << c["tokens"] << ',' << c["windows"]
      << ',' << c["seconds"] << ',' << c["tokens_per_second"] << ",\n";
  }
  std::ofstream out(path, std::ios::binary);
  if (!(out << o.str()) || !out.flush()) throw IoError(path.string() + ": cannot write");
}

// Rows model + config in order of first appearance, columns the lengths ascending; the trained
// length is marked in the header when every row shares it, else in bold.
std::string markdown_table(const json& cells) {
  std::vector<std::pair<std::string, std::string>> rows;
  std::vector<int> lengths;
  std::map<std::string, const json*> at;
  std::map<std::pair<std::string, std::string>, int> trained;
  for (const json& c : cells) {
    std::pair<std::string, std::string> row{c["model"], c["config"]};
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    if (std::find(lengths.begin(), lengths.end(), c["length"].get<int>()) == lengths.end()) lengths.push_back(c["length"]);
    at[cell_key(c)] = &c;
    if (c.contains("trained_length")) trained[row] = c["trained_length"];
  }
  std::sort(lengths.begin(), lengths.end());
  int shared_L = trained.empty() ? 0 : trained.begin()->second;
  for (auto& [row, L] : trained)
    if (L != shared_L) shared_L = 0;
  std::ostringstream o;
  o << "| model | config |";
  for (int n : lengths) o << ' ' << n << (n == shared_L ? " (L)" : "") << " |";
  o << "\n|---|---|";
  for (size_t i = 0; i < lengths.size(); ++i) o << "---:|";
  o << '\n';
  for (const auto& row : rows) {
    o << "| " << name_of(row.first) << " | " << stem_of(row.second) << " |";
    for (int n : lengths) {
      auto it = at.find(row.first + "\n" + row.second + "\n" + std::to_string(n));
      char v[64] = "";
      if (it != at.end() && it->second->contains("ppl"))
        std::snprintf(v, sizeof v, shared_L == 0 && trained[row] == n ? "**%.2f**" : "%.2f",
                      (*it->second)["ppl"].get<double>());
      else if (it != at.end())
        std::snprintf(v, sizeof v, "—");
      o << ' ' << v << " |";
    }
    o << '\n';
  }
  if (shared_L == 0 && !trained.empty()) o << "\nBold: the model's trained length.\n";
  std::map<std::string, bool> told;  // each distinct reason once
  for (const json& c : cells)
    if (c.contains("error") && !told[c["error"]]) {
      told[c["error"]] = true;
      o << "\n— " << name_of(c["model"]) << " " << stem_of(c["config"]) << " @" << c["length"].get<int>() << ": "
        << c["error"].get<std::string>() << "\n";
    }
  return o.str();
}

// Cells in sweep order (stable: cells of separate sweeps into one file keep their order).
void finish(const fs::path& out, const std::string& csv, json& sweep) {
  std::stable_sort(sweep["cells"].begin(), sweep["cells"].end(),
                   [](const json& x, const json& y) { return x.value("index", 0) < y.value("index", 0); });
  write_json(out, sweep);
  write_csv(csv.empty() ? fs::path(out).replace_extension(".csv") : fs::path(csv), sweep["cells"]);
}

void run_merge(const SweepArgs& a) {
  json merged;
  std::map<std::string, bool> seen;
  for (const std::string& file : a.merge) {
    const json part = read_sweep(file);
    if (merged.is_null())
      merged = {{"pert_sweep", 1}, {"settings", part["settings"]}, {"cells", json::array()}};
    else
      check_settings(part["settings"], merged["settings"], file);
    for (const json& c : part["cells"])
      if (!seen[cell_key(c)]) {
        seen[cell_key(c)] = true;
        merged["cells"].push_back(c);
      }
  }
  finish(a.out, a.csv, merged);
  std::cout << markdown_table(merged["cells"]);
}

void run_sweep(const SweepArgs& a) {
  if (a.models.empty()) throw Error("sweep: give at least one -m MODEL_DIR (or --merge FILES)");
  if (a.lengths.empty()) throw Error("sweep: give --lengths, e.g. --lengths 128,256,512");
  if (a.eval.text_file.empty()) throw Error("sweep: give -f TEXT");
  set_threads(a.threads);
  const auto [shard_k, shard_n] = a.shard.empty() ? std::pair{1, 1} : parse_shard(a.shard);
  const std::vector<std::string> configs = a.configs.empty() ? std::vector<std::string>{kPlain} : a.configs;
  for (const std::string& c : configs)
    if (c != kPlain && !fs::is_regular_file(c)) throw IoError(c + ": --config file not found");

  std::vector<std::string> models;
  for (const std::string& m : a.models) models.push_back(normal_dir(m));
  std::vector<Cell> cells;
  for (const std::string& m : unique_in_order(models))
    for (const std::string& c : unique_in_order(configs))
      for (int n : unique_in_order(a.lengths)) {
        const int index = int(cells.size());
        cells.push_back({index, m, c, n});
      }
  std::vector<Cell> mine;
  for (const Cell& c : cells)
    if (c.index % shard_n == shard_k - 1) mine.push_back(c);

  json settings = a.eval.settings();
  if (a.dtype != "f32") settings["dtype"] = a.dtype;  // files from before --dtype are f32
  json sweep = {{"pert_sweep", 1}, {"settings", settings}, {"cells", json::array()}};
  std::map<std::string, bool> done;
  if (fs::exists(a.out)) {
    sweep = read_sweep(a.out);
    check_settings(sweep["settings"], settings, a.out);
    for (const json& c : sweep["cells"]) done[cell_key(c)] = true;
  }

  int todo = 0;
  for (const Cell& c : mine) todo += !done[c.model + "\n" + c.config + "\n" + std::to_string(c.length)];
  std::fprintf(stderr, "sweep: %zu cells, %zu in shard %d/%d, %d to run\n", cells.size(), mine.size(), shard_k,
               shard_n, todo);
  std::string loaded_key;
  LoadedModel m;
  std::map<std::pair<std::string, int>, std::vector<int>> tokens_of;  // (model dir, BOS) -> the text's tokens
  int ran = 0;
  for (const Cell& cell : mine) {
    if (done[cell.model + "\n" + cell.config + "\n" + std::to_string(cell.length)]) continue;
    json c = {{"index", cell.index}, {"model", cell.model}, {"config", cell.config}, {"length", cell.length}};
    const std::string label = name_of(cell.model) + " " + stem_of(cell.config) + " @" + std::to_string(cell.length);
    // A model or config that does not load stops the sweep (what is done so far is saved).
    if (loaded_key != cell.model + "\n" + cell.config) {
      loaded_key.clear();
      ConfigOverrides o;
      if (cell.config != kPlain) o.files.push_back(cell.config);
      m = load_model(cell.model, o, ConfigFlags::parse_dtype(a.dtype));
      loaded_key = cell.model + "\n" + cell.config;
    }
    const ModelConfig& mc = m.model->config();
    c["trained_length"] = mc.max_position_embeddings;
    c["position"] = describe_position(mc);
    const int bos = a.eval.bos(m.tokenizer, mc.bos_token_id);
    auto& tokens = tokens_of[{cell.model, bos}];  // a config may change the BOS
    if (tokens.empty()) tokens = a.eval.tokenize(m.tokenizer, bos);
    c["text_tokens"] = tokens.size();
    c["threads"] = omp_get_max_threads();
    try {
      const PerplexityOptions o = a.eval.options(cell.length, bos);
      c.update(result_json(run_perplexity(*m.model, tokens, o,
                                          "[" + std::to_string(ran + 1) + "/" + std::to_string(todo) + "] " + label),
                           o.mode));
      std::fprintf(stderr, "[%d/%d] %s: %s, %.1f s\n", ran + 1, todo, label.c_str(),
                   ppl_text(c["ppl"], c["ppl_stderr"]).c_str(), c["seconds"].get<double>());
    } catch (const Error& e) {  // a cell that cannot run (past a learned table, text too short) is a result
      c["error"] = e.what();
      std::fprintf(stderr, "[%d/%d] %s: error: %s\n", ran + 1, todo, label.c_str(), e.what());
    }
    sweep["cells"].push_back(c);
    ++ran;
    finish(a.out, a.csv, sweep);  // after every cell, so an interrupted sweep resumes
  }
  finish(a.out, a.csv, sweep);
  std::cout << markdown_table(sweep["cells"]);
}

}  // namespace

void add_sweep(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "Perplexity of every model x config x length, as a table, JSON and CSV");
  cmd->add_option("-m,--model", a->models, "Model directory (repeatable)")->allow_extra_args(false);
  cmd->add_option("--config", a->configs,
                  "Config override file, one row per file and model (repeatable; 'plain': config.json as is; "
                  "default: plain)")
      ->allow_extra_args(false);
  cmd->add_option("--lengths", a->lengths, "Context lengths, e.g. 128,256,512")
      ->delimiter(',')
      ->check(int_in(2, 1 << 24));
  a->eval.add_to(*cmd);
  cmd->get_option("--file")->required(false);
  cmd->add_option("--out", a->out, "Sweep file (JSON); cells already in it are skipped")
      ->required()
      ->check(writable_file());
  cmd->add_option("--csv", a->csv, "CSV file (default: --out with .csv)")->check(writable_file());
  cmd->add_option("--shard", a->shard, "Run only share K of N (1 <= K <= N) of the cells, e.g. for a Slurm array")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_shard(s).second ? "" : "must be K/N with 1 <= K <= N, got '" + s + "'";
          },
          "K/N"));
  cmd->add_option("--merge", a->merge, "Join these sweep files into --out instead of running")->expected(1, -1);
  add_threads(*cmd, a->threads);
  ConfigFlags::add_dtype(*cmd, a->dtype);
  cmd->callback([a] {
    if (!a->merge.empty()) {
      if (!a->models.empty()) throw Error("sweep: --merge runs nothing; drop -m");
      run_merge(*a);
    } else {
      run_sweep(*a);
    }
  });
}

}  // namespace pert::cli
