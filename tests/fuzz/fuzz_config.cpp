// Fuzzes the config parser with overrides: input = config.json text, then optionally a NUL
// byte and newline-separated "--set key.path=value" strings. Parse, apply the overrides, and
// validate (pert::parse_model_config); hostile values must give a pert::Error. An accepted
// config must then render (to_json, describe), list its tensors, and build its positional
// scheme and run its hooks (distance_profile) without a crash: that is the promise of
// "validated here and nowhere else".
#include <algorithm>
#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "pert/config.hpp"
#include "pert/json_util.hpp"
#include "pert/model_dir.hpp"
#include "pert/positions.hpp"

namespace {

// Zero tables for the schemes that read weights, when small enough to allocate; each its own,
// kept in `tables` for as long as the scheme reads it (DeBERTa holds several at once).
const float* zero_table(const pert::ModelConfig& cfg, const std::string& name, std::list<std::vector<float>>& tables) {
  for (const pert::ExpectedTensor& e : pert::position_tensors(cfg))
    if (e.name == name) {
      int64_t n = 1;
      for (int64_t d : e.shape) n *= d;
      size_t held = 0;
      for (const std::vector<float>& t : tables) held += t.size();
      if (n > (1 << 22) || held + size_t(n) > (1 << 24)) return nullptr;
      return tables.emplace_back(size_t(n), 0.0f).data();
    }
  fuzz::fail("scheme asked for tensor '" + name + "' that position_tensors() does not list");
}

void exercise(const pert::ModelConfig& cfg) {
  (void)pert::to_json(cfg).dump();
  (void)pert::describe(cfg.position, cfg.head_dim);
  (void)pert::expected_tensors(cfg);
  // Bounded work per input: distance_profile allocates [positions][hidden] and loops heads.
  if (cfg.hidden_size > 4096 || cfg.head_dim > 4096 || cfg.n_heads > 256) return;
  const nlohmann::json block = pert::to_json(cfg.position);
  if (block.value("max_distance", 0) > (1 << 16)) return;  // t5 tabulates its buckets up to it
  bool missing = false;
  std::list<std::vector<float>> tables;
  const pert::TensorLookup lookup = [&](const std::string& name) {
    const float* t = zero_table(cfg, name, tables);
    missing |= !t;
    return t;
  };
  (void)pert::make_position_encoding(cfg, lookup);
  if (missing) return;
  const int trained = block.contains("scaling") ? block["scaling"].value("original_max_position_embeddings", 0) : 0;
  const int past_trained = std::min(trained + 1, 300);
  for (int query : {8, past_trained}) {
    const int64_t work = int64_t(query + 1) * std::max<int64_t>(cfg.hidden_size, int64_t(cfg.n_heads) * cfg.head_dim);
    if (work <= (1 << 20)) (void)pert::distance_profile(cfg, lookup, query, query);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = fuzz::bytes(data, size);
  const size_t nul = in.find('\0');
  const std::string_view text = in.substr(0, nul);
  std::vector<std::string> sets;
  if (nul != std::string_view::npos) {
    std::string_view rest = in.substr(nul + 1);
    while (!rest.empty() && sets.size() < 16) {
      const size_t nl = rest.find('\n');
      sets.emplace_back(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    }
  }
  fuzz::expect_pert_errors("config", [&] {
    const nlohmann::json json = pert::apply_overrides(pert::parse_json(text, "fuzz/config.json"),
                                                      pert::ConfigOverrides{{}, sets});
    (void)pert::ignored_config_keys(json);
    exercise(pert::parse_model_config(json, "fuzz/config.json"));
  });
  return 0;
}
