// What the subcommands share: the model-selection flags and machine-readable output.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pert/config.hpp"

namespace pert::cli {

// --config FILE (repeatable) and --set key.path=value (repeatable), applied in that order.
struct ConfigFlags {
  std::vector<std::string> files;
  std::vector<std::string> sets;

  void add_to(CLI::App& app);
  ConfigOverrides overrides() const;
};

// Each subcommand file defines one of these; main.cpp registers them all.
void add_inspect(CLI::App& app);

}  // namespace pert::cli
