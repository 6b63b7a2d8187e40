// Error types. Every message is one line that names the file (or setting) and the problem,
// so a front end can print it as is and exit non-zero.
//
// The library names what its caller set by the setting's own field name in backticks:
// `n_ctx`, `n_keep`, `stride`, `allow_scheme_change`, and `set KEY=VALUE` for a config override.
// Each front end words them as its own flags or keywords (render_fields: the CLI's -c, --keep,
// --set KEY=VALUE; Python's n_ctx, keep, set={...}); unrendered, the names read as they are.
#pragma once
#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

namespace pert {

// `message` with each `field` replaced by name(field), or by the field itself where name
// returns "" (a lone backtick stays as it is).
inline std::string render_fields(const std::string& message, const std::function<std::string(const std::string&)>& name) {
  std::string out;
  size_t at = 0;
  while (at < message.size()) {
    const size_t open = message.find('`', at), close = open == std::string::npos ? open : message.find('`', open + 1);
    if (close == std::string::npos) break;
    const std::string field = message.substr(open + 1, close - open - 1), word = name(field);
    out += message.substr(at, open - at) + (word.empty() ? field : word);
    at = close + 1;
  }
  return out + message.substr(std::min(at, message.size()));
}

// A list as a message names it, "a, b, c": each item in name(item)'s words, those it gives
// "" for left out (comma_list(items): items that are strings already).
template <class Items, class Name>
std::string comma_list(const Items& items, Name name) {
  std::string out;
  for (const auto& item : items) {
    const std::string words = name(item);
    if (!words.empty()) out += (out.empty() ? "" : ", ") + words;
  }
  return out;
}
template <class Items>
std::string comma_list(const Items& items) {
  return comma_list(items, [](const auto& item) { return std::string(item); });
}

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
