// Leaky ReRoPE (Su 2023, kexue.fm/archives/9728; bojone/rerope leaky_rerope_patch.py): within
// the window w relative positions are kept; beyond, they grow k times slower, w + (m − n − w)/k,
// by encoding the query at (m + w(k − 1))/k and the key at n/k (fractional positions).
#include "attention/plugins.hpp"

namespace pert {

namespace {
struct LeakyReRope final : ExtensionConfig {
  int window = 0;
  double factor = 16.0;  // k
  const char* type() const override { return "leaky_rerope"; }
  json to_json() const override { return {{"window", window}, {"factor", factor}}; }
  std::string describe() const override {
    return "Leaky ReRoPE (Su 2023): relative positions kept up to " + std::to_string(window) + ", then growing 1/" +
           number_text(factor) + " as fast";
  }
  bool remaps() const override { return true; }
  int near_first(int m) const override { return m - window + 1; }
  double far_query(int m) const override { return (m + window * (factor - 1.0)) / factor; }
  double far_key(int n) const override { return n / factor; }
};
}  // namespace

std::shared_ptr<const ExtensionConfig> parse_leaky_rerope(Fields& f, const PluginContext& context) {
  auto e = std::make_shared<LeakyReRope>();
  e->window = window_field(f, "window", context.trained / 4);
  e->factor = f.number("factor", 16.0, [](double k) { return k > 1.0; }, "must be > 1 (1 is plain RoPE; for k → ∞ use rerope)");
  return e;
}

}  // namespace pert
