// A grid command: the CLI's front end of the library's grid (pert/grid.hpp), a measure of every
// (model, config, length) cell, resumable (cells already in --out are skipped), shardable
// (--shard K/N) and mergeable (--merge, --status). `pert sweep` measures perplexity (sweep.cpp),
// `pert attention` the statistics of the attention weights (attention.cpp).
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "pert/grid.hpp"

namespace pert::cli {

// A grid's measure (pert/grid.hpp) with its flags: -f and the rest of the cells' settings, into spec().
class MeasureWithFlags : public Measure {
 public:
  virtual void add_flags(CLI::App& cmd) = 0;
};

// Adds `name` (its flags and the grid's) with `description`, measuring with `measure`.
void add_grid_command(CLI::App& app, const std::string& name, const std::string& description,
                      std::shared_ptr<MeasureWithFlags> measure);

}  // namespace pert::cli
