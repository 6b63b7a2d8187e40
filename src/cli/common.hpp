// What the subcommands share: the model-selection flags and machine-readable output.
#pragma once
#include <filesystem>
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

// The model directory to use: `given`, or with none the one models/default names (a link to a
// model directory, or a file holding its path relative to models/).
std::filesystem::path resolve_model_dir(const std::string& given);

// Each subcommand file defines one of these; main.cpp registers them all.
void add_inspect(CLI::App& app);
void add_generate(CLI::App& app);

}  // namespace pert::cli
