// pert.sweep's and pert.merge's grid (pert/grid.hpp): the cells of a shard, the grid's identity,
// the cells run by the library's loop (run_cells, as `pert sweep` runs them) into records, and
// which records a merge keeps; __init__.py checks the arguments and holds the records.
#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "pert/grid.hpp"
#include "pert/grid_file.hpp"

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

// A sweep's config as a grid cell names it: "plain" for None, a dict as inline JSON, a path.
std::string cell_config(const py::handle& config) {
  if (config.is_none()) return kPlain;
  if (py::isinstance<py::dict>(config)) return to_json(config, "configs").dump();
  return path_text(config, "configs");
}

// The records of `places` (grid_plan's: index, model, config, length; `cells` and `grid` the
// grid's size and identity), each cell's perplexity as `pert sweep` makes it; each record's
// "config" is the config as given. progress: True for a line per cell on sys.stderr, a function
// called with (done, total, record), or False.
py::list sweep_cells(const std::vector<std::string>& models, const py::list& configs, const std::vector<std::string>& labels,
                     const std::vector<int>& lengths, const std::vector<std::tuple<int, size_t, size_t, size_t>>& places,
                     long long cells, const std::string& grid, const py::object& set, bool allow_scheme_change,
                     const std::string& dtype, const py::object& progress, const py::object& text, const py::object& file,
                     const py::object& tokens, const std::string& mode, int stride, int chunks, const py::object& buckets,
                     bool split_docs, const std::string& cache_type) {
  require(int(!text.is_none()) + int(!file.is_none()) + int(!tokens.is_none()) == 1,
          "sweep: give exactly one of text=, file= or tokens=");
  require(text.is_none() || py::isinstance<py::str>(text), "text: a str expected (file= takes a path)");
  EvalSpec spec = eval_spec(mode, stride, chunks, buckets, split_docs);
  if (!file.is_none()) spec.text_file = path_text(file, "file");
  const std::string text_str = text.is_none() ? "" : text.cast<std::string>();
  const std::vector<int> ids = tokens.is_none() ? std::vector<int>() : token_ids(tokens, INT32_MAX, "sweep: tokens");
  PerplexityMeasure measure(spec, nullptr);

  GridRequest r;
  r.overrides = load_overrides(py::none(), set, allow_scheme_change);
  r.dtype = dtype;
  r.cache_type = cache_type;
  r.quiet = true;  // (a line per cell, below, to sys.stderr)
  r.words = python_words;
  r.load = [](const std::string& dir, const ConfigOverrides& o, WeightType type) {
    LoadedModel m = load_model(dir, o, type);
    py::gil_scoped_acquire gil;
    if (!m.note.empty() && PyErr_WarnEx(PyExc_UserWarning, python_words(m.note).c_str(), 1) < 0)
      throw py::error_already_set();
    return m;
  };
  r.tokens = [&](const Tokenizer& tokenizer, int bos) {
    if (!tokens.is_none()) return ids;  // as given (an id past a model's vocabulary: an error cell)
    const size_t dropped = tokenizer.dropped_characters();
    std::vector<int> out = file.is_none() ? spec.tokenize_text(tokenizer, bos, text_str) : spec.tokenize(tokenizer, bos);
    py::gil_scoped_acquire gil;
    warn_dropped(tokenizer, dropped, file.is_none() ? "text" : spec.text_file);
    return out;
  };

  std::vector<std::string> config_names;
  for (const py::handle& c : configs) config_names.push_back(cell_config(c));
  std::vector<GridCell> to_run;
  for (const auto& [index, model, config, length] : places)
    to_run.push_back({index, models.at(model), config_names.at(config), labels.at(config), config_hash(config_names[config]),
                      "", lengths.at(length)});
  {
    py::gil_scoped_release release;  // model_hash reads the weights' blocks
    for (GridCell& c : to_run) c.model_hash = model_hash(c.model);
  }
  const bool callback = PyCallable_Check(progress.ptr()), lines = !callback && py::bool_(progress);
  py::list records;
  {
    const PythonSignals signals;
    py::gil_scoped_release release;
    run_cells(to_run, r, measure, nullptr, [&](nlohmann::json& cell, int ran, int todo, const std::string& name) {
      py::gil_scoped_acquire gil;
      cell["cells"] = cells;
      cell["grid"] = grid;
      py::dict record = to_python(cell);
      record["config"] = configs[std::get<2>(places[size_t(ran - 1)])];  // (run_cells skips none here)
      records.append(record);
      if (callback) {
        progress(ran, todo, record);
      } else if (lines) {
        const std::string line = "[" + std::to_string(ran) + "/" + std::to_string(todo) + "] " + name + ": " +
                                 (cell.contains("error") ? "error: " + cell["error"].get<std::string>() : measure.summary(cell)) + "\n";
        py::module_::import("sys").attr("stderr").attr("write")(line);
      }
    });
  }
  return records;
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
  m.def("_sweep_cells", &sweep_cells, py::arg("models"), py::arg("configs"), py::arg("labels"), py::arg("lengths"),
        py::arg("places"), py::arg("cells"), py::arg("grid"), py::arg("set"), py::arg("allow_scheme_change"),
        py::arg("dtype"), py::arg("progress"), py::kw_only(), py::arg("text") = py::none(), py::arg("file") = py::none(),
        py::arg("tokens") = py::none(), py::arg("mode") = "chunks", py::arg("stride") = 0, py::arg("chunks") = 0,
        py::arg("buckets") = "log", py::arg("split_docs") = false, py::arg("cache_type") = "f32",
        "pert.sweep's cells, run as pert sweep runs them, as records");
  m.def("_merge_plan", &merge_plan, py::arg("records"), py::arg("partial"),
        "pert.merge's records to keep, in grid order");
}

}  // namespace pert::python
