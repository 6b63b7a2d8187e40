// Passkey's and ruler's grids as shards, as a sweep's are (grid.hpp): a shard K/N does the cells
// whose index % N == K - 1, its file saved after every cell (whole or not at all) and resumed by
// a rerun (a requeued Slurm task computes no finished cell again); a merge joins the shards'
// files, refusing files of other settings and, while a cell of the grid is missing, naming it.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pert {

// A grid's cells in order, by name ("128 tokens at depth 0.25"), and the name of a result's cell.
struct GridCells {
  std::vector<std::string> names;
  std::function<std::string(const nlohmann::json& cell)> name_of;
};
// A result's grid, from its settings (its lengths, depths, tasks).
using GridOf = std::function<GridCells(const nlohmann::json& result)>;

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

// Shard `shard` ("K/N") of the grid of `head` (the run's report with no cells, to which the
// model's hash is added: a retrained model is another grid) in the file `path`, an existing one
// resumed.
std::unique_ptr<ShardRun> open_shard(const std::string& shard, const std::string& path, nlohmann::json head,
                                     const std::string& model_dir, const GridOf& grid_of, const std::string& command);

// The files' cells under their common settings, in grid order. Error naming the missing cells
// unless `partial` (then a warning).
nlohmann::json merge_shard_files(const std::vector<std::string>& files, const GridOf& grid_of, bool partial,
                                 const std::string& command);

}  // namespace pert
