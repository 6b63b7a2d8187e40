// Passkey's and ruler's shards and merges (grid_shards.hpp).
#include "pert/grid_shards.hpp"

#include <filesystem>
#include <map>

#include "pert/error.hpp"
#include "pert/grid.hpp"
#include "pert/grid_file.hpp"
#include "pert/json_util.hpp"
#include "pert/output_file.hpp"

namespace pert {

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
  const std::string differs = settings_difference(grid_settings(have), grid_settings(want));
  if (!differs.empty()) throw ConfigError(where + ": made with " + differs + "; use another file or the same settings");
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
  write_file(path_, json_file_text(report_));
}

std::unique_ptr<ShardRun> open_shard(const std::string& shard, const std::string& path, json head,
                                     const std::string& model_dir, const GridOf& grid_of, const std::string& command) {
  head["model_hash"] = model_hash(model_dir);  // a retrained model is another grid
  return std::make_unique<ShardRun>(path, head, grid_of(head), shard, command);
}

json merge_shard_files(const std::vector<std::string>& files, const GridOf& grid_of, bool partial,
                       const std::string& command) {
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
  check_whole(command, missing, "", partial);
  return merged;
}

}  // namespace pert
