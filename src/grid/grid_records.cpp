// Grids in records (grid.hpp): the Python module's pert.sweep and pert.merge. The places are
// every grid's, the results file's too.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "pert/error.hpp"
#include "pert/grid.hpp"
#include "pert/grid_file.hpp"

namespace pert {

using nlohmann::json;

std::vector<GridPlace> grid_places(size_t models, size_t configs, size_t lengths, const std::string& shard) {
  const auto [k, n] = shard.empty() ? std::pair{1, 1} : parse_shard(shard);
  if (n == 0) throw Error("`shard`: must be K/N with 1 <= K <= N, got '" + shard + "'");
  std::vector<GridPlace> places;
  int index = 0;
  for (size_t m = 0; m < models; ++m)
    for (size_t c = 0; c < configs; ++c)
      for (size_t l = 0; l < lengths; ++l, ++index)
        if (index % n == k - 1) places.push_back({index, m, c, l});
  return places;
}

std::string grid_identity(const std::vector<std::string>& models, const json& configs,
                          const std::vector<std::string>& labels, const std::vector<int>& lengths, const json& settings,
                          const std::string& text_file) {
  json what = {{"models", json::array()}, {"configs", json::array()}, {"labels", labels}, {"lengths", lengths},
               {"settings", settings}};
  for (const std::string& m : models) what["models"].push_back({real_path(m), model_hash(m)});
  // A file that cannot be read is named as it is (its cells' load or run says why).
  auto content = [](const std::string& path) {
    std::error_code ec;
    return std::filesystem::is_regular_file(path, ec) ? content_hash(path) : "missing " + path;
  };
  for (const json& c : configs)
    what["configs"].push_back(c.is_string() ? json(config_hash(c)) : c.is_null() ? json(kPlain) : c);
  if (!text_file.empty()) what["settings"]["file"] = content(text_file);
  return bytes_hash(what.dump());
}

std::vector<size_t> merge_grid_records(const std::vector<GridRecord>& records, bool partial) {
  std::map<long long, size_t> at;  // index -> the record kept
  std::map<std::string, long long> size_of;  // grid -> its cells
  for (size_t i = 0; i < records.size(); ++i) {
    const GridRecord& r = records[i];
    if (r.cells < 1 || r.index < 0 || r.index >= r.cells || r.grid.empty())
      throw Error("merge: " + r.where + ": not a record of pert.sweep (it needs an index in [0, cells), cells >= 1 and "
                  "its grid)");
    size_of.emplace(r.grid, r.cells);
    at.emplace(r.index, i);
  }
  if (size_of.size() > 1)
    throw Error("merge: the parts come from " + std::to_string(size_of.size()) +
                " different grids (other models, configs, lengths or settings); merge the shards of one pert.sweep call");
  const long long size = size_of.empty() ? 0 : size_of.begin()->second;
  const long long missing = size - (long long)at.size();
  if (missing > 0 && !partial) {
    std::string first;  // the first missing indices, without listing every one
    int named = 0;
    for (long long i = 0; i < size && named < 8; ++i)
      if (!at.count(i)) first += (named++ ? ", " : "") + std::to_string(i);
    throw Error("merge: the grid is not whole, " + std::to_string(missing) + " of its " + std::to_string(size) +
                " cells missing (indices " + first + (missing > 8 ? ", ..." : "") + "); `partial` merges what there is");
  }
  std::vector<size_t> kept;
  for (const auto& [index, i] : at) kept.push_back(i);
  return kept;
}

}  // namespace pert
