// Blockwise causal attention (Sun et al. 2022, "A Length-Extrapolatable Transformer", §3.3):
// queries are cut into blocks of B (half the trained length by default) and each sees the keys
// of its own block and the one before, so no distance reaches 2B. Positions are kept.
#include "attention/plugins.hpp"

namespace pert {

namespace {
struct Blockwise final : ExtensionConfig {
  int block = 0;
  const char* type() const override { return "blockwise"; }
  json to_json() const override { return {{"block", block}}; }
  std::string describe() const override {
    return "blockwise causal attention (Sun et al. 2022): blocks of " + std::to_string(block) + ", each sees itself and the one before";
  }
  bool masks() const override { return true; }
  int first_key(int m) const override { return std::max(0, (m / block - 1) * block); }
};
}  // namespace

std::shared_ptr<const ExtensionConfig> parse_blockwise(Fields& f, const PluginContext& context) {
  auto e = std::make_shared<Blockwise>();
  e->block = window_field(f, "block", context.trained / 2);
  return e;
}

}  // namespace pert
