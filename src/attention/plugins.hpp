// Private to src/: attention's plug-ins, the positional schemes (positions/, the config's
// "position" block) and the methods of the "extend" block (extend/). Each file has one parse
// function, registered once in positions_registry.cpp; it reads its fields through `f`, which words its
// errors and, after the parse, refuses fields the plug-in did not read.
#pragma once
#include <memory>

#include "model/config_fields.hpp"
#include "pert/positions.hpp"

namespace pert {

// What a plug-in may read besides its block: the model's sizes (for a method, its scheme is
// already parsed), and L, the trained length (original_max_position_embeddings when the config
// gives it, else max_position_embeddings), from which defaults are drawn.
struct PluginContext {
  const ModelConfig& model;
  int trained;
};

using ParseScheme = std::shared_ptr<const SchemeConfig> (*)(Fields& f, const PluginContext& context);
using ParseExtension = std::shared_ptr<const ExtensionConfig> (*)(Fields& f, const PluginContext& context);

// positions/
std::shared_ptr<const SchemeConfig> parse_none(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_learned(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_sinusoidal(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_rope(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_alibi(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_t5(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_kerple(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_fire(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_xl(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_deberta(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_fox(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_stick_breaking(Fields& f, const PluginContext& context);
std::shared_ptr<const SchemeConfig> parse_cope(Fields& f, const PluginContext& context);

// extend/
std::shared_ptr<const ExtensionConfig> parse_self_extend(Fields& f, const PluginContext& context);
std::shared_ptr<const ExtensionConfig> parse_rerope(Fields& f, const PluginContext& context);
std::shared_ptr<const ExtensionConfig> parse_leaky_rerope(Fields& f, const PluginContext& context);
std::shared_ptr<const ExtensionConfig> parse_streaming(Fields& f, const PluginContext& context);
std::shared_ptr<const ExtensionConfig> parse_blockwise(Fields& f, const PluginContext& context);
std::shared_ptr<const ExtensionConfig> parse_logn(Fields& f, const PluginContext& context);
std::shared_ptr<const ExtensionConfig> parse_dca(Fields& f, const PluginContext& context);

// The registry's lookups. The scheme named `type` parses `f`; an unknown type fails on "type",
// listing the known ones.
std::shared_ptr<const SchemeConfig> parse_scheme(const std::string& type, Fields& f, const PluginContext& context);
// The "extend" object: each key a registered method, parsed by its file; then the rules that
// span methods (one pattern at most; remapping needs a rotary scheme).
std::vector<std::shared_ptr<const ExtensionConfig>> parse_extend(const json& block, const std::string& source,
                                                                const PluginContext& context);

// A window-like size: an integer in [1, kMaxCount], by default `def` (at least 1).
inline int window_field(Fields& f, const std::string& key, int def) {
  return f.positive(key, kMaxCount, std::max(1, def));
}

}  // namespace pert
