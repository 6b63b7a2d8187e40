// pert.sweep's and pert.merge's grid (pert/grid.hpp): the cells of a shard, the grid's identity,
// the cells run by the library's loop (run_cells, as `pert sweep` runs them) into records, and
// which records a merge keeps; __init__.py checks the arguments and holds the records.
#include <string>
#include <tuple>
#include <vector>

#include "pert/error.hpp"
#include "pert/grid.hpp"
#include "pert/grid_file.hpp"
#include "python/bindings.hpp"

namespace pert::python {

std::string grid_path(py::handle value, const std::string& name) {
  std::string path = path_arg(value, name);
  if (!py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(path.data(), Py_ssize_t(path.size()), "strict"))) {
    PyErr_Clear();
    throw Error(name + ": " + std::string(readable(path)) + " is not UTF-8, which a sweep's records (JSON) need to name it; rename it");
  }
  return path;
}

namespace {

std::vector<std::string> grid_paths(const py::object& value, const std::string& name) {
  std::vector<std::string> out;
  for (const std::string& p : list_arg(value, name, true)) out.push_back(grid_path(py::bytes(p), name));
  return out;
}

// A sweep's config as a grid cell names it: "plain" for None, a dict as inline JSON, a path.
std::string cell_config(const py::handle& config) {
  if (config.is_none()) return kPlain;
  if (py::isinstance<py::dict>(config)) return to_json(config, "configs").dump();
  return grid_path(config, "configs");
}

// {"places": [(index, model, config, length)...] of the shard, "cells": the grid's size, "grid":
// its identity}; positions in the lists given.
py::dict grid_plan(const py::object& models_in, const py::list& configs, const py::object& labels_in,
                   const std::vector<int>& lengths, const std::string& shard, const py::dict& settings,
                   const py::object& file) {
  const std::vector<std::string> models = grid_paths(models_in, "models");
  nlohmann::json config_json = nlohmann::json::array();
  for (const py::handle& c : configs)
    config_json.push_back(c.is_none() || py::isinstance<py::dict>(c) ? to_json(c, "configs") : nlohmann::json(cell_config(c)));
  const std::vector<std::string> labels = list_arg(labels_in, "labels", false);  // (after the configs they may be named from)
  const std::string text_file = file.is_none() ? "" : grid_path(file, "file");
  // Each setting by its keyword, so an error names the one given (text=, not the settings).
  nlohmann::json settings_json = nlohmann::json::object();
  for (auto [key, value] : settings) {
    const std::string name = text_arg(key, "settings");
    settings_json[name] = name == "file" && !file.is_none() ? nlohmann::json(text_file) : to_json(value, name);
  }
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


// The records of `places` (grid_plan's: index, model, config, length; `cells` and `grid` the
// grid's size and identity), each cell's perplexity as `pert sweep` makes it; each record's
// "config" is the config as given. progress: True for a line per cell on sys.stderr, a function
// called with (done, total, record), or False.
py::list sweep_cells(const py::object& models_in, const py::list& configs, const py::object& labels_in,
                     const std::vector<int>& lengths, const std::vector<std::tuple<int, size_t, size_t, size_t>>& places,
                     long long cells, const std::string& grid, const py::object& set, bool allow_scheme_change,
                     const py::object& dtype, const py::object& progress, const py::object& text, const py::object& file,
                     const py::object& tokens, const py::object& mode, int stride, int chunks, const py::object& buckets,
                     bool split_docs, const py::object& cache_type, bool key_tokens, int key_short, int key_step,
                     double key_alpha, double key_beta, const py::object& key_model, const py::object& key_config) {
  require(int(!text.is_none()) + int(!file.is_none()) + int(!tokens.is_none()) == 1,
          "sweep: give exactly one of text=, file= or tokens=");
  const std::vector<std::string> models = grid_paths(models_in, "models"), labels = list_arg(labels_in, "labels", false);
  EvalSpec spec = eval_spec(mode, stride, chunks, buckets, split_docs);
  key_spec(spec, key_tokens, key_short, key_step, key_alpha, key_beta, key_model, key_config);
  if (!file.is_none()) spec.text_file = grid_path(file, "file");
  const std::string text_str = text.is_none() ? "" : text_arg(text, "text");
  const std::vector<int> ids = tokens.is_none() ? std::vector<int>() : token_ids(tokens, INT32_MAX, "sweep: tokens");
  PerplexityMeasure measure(spec, nullptr);

  GridRequest r;
  r.overrides = load_overrides(py::none(), set, allow_scheme_change);
  r.dtype = text_arg(dtype, "dtype");
  r.cache_type = text_arg(cache_type, "cache_type");
  r.quiet = true;  // (a line per cell, below, to sys.stderr)
  r.words = python_words;
  r.load = [](const std::string& dir, const ConfigOverrides& o, WeightType type) {
    LoadedModel m = load_model(dir, o, type);
    py::gil_scoped_acquire gil;
    if (!m.note.empty()) warn(python_words(m.note));
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
        py::module_::import("sys").attr("stderr").attr("write")(readable(line));
      }
    });
  }
  return records;
}

// The positions of the records a merge keeps, in grid order; each record (where, index, cells,
// grid), -1 or "" for what it lacks.
std::vector<size_t> merge_plan(const std::vector<std::tuple<py::object, long long, long long, py::object>>& records,
                               bool partial) {
  std::vector<GridRecord> r;
  for (const auto& [where_in, index, cells, grid] : records) {
    const std::string where = text_arg(where_in, "merge");
    r.push_back({where, index, cells, text_arg(grid, "merge: " + where + ": grid")});
  }
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
        py::arg("key_tokens") = false, py::arg("key_short") = 4096, py::arg("key_step") = 0, py::arg("key_alpha") = 2.0,
        py::arg("key_beta") = -2.0, py::arg("key_model") = py::none(), py::arg("key_config") = py::none(),
        "pert.sweep's cells, run as pert sweep runs them, as records");
  m.def("_merge_plan", &merge_plan, py::arg("records"), py::arg("partial"),
        "pert.merge's records to keep, in grid order");
}

}  // namespace pert::python
