// A grid command: a measure of every (model, config, length) cell, resumable (cells already in
// --out are skipped), shardable (--shard K/N) and mergeable (--merge, --status). `pert sweep`
// measures perplexity (sweep.cpp), `pert attention` the statistics of the attention weights
// (attention.cpp); the grid is the same code for both (sweep.cpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "pert/evaluation.hpp"
#include "pert/model.hpp"

namespace pert::cli {

// What one cell computes and how cells read as a table and a CSV.
class Measure {
 public:
  virtual ~Measure() = default;
  virtual const char* name() const = 0;        // a file's settings.measure: "perplexity", "attention"
  virtual void add_flags(CLI::App& cmd) = 0;   // -f and the rest of the cells' settings, into spec()
  virtual const EvalSpec& spec() const = 0;    // the text, its windows and its tokens
  // What every cell's result depends on besides model, config and length (the text's hash and
  // the model flags are added by the grid); `file`: the settings of --out (`out`) as found (null: none).
  virtual nlohmann::json settings(const nlohmann::json& file, const std::string& out) = 0;
  // One cell's result fields; pert::Error for a cell that cannot run (then an "error" cell).
  virtual nlohmann::json run(const Model& model, const std::vector<int>& tokens, int length, int bos, CacheType cache,
                             const std::string& label, bool quiet) const = 0;
  virtual std::string summary(const nlohmann::json& cell) const = 0;  // the cell's line on stderr
  virtual std::string table(const nlohmann::json& cells) const = 0;   // Markdown, for stdout
  virtual std::string csv(const nlohmann::json& sweep) const = 0;
};

// Adds `name` (its flags and the grid's) with `description`, measuring with `measure`.
void add_grid_command(CLI::App& app, const std::string& name, const std::string& description,
                      std::shared_ptr<Measure> measure);

}  // namespace pert::cli
