// ReRoPE (Su 2023, kexue.fm/archives/9708; bojone/rerope): the relative position is
// min(m − n, w): pairs within the window w keep theirs, farther ones all sit at distance w
// (query at position w, key unrotated at 0), so no distance exceeds what the model saw.
#include "attention/plugins.hpp"

namespace pert {

namespace {
struct ReRope final : ExtensionConfig {
  int window = 0;
  const char* type() const override { return "rerope"; }
  json to_json() const override { return {{"window", window}}; }
  std::string describe() const override {
    return "ReRoPE (Su 2023): relative positions capped at " + std::to_string(window);
  }
  bool remaps() const override { return true; }
  int near_first(int m) const override { return m - window + 1; }
  double far_query(int) const override { return window; }
  double far_key(int) const override { return 0.0; }
};
}  // namespace

std::shared_ptr<const ExtensionConfig> parse_rerope(Fields& f, const PluginContext& context) {
  auto e = std::make_shared<ReRope>();
  e->window = window_field(f, "window", context.trained / 4);
  return e;
}

}  // namespace pert
