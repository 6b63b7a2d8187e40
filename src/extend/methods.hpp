// Private to src/: one parse function per method file of the "extend" block, collected by
// registry.cpp. Each reads its fields through `f` (which words its errors and, after the parse,
// refuses fields the method did not read).
#pragma once
#include <memory>

#include "../config_fields.hpp"
#include "pert/positions.hpp"

namespace pert {

// What a method may read besides its block: the model (its scheme already parsed), and L, the
// trained length (original_max_position_embeddings when the config gives it, else
// max_position_embeddings), from which the defaults are drawn.
struct ExtendContext {
  const ModelConfig& model;
  int trained;
};
using ParseExtension = std::shared_ptr<const ExtensionConfig> (*)(Fields& f, const ExtendContext& context);

std::shared_ptr<const ExtensionConfig> parse_self_extend(Fields& f, const ExtendContext& context);
std::shared_ptr<const ExtensionConfig> parse_rerope(Fields& f, const ExtendContext& context);
std::shared_ptr<const ExtensionConfig> parse_leaky_rerope(Fields& f, const ExtendContext& context);
std::shared_ptr<const ExtensionConfig> parse_streaming(Fields& f, const ExtendContext& context);
std::shared_ptr<const ExtensionConfig> parse_blockwise(Fields& f, const ExtendContext& context);
std::shared_ptr<const ExtensionConfig> parse_logn(Fields& f, const ExtendContext& context);

// The "extend" object: each key a registered method, parsed by its file; then the rules that
// span methods (one pattern at most; remapping needs a rotary scheme).
std::vector<std::shared_ptr<const ExtensionConfig>> parse_extend(const json& block, const std::string& source,
                                                                const ExtendContext& context);

// A window-like size: an integer in [1, kMaxCount], by default `def` (at least 1).
inline int window_field(Fields& f, const std::string& key, int def) {
  return f.positive(key, kMaxCount, std::max(1, def));
}

}  // namespace pert
