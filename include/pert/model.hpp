// A llama-style decoder (docs/design.md): weights in F32, and an inference state holding the KV
// cache and every scratch buffer, so a forward pass allocates nothing.
//
//   h   = x + o_proj(attn(rmsnorm(x)))     (projections with biases where the architecture has them)
//   out = h + down(silu(gate(rmsnorm(h))) * up(rmsnorm(h)))
//   logits = lm_head(rmsnorm(out of the last layer))
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pert/attention.hpp"
#include "pert/config.hpp"
#include "pert/gguf.hpp"
#include "pert/ops.hpp"
#include "pert/positions.hpp"
#include "pert/quants.hpp"

namespace pert {

struct LayerWeights {
  const float* attn_norm;  // [d]
  Weight wq;               // [n_heads·head_dim][d]
  Weight wk;               // [n_kv_heads·head_dim][d]
  Weight wv;               // [n_kv_heads·head_dim][d]
  Weight wo;               // [d][n_heads·head_dim]
  const float* ffn_norm;   // [d]; null for a parallel block (Cohere: the MLP reads attn_norm's output)
  Weight w_gate;           // [ffn][d]
  Weight w_up;             // [ffn][d]
  Weight w_down;           // [d][ffn]
  // Biases, null where the architecture has none (ModelConfig::qkv_bias, o_bias, mlp_bias).
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;  // [q_dim] [kv_dim] [kv_dim] [d]
  const float *b_gate = nullptr, *b_up = nullptr, *b_down = nullptr;         // [ffn] [ffn] [d]
  const float *q_norm = nullptr, *k_norm = nullptr;  // [head_dim] each (ModelConfig::qk_norm)
  // Gemma: the attention's and the MLP's outputs normalised before they join x (sandwich_norms)
  const float *post_attn_norm = nullptr, *post_ffn_norm = nullptr;  // [d] each
};

// What the matrices are kept and multiplied in; norms and positional tables stay F32.
//   Auto  as stored: a GGUF file's matrices in their own blocks (Q4_K, F16, ...), read in place
//         from the mapping; a safetensors model's in F32
//   F32   exact against the reference; BF16: half the memory traffic
//   Q8    pert's 8-bit packing: Q8_0's numbers (blocks of 32 int8, one F16 scale each, ~0.27 of
//         F32's bytes) laid out 16 rows side by side for the VNNI/AVX2 kernels (ops.hpp)
//   Q8_0 ... Q6_K  GGML's blocks (quants.hpp), quantized at load (or kept, when the file has them)
enum class WeightType { F32, BF16, Q8, Auto, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K };
const char* weight_type_name(WeightType type);  // "F32", "Q4_K", "auto" ...
// The --dtype spellings: "auto", "f32", "bf16", "q8", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
// "q4_k", "q5_k", "q6_k"; pert::Error "dtype: ..." for anything else.
WeightType parse_weight_type(const std::string& name);
const std::vector<std::string>& weight_type_flags();  // those spellings, in that order
// What --dtype `flag` means for `model`, as results record it: "auto" is "f32" for a model
// directory (it stores nothing quantized) and stays "auto" for a GGUF file.
std::string resolved_dtype(const std::string& flag, const std::filesystem::path& model);

class Model {
 public:
  // Opens, validates and loads a model directory or GGUF file; weights are converted once to
  // `type` (Auto: kept as stored where pert multiplies that type).
  static std::unique_ptr<Model> load(const std::filesystem::path& dir, const ConfigOverrides& overrides = {},
                                     WeightType type = WeightType::Auto);

  const ModelConfig& config() const { return config_; }
  WeightType weight_type() const { return type_; }
  const float* tensor(const std::string& name) const;  // F32 data of a loaded F32 tensor
  const GgufFile* gguf() const { return gguf_.get(); }  // the file it was loaded from, if a GGUF file
  void embedding(int token, float* out) const;          // out[d] = the token's embedding row
  // Bytes of the matrices one decode step reads, as kept: every layer's projections and the
  // output's (the embedding's one row, norms and biases are left out: a few kilobytes).
  size_t matrix_bytes() const;

  Weight embed;                       // [vocab][d]
  std::vector<LayerWeights> layers;
  const float* final_norm = nullptr;  // [d]
  Weight lm_head;                     // [vocab][d]; the embedding when tied

 private:
  Weight weight(const std::string& name) const;
  const float* optional_tensor(const std::string& name) const;  // null when not loaded
  ModelConfig config_;
  WeightType type_ = WeightType::F32;
  std::map<std::string, std::vector<float>> tensors_;
  std::map<std::string, std::vector<uint16_t>> bf16_tensors_;
  struct Q8Tensor {
    std::vector<uint8_t> packed;   // ops.hpp's Q8 layout
    std::vector<uint16_t> scales;  // F16
  };
  std::map<std::string, Q8Tensor> q8_tensors_;
  std::map<std::string, std::vector<uint8_t>> block_tensors_;  // made at load: GGML blocks, [N] rows or panels of 8
  std::map<std::string, BlockMatrix> block_weights_;           // into block_tensors_ or the GGUF mapping
  std::shared_ptr<const void> storage_;                        // the GGUF mapping, while block_weights_ use it
  std::shared_ptr<const GgufFile> gguf_;
};

// `n_seq` sequences run in step (same positions, separate caches; one is the usual case,
// several let short windows share each matrix product): KV cache
// [seq][layer][kv_head][position][head_dim] for `n_ctx` positions, the positional scheme's
// tables, and scratch for up to `n_batch` tokens per sequence per step. The caches and all of
// attention are the Attention's (attention.hpp), which keeps keys and values in `cache_type`.
class InferenceState {
 public:
  InferenceState(const Model& model, int n_ctx, int n_batch = 512, int n_seq = 1,
                 CacheType cache_type = CacheType::F32);

  // Runs tokens [n_seq][n] at positions pos0..pos0+n-1, replacing what the caches held from
  // pos0 on (pos0 <= n_past()). Writes logits [n_seq][n][vocab], or only each sequence's last
  // [n_seq][vocab] unless `all_logits`. Runs in chunks of at most n_batch positions of one
  // length class, which for a causal model gives the same logits as one pass. Throws
  // pert::Error on bad input.
  void forward(const int* tokens, int n, int pos0, float* logits, bool all_logits);

  // Context shift (llama.cpp's): drops the cached positions [n_keep, n_keep + n_discard) and
  // moves the later ones back by n_discard, re-rotating RoPE keys by the delta. Returns false,
  // touching nothing, when the scheme's positions are baked into the cache (learned,
  // sinusoidal) or an "extend" method places pairs by absolute position: the caller must then
  // re-encode the tokens it keeps.
  bool shift(int n_keep, int n_discard);

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  int vocab_size() const { return c_.vocab_size; }
  int n_batch() const { return n_batch_; }
  int n_seq() const { return n_seq_; }
  CacheType cache_type() const { return units_[0]->cache_type(); }
  // Bytes the K and V caches hold: every layer's n_ctx positions, but a local layer's (a window
  // or chunk) only its span and a batch, in a ring (attention.hpp).
  size_t kv_cache_bytes() const {
    size_t bytes = 0;
    for (const auto& unit : units_) bytes += unit->cache_bytes();
    return bytes;
  }
  int max_positions() const { return position_->max_positions(); }  // 0: any (PositionEncoding)
  // Every layer's attention sums its weights' statistics into `stats` from the next forward on
  // (attention_stats.hpp; null: stop). The logits stay the same.
  void observe_attention(AttentionStats* stats) {
    for (auto& unit : units_) unit->observe(stats);
  }

 private:
  // Positions pos0..pos0+n-1 of every sequence: tokens of sequence s at tokens + s·stride,
  // logits (when wanted) at logits + s·logits_stride.
  void forward_chunk(const int* tokens, int stride, int n, int pos0, float* logits, size_t logits_stride,
                     bool all_logits);

  const Model& model_;
  const ModelConfig& c_;
  // One encoding per scheme the model uses (config.position, config.layers[i].position), and one
  // attention unit per scheme the layers use: its layers' caches, rotations and the kernel.
  std::vector<std::unique_ptr<PositionEncoding>> encodings_;
  PositionEncoding* position_ = nullptr;  // the model's: what adds to the embeddings
  std::vector<std::unique_ptr<Attention>> units_;
  std::vector<bool> prepares_;  // [unit]: the first unit of its encoding, which prepares its tables each step
  std::vector<Attention*> attention_;     // [layer]: its unit
  int n_ctx_, n_batch_, n_seq_, n_past_ = 0;

  std::vector<float> x_, xb_;    // [seq][n_batch][d]
  std::vector<float> q_, att_;   // [seq][n_batch][n_heads·head_dim]
  std::vector<float> k_, v_;     // [seq][n_batch][n_kv_heads·head_dim]
  std::vector<float> gate_, up_; // [seq][n_batch][ffn]
};

}  // namespace pert
