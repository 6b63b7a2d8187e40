// Error types. Every message is one line that names the file (or flag) and the problem,
// so the CLI can print it as is and exit non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace pert {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A file cannot be opened or read.
struct IoError : Error {
  using Error::Error;
};
// A file's bytes break its format (safetensors layout, JSON syntax, ...).
struct FormatError : Error {
  using Error::Error;
};
// A model description is inconsistent: config values, overrides, tensor set or shapes.
struct ConfigError : Error {
  using Error::Error;
};
// Overrides would run a model under another positional scheme than it was trained with.
struct SchemeChangeError : ConfigError {
  using ConfigError::ConfigError;
};

}  // namespace pert
