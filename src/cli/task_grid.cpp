#include "task_grid.hpp"

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "common.hpp"
#include "sweep_file.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/output_file.hpp"

namespace pert::cli {

using nlohmann::json;

namespace {

// What two files of one grid share: the result without its cells, threads and shards, the
// model directory by its real path ("models/rope/" and "models/rope" are one model).
json grid_settings(json report) {
  for (const char* key : {"cells", "threads", "shards"}) report.erase(key);
  if (report.contains("model_dir") && report["model_dir"].is_string()) {
    std::error_code ec;
    std::filesystem::path real = std::filesystem::weakly_canonical(report["model_dir"].get<std::string>(), ec);
    if (!real.has_filename()) real = real.parent_path();  // (a trailing slash)
    if (!ec) report["model_dir"] = real.string();
  }
  return report;
}

void check_same_settings(const json& have, const json& want, const std::string& where) {
  const json a = grid_settings(have), b = grid_settings(want);
  json keys = b;
  keys.update(a);
  for (auto& [key, unused] : keys.items())
    if (a.value(key, json()) != b.value(key, json()))
      throw ConfigError(where + ": made with " + key + " = " + json_brief(a.value(key, json())) + ", not " +
                        json_brief(b.value(key, json())) + "; use another file or the same settings");
}

// Cells in grid order, one a name (the first kept).
json in_grid_order(const json& cells, const GridCells& grid) {
  std::map<std::string, json> by_name;
  for (const json& c : cells) by_name.emplace(grid.name_of(c), c);
  json out = json::array();
  for (const std::string& name : grid.names)
    if (auto it = by_name.find(name); it != by_name.end()) out.push_back(it->second);
  return out;
}

bool field_is_int(const json& v) { return v.is_number_integer(); }
bool field_is_text(const json& v) { return v.is_string(); }
bool field_is_number(const json& v) { return v.is_number(); }
bool field_is_number_or_null(const json& v) { return v.is_number() || v.is_null(); }

// A --shard or --merge file's fields that the table, the CSV and the grid read, each of its type:
// anything else is a one-line FormatError naming the file and the field, never a crash.
void check_result_file(const json& j, const std::string& file, const std::string& command) {
  const std::string where = file + ": ";
  if (!j.is_object() || !j.contains("cells") || !j["cells"].is_array())
    throw FormatError(where + "not a pert " + command + " result (no cells)");
  const bool ruler = command == "ruler";
  struct Field {
    const char* key;
    bool (*ok)(const json&);
    const char* what;
  };
  std::vector<Field> top = {{"model_dir", field_is_text, "a string"}, {"position", field_is_text, "a string"},
                            {"trials", field_is_int, "an integer"},   {"seed", field_is_int, "an integer"},
                            {"trained_length", field_is_int, "an integer"}};
  if (ruler) top.push_back({"template", field_is_text, "a string"});
  for (const Field& f : top)
    if (!j.contains(f.key) || !f.ok(j[f.key])) throw FormatError(where + f.key + " must be " + f.what);
  auto array_of = [&](const char* key, bool (*ok)(const json&), const char* what) {
    if (!j.contains(key) || !j[key].is_array() || j[key].empty())
      throw FormatError(where + key + " must be a non-empty array");
    for (const json& v : j[key])
      if (!ok(v)) throw FormatError(where + key + " must hold " + what + ", got " + json_brief(v));
  };
  array_of("lengths", field_is_int, "integers");
  array_of("depths", field_is_number, "numbers");
  if (ruler) array_of("tasks", field_is_text, "task names");
  std::vector<Field> cell = {{"length", field_is_int, "an integer"}, {"trials", field_is_int, "an integer"}};
  if (ruler) {
    cell.insert(cell.end(), {{"task", field_is_text, "a string"},
                             {"depth", field_is_number_or_null, "a number or null"},
                             {"score", field_is_number_or_null, "a number or null"}});
  } else {
    cell.insert(cell.end(), {{"depth", field_is_number, "a number"},
                             {"accuracy", field_is_number, "a number"},
                             {"correct", field_is_int, "an integer"}});
  }
  for (size_t i = 0; i < j["cells"].size(); ++i) {
    const json& c = j["cells"][i];
    const std::string at = where + "cells[" + std::to_string(i) + "]";
    if (!c.is_object()) throw FormatError(at + " must be an object");
    for (const Field& f : cell)
      if (!c.contains(f.key) || !f.ok(c[f.key])) throw FormatError(at + "." + f.key + " must be " + f.what);
    if (c.contains("skipped") && !c["skipped"].is_string()) throw FormatError(at + ".skipped must be a string");
    if (ruler && c["score"].is_null() && !c.contains("skipped"))  // a cell that did not run says why
      throw FormatError(at + ".score is null with no \"skipped\" reason");
  }
}

}  // namespace

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

std::string missing_cells_text(const std::vector<std::string>& missing) {
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 6; ++i) names += (i ? ", " : "") + missing[i];
  if (missing.size() > 6) names += ", and " + std::to_string(missing.size() - 6) + " more";
  return std::to_string(missing.size()) + (missing.size() == 1 ? " cell" : " cells") + " missing: " + names;
}

std::pair<int, int> parse_shard(const std::string& s) {
  int k = 0, n = 0;
  char slash = 0, extra = 0;
  std::istringstream in(s);
  if (!(in >> k >> slash >> n) || slash != '/' || (in >> extra) || n < 1 || k < 1 || k > n) return {0, 0};
  return {k, n};
}

void ShardFlags::add_to(CLI::App& app, const std::string& cells) {
  app.add_option("--shard", shard,
                 "Run only share K of N (1 <= K <= N) of the " + cells + " into --json-out, saved after each cell and "
                 "resumed when it exists (a Slurm array's task)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_shard(s).second ? "" : "must be K/N with 1 <= K <= N, got '" + s + "'";
          },
          "K/N"));
  app.add_option("--merge", merge,
                 "Join these --shard files' cells (the table, --json-out, --csv) instead of running; refused while a "
                 "cell of the grid is missing")
      ->expected(1, -1)
      ->check(input_file());
  app.add_flag("--partial", partial, "With --merge: join what there is, the missing cells named in a warning");
}

void ShardFlags::check(const std::string& command, const std::string& json_out, const std::string& dump_file) const {
  if (partial && merge.empty()) throw Error(command + ": --partial goes with --merge");
  if (!shard.empty() && json_out.empty()) throw Error(command + ": --shard needs --json-out FILE (the shard's file)");
  if (!shard.empty() && !dump_file.empty()) throw Error(command + ": --dump-prompts runs a whole grid, not a --shard");
}

json ShardFlags::merged(const std::string& command, const std::string& json_out, const std::string& csv,
                        const std::function<GridCells(const json&)>& grid_of) const {
  std::vector<NamedPath> parts;
  for (const std::string& f : merge) parts.push_back({"--merge", f});
  check_distinct_paths({{"--json-out", json_out}, {"--csv", csv}}, parts);
  return merge_shard_files(merge, grid_of, partial, command);
}

ShardRun::ShardRun(std::string path, json report, GridCells grid, std::string shard, const std::string& command)
    : path_(std::move(path)), command_(command), report_(std::move(report)), grid_(std::move(grid)) {
  std::tie(k_, n_) = parse_shard(shard);
  report_["cells"] = json::array();
  report_["shards"] = json::array({shard});
  const FileLock lock = results_lock(path_);
  take_in_file();
}

// What the file holds now (another shard writing it too, or the run resumed) joined to this run's:
// its cells this run lacks and its shards. Call with the file's lock held.
void ShardRun::take_in_file() {
  if (std::filesystem::exists(path_)) {
    const json have = read_json_file(path_);
    check_result_file(have, path_, command_);
    check_same_settings(have, report_, path_);
    json cells = report_["cells"];
    for (const json& c : have["cells"])
      if (!done_.count(grid_.name_of(c))) cells.push_back(c);
    report_["cells"] = in_grid_order(cells, grid_);
    for (const json& k : have.value("shards", json::array())) add_shard(report_, k);
  }
  for (const json& c : report_["cells"]) done_.insert(grid_.name_of(c));
}

bool ShardRun::wanted(int index) const {
  return index % n_ == k_ - 1 && !done_.count(grid_.names[size_t(index)]);
}

// Writers of one file (two shards given one --json-out, a rerun beside the first) take turns:
// each re-reads it under the lock and adds its cell to what is there, so none is lost.
void ShardRun::add(const json& cell) {
  const FileLock lock = results_lock(path_);
  done_.insert(grid_.name_of(cell));
  report_["cells"].push_back(cell);
  take_in_file();
  write_json(path_, report_);
}

std::unique_ptr<ShardRun> open_shard(const ShardFlags& flags, const std::string& json_out, json head,
                                     const std::string& model_dir, const std::function<GridCells(const json&)>& grid_of,
                                     const std::string& command, std::function<bool(int)>& wanted) {
  if (flags.shard.empty()) return nullptr;
  head["model_hash"] = model_hash(model_dir);  // a retrained model is another grid
  auto shard = std::make_unique<ShardRun>(json_out, head, grid_of(head), flags.shard, command);
  const ShardRun* s = shard.get();
  wanted = [s](int index) { return s->wanted(index); };
  return shard;
}

json merge_shard_files(const std::vector<std::string>& files, const std::function<GridCells(const json&)>& grid_of,
                       bool partial, const std::string& command) {
  json merged, cells = json::array();
  for (const std::string& file : files) {
    const json part = read_json_file(file);
    check_result_file(part, file, command);
    if (merged.is_null())
      merged = part;
    else
      check_same_settings(part, merged, file);
    cells.insert(cells.end(), part["cells"].begin(), part["cells"].end());
    for (const json& k : part.value("shards", json::array())) add_shard(merged, k);
  }
  const GridCells grid = grid_of(merged);
  merged["cells"] = in_grid_order(cells, grid);
  std::set<std::string> have;
  for (const json& c : merged["cells"]) have.insert(grid.name_of(c));
  std::vector<std::string> missing;
  for (const std::string& name : grid.names)
    if (!have.count(name)) missing.push_back(name);
  if (!missing.empty()) {
    const std::string m = command + " --merge: the grid is not whole, " + missing_cells_text(missing);
    if (!partial) throw Error(m + "; --partial merges what there is");
    std::fprintf(stderr, "pert: warning: %s\n", printable(m).c_str());
  }
  return merged;
}

}  // namespace pert::cli
