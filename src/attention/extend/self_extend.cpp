// Self-Extend (Jin et al. 2024, "LLM Maybe LongLM", Alg. 1; datamllab/LongLM): pairs closer than
// the neighbour window W keep their positions; farther ones use grouped positions, query
// ⌊m/G⌋ + W − ⌊W/G⌋ and key ⌊n/G⌋, so no distance exceeds what the model was trained on.
// Both kinds share one softmax. (The authors' current eager code writes W/G as a real
// division; its decode path, legacy patch and paper floor it, as here: they agree when G | W.)
//
// mode "llama.cpp": llama.cpp's --grp-attn-n G --grp-attn-w W (examples/main), which divides
// cached key positions in place each time W more tokens arrive, emulated token by token: after
// K = ⌊m/W⌋ compressions keys n < K·W sit at ⌊n/G⌋ and the rest at n − K(W − W/G), as the
// query does, so the exact window is the keys since the last block boundary (1 to W of them).
#include "attention/plugins.hpp"

namespace pert {

namespace {
struct SelfExtend final : ExtensionConfig {
  int window = 0, group = 0;
  bool llama = false;  // mode "llama.cpp"

  const char* type() const override { return "self_extend"; }
  json to_json() const override { return {{"window", window}, {"group", group}, {"mode", llama ? "llama.cpp" : "exact"}}; }
  std::string describe() const override {
    return llama ? "Self-Extend as llama.cpp's --grp-attn-n " + std::to_string(group) + " --grp-attn-w " + std::to_string(window) +
                       " (cached positions divided by G each W tokens, emulated token by token)"
                 : "Self-Extend (Jin et al. 2024): neighbour window " + std::to_string(window) + ", group size " +
                       std::to_string(group) + " beyond it";
  }
  bool remaps() const override { return true; }
  int near_first(int m) const override { return llama ? m / window * window : m - window + 1; }
  double far_query(int m) const override {
    if (llama) return m - double(m / window) * (window - window / group);
    return m / group + window - window / group;
  }
  double far_key(int n) const override { return n / group; }
};
}  // namespace

std::shared_ptr<const ExtensionConfig> parse_self_extend(Fields& f, const PluginContext& context) {
  auto e = std::make_shared<SelfExtend>();
  e->window = window_field(f, "window", context.trained / 4);
  e->group = int(f.integer("group", 1, kMaxCount, 8));
  const std::string mode = f.string("mode", "exact");
  if (mode != "exact" && mode != "llama.cpp") f.fail("mode", "must be \"exact\" or \"llama.cpp\", got \"" + mode + "\"");
  e->llama = mode == "llama.cpp";
  if (e->llama && e->window % e->group)
    f.fail("window", "must be a multiple of group in mode llama.cpp (as llama.cpp asserts), got " + std::to_string(e->window) +
                         " and " + std::to_string(e->group));
  return e;
}

}  // namespace pert
