// NoPE (Kazemnejad et al. 2023): no positional signal; the causal mask alone orders tokens.
// Every hook keeps its default, which does nothing.
#include "attention/plugins.hpp"

namespace pert {

namespace {
struct NoneConfig final : SchemeConfig {
  const char* type() const override { return "none"; }
  SchemeKind kind() const override { return SchemeKind::None; }
  nlohmann::json to_json() const override { return {{"type", type()}}; }
  std::string describe(int) const override { return "NoPE: no positional signal; only the causal mask orders tokens"; }
  std::unique_ptr<PositionEncoding> make(const ModelConfig&, const TensorLookup&) const override {
    return std::make_unique<PositionEncoding>();
  }
};
}  // namespace

std::shared_ptr<const SchemeConfig> parse_none(Fields&, const PluginContext&) { return std::make_shared<NoneConfig>(); }

}  // namespace pert
