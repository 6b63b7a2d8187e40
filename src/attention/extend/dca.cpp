// Dual Chunk Attention (An et al. 2024, ChunkLlama; Qwen2.5-1M's dual_chunk_attention_config as
// vLLM's DualChunkRotaryEmbedding and dual_chunk_flash_attn compute it): positions are cut into
// chunks of C = chunk_size − local_size from 0, every key is encoded at n mod C, and the query
// at m (chunk ⌊m/C⌋) at one of three positions by where the key lies:
//   same chunk          m mod C              (the true distance m − n)
//   the chunk before    min(m mod C + C, chunk_size)
//   older chunks        min(2C − 1, chunk_size)
// all in one softmax, so no distance exceeds chunk_size. With original_max_position_embeddings
// Lorig > 0 queries and keys are scaled by s(m + 1) and s(n + 1), s(l) = max(1, 0.1·ln(l/Lorig) + 1):
// vLLM's decoding (its prefill scales every key of a prompt by s(prompt length) instead; pert
// stays causal, so a prefill equals decoding token by token).
#include <algorithm>
#include <cmath>

#include "attention/plugins.hpp"

namespace pert {

namespace {
struct DualChunk final : ExtensionConfig {
  int chunk_size = 0, local_size = 0, original = 0;
  int chunk() const { return chunk_size - local_size; }
  const char* type() const override { return "dca"; }
  json to_json() const override {
    return {{"chunk_size", chunk_size}, {"local_size", local_size}, {"original_max_position_embeddings", original}};
  }
  std::string describe() const override {
    return "Dual Chunk Attention (An et al. 2024): chunks of " + std::to_string(chunk()) + " (chunk_size " +
           std::to_string(chunk_size) + " − local_size " + std::to_string(local_size) + "), distances at most " +
           std::to_string(chunk_size) +
           (original > 0 ? "; q and k × max(1, 0.1·ln(l/" + std::to_string(original) + ") + 1)" : "");
  }
  bool remaps() const override { return true; }
  int near_first(int m) const override { return m / chunk() * chunk(); }
  double far_query(int m) const override { return std::min(m % chunk() + chunk(), chunk_size); }
  double far_key(int n) const override { return n % chunk(); }
  bool has_farther() const override { return true; }
  int farther_first(int m) const override { return std::max(0, (m / chunk() - 1) * chunk()); }
  double farther_query(int) const override { return std::min(2 * chunk() - 1, chunk_size); }
  bool scales() const override { return original > 0; }
  double length_scale(int l) const { return original > 0 ? std::max(1.0, 0.1 * std::log(double(l) / original) + 1.0) : 1.0; }
  double query_scale(int m) const override { return length_scale(m + 1); }
  double key_scale(int n) const override { return length_scale(n + 1); }
  bool scales_keys() const override { return original > 0; }
};
}  // namespace

std::shared_ptr<const ExtensionConfig> parse_dca(Fields& f, const PluginContext& context) {
  auto e = std::make_shared<DualChunk>();
  e->chunk_size = window_field(f, "chunk_size", context.trained);
  e->local_size = int(f.integer("local_size", 0, kMaxCount, std::max(1, context.trained / 8)));
  if (e->local_size >= e->chunk_size)
    f.fail("local_size", "must be below chunk_size (" + std::to_string(e->chunk_size) + "): chunks are chunk_size − local_size long, got " +
                             std::to_string(e->local_size));
  e->original = int(f.integer("original_max_position_embeddings", 0, kMaxCount, 0));
  return e;
}

}  // namespace pert
