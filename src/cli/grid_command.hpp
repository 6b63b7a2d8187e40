// A grid command: the CLI's front end of the library's grid (pert/grid.hpp), a measure of every
// (model, config, length) cell, resumable (cells already in --out are skipped), shardable
// (--shard K/N) and mergeable (--merge, --status). `pert sweep` measures perplexity (cmd_sweep.cpp),
// `pert attention` the statistics of the attention weights (cmd_attention.cpp).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "pert/grid.hpp"

namespace pert::cli {

// Adds `name` (the grid's flags, and the measure's that `add_flags` adds: -f and the rest of the
// cells' settings, into its spec()) with `description`, measuring with `measure`.
void add_grid_command(CLI::App& app, const std::string& name, const std::string& description,
                      std::shared_ptr<Measure> measure, const std::function<void(CLI::App& cmd)>& add_flags);

}  // namespace pert::cli
