#include "common.hpp"

#include <fstream>

#include "pert/error.hpp"

namespace pert::cli {

void ConfigFlags::add_to(CLI::App& app) {
  app.add_option("--config", files,
                 "JSON merged over config.json (RFC 7386 merge patch); repeatable, applied in order")
      ->check(CLI::ExistingFile)
      ->allow_extra_args(false);
  app.add_option("--set", sets,
                 "Set one config value: key.path=value (value is JSON, else a string; null removes); "
                 "repeatable, applied after --config. E.g. --set position.type=alibi")
      ->allow_extra_args(false);
}

ConfigOverrides ConfigFlags::overrides() const {
  ConfigOverrides o;
  o.files.assign(files.begin(), files.end());
  o.sets = sets;
  return o;
}

}  // namespace pert::cli

namespace pert::cli {

std::filesystem::path resolve_model_dir(const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty()) return given;
  const fs::path pointer = PERT_DEFAULT_MODEL;
  std::error_code ec;
  if (fs::is_directory(pointer, ec)) return pointer;
  if (fs::is_regular_file(pointer, ec)) {
    std::ifstream in(pointer);
    std::string name;
    std::getline(in, name);
    return pointer.parent_path() / name;
  }
  throw IoError("no -m MODEL_DIR given and " + pointer.string() +
                " does not exist; convert a model first, e.g. /usr/bin/python3 tools/convert_llama2c.py "
                "../shared/data/models/stories260K/stories260K.bin ../shared/data/models/stories260K/tok512.bin "
                "build/models/stories260K, then pass -m build/models/stories260K");
}

}  // namespace pert::cli
