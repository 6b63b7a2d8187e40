// Windowed attention with attention sinks (StreamingLLM, Xiao et al. 2024; mit-han-lab/
// streaming-llm): query m sees the first S keys and the last W (itself included), m − W < n ≤ m.
// positions "cache" (StreamingLLM's pos-shift): positions are slots in that cache, so window
// keys keep their distance m − n and the sinks sit just before the window, at distance
// min(m, S + W − 1) − n; "original": every pair at its text positions.
#include "attention/plugins.hpp"

namespace pert {

namespace {
struct Streaming final : ExtensionConfig {
  int sinks_ = 4, window = 0;
  bool cache_positions = true;
  const char* type() const override { return "streaming"; }
  json to_json() const override {
    return {{"sinks", sinks_}, {"window", window}, {"positions", cache_positions ? "cache" : "original"}};
  }
  std::string describe() const override {
    return "StreamingLLM (Xiao et al. 2024): " + std::to_string(sinks_) + " attention sinks + the last " +
           std::to_string(window) + " keys, positions " + (cache_positions ? "within the cache" : "as in the text");
  }
  bool masks() const override { return true; }
  int first_key(int m) const override { return std::max(0, m - window + 1); }
  int sinks() const override { return sinks_; }
  bool remaps() const override { return cache_positions; }
  int near_first(int m) const override { return m - window + 1; }
  double far_query(int m) const override { return std::min(m, sinks_ + window - 1); }
  bool far_keys_are_keys() const override { return true; }
};
}  // namespace

std::shared_ptr<const ExtensionConfig> parse_streaming(Fields& f, const PluginContext& context) {
  auto e = std::make_shared<Streaming>();
  e->sinks_ = int(f.integer("sinks", 0, kMaxCount, 4));
  e->window = window_field(f, "window", context.trained - e->sinks_);
  const std::string positions = f.string("positions", "cache");
  if (positions != "cache" && positions != "original")
    f.fail("positions", "must be \"cache\" or \"original\", got \"" + positions + "\"");
  e->cache_positions = positions == "cache";
  return e;
}

}  // namespace pert
