// `pert passkey` and `pert ruler` as shards of a grid, as `pert sweep` is: with --shard K/N a run
// does the cells whose index % N == K - 1, its --json-out saved after every cell (whole or not
// at all) and resumed by a rerun (a requeued Slurm task computes no finished cell again);
// --merge joins the shards' files, refusing while a cell of the grid is missing.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "pert/output_file.hpp"

namespace pert::cli {

// The lock of a results file that several runs may write (shards of one grid given one file, a
// rerun beside the first): writers take turns re-reading and adding to it. Where the filesystem
// has no locks, a warning (once) that writers must not share the file.
FileLock results_lock(const std::string& path);

// A result file's "shards" (the K/N of each run that wrote it) with `shard` added unless there.
void add_shard(nlohmann::json& report, const nlohmann::json& shard);

// K/N, or {0, 0} when `s` is not that (1 <= K <= N).
std::pair<int, int> parse_shard(const std::string& s);
// "3 cells missing: a, b, c" (the first six named), for --merge's refusal and --status.
std::string missing_cells_text(const std::vector<std::string>& missing);

// A grid's cells in order, by name ("128 @ depth 0.25"), and the name of a result's cell.
struct GridCells {
  std::vector<std::string> names;
  std::function<std::string(const nlohmann::json& cell)> name_of;
};

// --shard K/N, --merge FILES and --partial, as `pert passkey` and `pert ruler` take them.
struct ShardFlags {
  std::string shard;
  std::vector<std::string> merge;
  bool partial = false;
  void add_to(CLI::App& app, const std::string& cells);  // cells: "(length, depth) cells"
  // Error on flags that do not go together (`json_out`: --json-out's file).
  void check(const std::string& command, const std::string& json_out, const std::string& dump_file) const;
  // --merge's result (merge_shard_files), the outputs checked apart from the files merged first.
  nlohmann::json merged(const std::string& command, const std::string& json_out, const std::string& csv,
                        const std::function<GridCells(const nlohmann::json&)>& grid_of) const;
};

// One shard's run: what its file has, the cells still to do, and saving after each new cell.
class ShardRun {
 public:
  // `report`: the run's result with no cells (its settings; "model_hash" among them); an
  // existing `path` of the same settings is resumed, of others refused (Error naming the first
  // that differs). `command`: "passkey" or "ruler", for messages.
  ShardRun(std::string path, nlohmann::json report, GridCells grid, std::string shard, const std::string& command);
  bool wanted(int index) const;  // in this shard and not in the file yet
  // A cell done: into the file, under its lock, beside the cells other writers put there meanwhile.
  void add(const nlohmann::json& cell);
  const nlohmann::json& result() const { return report_; }  // the settings and every cell so far

 private:
  void take_in_file();
  std::string path_, command_;
  nlohmann::json report_;
  GridCells grid_;
  int k_ = 1, n_ = 1;
  std::set<std::string> done_;
};

// With --shard: the run's shard (`head`, its report with no cells, gets the model's hash; an
// existing file resumed), and `wanted` set to its cells still to do; nullptr without --shard.
std::unique_ptr<ShardRun> open_shard(const ShardFlags& flags, const std::string& json_out, nlohmann::json head,
                                     const std::string& model_dir,
                                     const std::function<GridCells(const nlohmann::json&)>& grid_of,
                                     const std::string& command, std::function<bool(int)>& wanted);

// --merge: the files' cells under their common settings, in grid order, `grid_of` giving a
// report's grid. Error naming the missing cells unless `partial` (then a warning).
nlohmann::json merge_shard_files(const std::vector<std::string>& files,
                                 const std::function<GridCells(const nlohmann::json&)>& grid_of, bool partial,
                                 const std::string& command);

}  // namespace pert::cli
