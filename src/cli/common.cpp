#include "common.hpp"

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
