// pert.sweep's and pert.merge's grid (pert/grid.hpp): the cells of a shard, the grid's identity,
// and which records a merge keeps; __init__.py runs the cells and holds the records.
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "pert/grid.hpp"

namespace pert::python {

namespace {

// {"places": [(index, model, config, length)...] of the shard, "cells": the grid's size, "grid":
// its identity}; positions in the lists given.
py::dict grid_plan(const std::vector<std::string>& models, const py::list& configs, const std::vector<std::string>& labels,
                   const std::vector<int>& lengths, const std::string& shard, const py::object& settings,
                   const py::object& file) {
  const nlohmann::json config_json = to_json(configs, "configs");
  const nlohmann::json settings_json = to_json(settings, "settings");
  const std::string text_file = file.is_none() ? "" : path_text(file, "file");
  py::list places;
  for (const GridPlace& p : grid_places(models.size(), configs.size(), lengths.size(), shard))
    places.append(py::make_tuple(p.index, p.model, p.config, p.length));
  std::string id;
  {
    py::gil_scoped_release release;  // model_hash reads the weights' blocks
    id = grid_identity(models, config_json, labels, lengths, settings_json, text_file);
  }
  py::dict plan;
  plan["places"] = places;
  plan["cells"] = models.size() * configs.size() * lengths.size();
  plan["grid"] = id;
  return plan;
}

// The positions of the records a merge keeps, in grid order; each record (where, index, cells,
// grid), -1 or "" for what it lacks.
std::vector<size_t> merge_plan(const std::vector<std::tuple<std::string, long long, long long, std::string>>& records,
                               bool partial) {
  std::vector<GridRecord> r;
  for (const auto& [where, index, cells, grid] : records) r.push_back({where, index, cells, grid});
  return merge_grid_records(r, partial);
}

}  // namespace

void add_grid(py::module_& m) {
  m.def("_grid_plan", &grid_plan, py::arg("models"), py::arg("configs"), py::arg("labels"), py::arg("lengths"),
        py::arg("shard"), py::arg("settings"), py::arg("file"),
        "pert.sweep's grid: its shard's cells, its size and its identity");
  m.def("_merge_plan", &merge_plan, py::arg("records"), py::arg("partial"),
        "pert.merge's records to keep, in grid order");
}

}  // namespace pert::python
