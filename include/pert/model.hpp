// A llama-style decoder (docs/design.md): weights in F32, and an inference state holding the KV
// cache and every scratch buffer, so a forward pass allocates nothing.
//
//   h   = x + o_proj(attn(rmsnorm(x)))     (projections with biases where the architecture has them)
//   out = h + down(silu(gate(rmsnorm(h))) * up(rmsnorm(h)))
//   logits = lm_head(rmsnorm(out of the last layer))
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "pert/block_types.hpp"
#include "pert/cache_type.hpp"
#include "pert/config.hpp"

namespace pert {

class AttentionStats;  // attention_stats.hpp
class GgufFile;        // gguf.hpp
class MoeBlock;        // src/model/moe.hpp: a mixture of experts' scratch
struct ModelWeights;   // src/model/weights.hpp: the matrices as the forward pass reads them

// What the matrices are kept and multiplied in; norms and positional tables stay F32.
//   Auto    as stored: a GGUF file's matrices in their own blocks (Q4_K, F16, ...), read in place
//           from the mapping; a safetensors model's in F32
//   F32     exact against the reference; BF16: half the memory traffic
//   Q8      pert's 8-bit packing: Q8_0's numbers (blocks of 32 int8, one F16 scale each, ~0.27 of
//           F32's bytes) laid out 16 rows side by side for the VNNI/AVX2 kernels (ops.hpp)
//   Blocks  GGML's blocks of `blocks` (the block types' rows with a --dtype spelling: Q8_0 ...
//           Q6_K; quants.hpp), quantized at load (or kept, when the file has them)
struct WeightType {
  enum Kind : uint8_t { Auto, F32, BF16, Q8, Blocks };
  Kind kind = Auto;
  BlockType blocks = BlockType::F32;  // Blocks only

  WeightType(Kind k = Auto) : kind(k) {}  // NOLINT: WeightType::F32 reads as a type
  explicit WeightType(BlockType b) : kind(Blocks), blocks(b) {}
  friend bool operator==(WeightType a, WeightType b) {
    return a.kind == b.kind && (a.kind != Blocks || a.blocks == b.blocks);
  }
  friend bool operator!=(WeightType a, WeightType b) { return !(a == b); }
};
const char* weight_type_name(WeightType type);  // "F32", "Q4_K", "auto" ...
// The --dtype spellings: "auto", "f32", "bf16", "q8", then the block types' ("q8_0", "q4_0",
// ... "q6_k"); pert::Error "dtype: ..." for anything else.
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
  // Bytes of the matrices one decode step reads, as kept: every layer's projections (of a mixture
  // of experts, the router and the n_used experts a token reads, at the mean expert's size) and
  // the output's (the embedding's one row, norms and biases are left out: a few kilobytes).
  size_t matrix_bytes() const;
  // The multiply-adds of those matrices for one token: N·K each (pert bench --roof's prompt rows).
  double matrix_macs() const;
  // The kernel family ("f32", "bf16", "q8" or "blocks") that does most of those multiply-adds.
  std::string matrix_family() const;

  // The matrices and vectors as the forward pass reads them (src/model/weights.hpp: the
  // library's own, complete only there).
  const ModelWeights& weights() const { return *weights_; }

  Model();   // (both out of line, where ModelWeights is complete)
  ~Model();

 private:
  ModelConfig config_;
  WeightType type_ = WeightType::F32;
  std::unique_ptr<ModelWeights> weights_;
  std::shared_ptr<const GgufFile> gguf_;
};

// `n_seq` sequences run in step (same positions, separate caches; one is the usual case,
// several let short windows share each matrix product): KV cache
// [seq][layer][kv_head][position][head_dim] for `n_ctx` positions, the positional scheme's
// tables, and scratch for up to `n_batch` tokens per sequence per step. The caches and all of
// attention are the Attention's (src/attention/attention.hpp), which keeps keys and values in `cache_type`.
class InferenceState {
 public:
  InferenceState(const Model& model, int n_ctx, int n_batch = 512, int n_seq = 1,
                 CacheType cache_type = CacheType::F32);
  ~InferenceState();

  // Runs tokens [n_seq][n] at positions pos0..pos0+n-1, replacing what the caches held from
  // pos0 on (pos0 <= n_past(); pos0 = 0 or pos0 >= earliest_rewind(): an error otherwise). Writes logits [n_seq][n][vocab], or only each sequence's last
  // [n_seq][vocab] unless `all_logits`. Runs in chunks of at most n_batch positions of one
  // length class, which for a causal model gives the same logits as one pass. A scheme that
  // encodes every position by the sequence's length (LongRoPE as transformers runs it,
  // positions.hpp) has positions [0, pos0) re-encoded first when this forward changes that
  // length's class (a generation crossing L, a rewind back below it), from the tokens kept
  // here. Throws pert::Error on bad input.
  // `positions` [n][3], when given, places token t on three axes (t, h, w) for M-RoPE (Qwen2-VL,
  // Qwen3-VL): the same for every sequence, each in [0, max(n_ctx, max_position_embeddings)); the
  // cache, masks and windows stay by index. Refused for any other scheme and with "extend" methods.
  void forward(const int* tokens, int n, int pos0, float* logits, bool all_logits, const int* positions = nullptr);

  // Context shift (llama.cpp's): drops the cached positions [n_keep, n_keep + n_discard) and
  // moves the later ones back by n_discard, re-rotating RoPE keys by the delta. Returns false,
  // touching nothing, when the scheme's positions are baked into the cache (learned,
  // sinusoidal) or an "extend" method places pairs by absolute position: the caller must then
  // re-encode the tokens it keeps.
  bool shift(int n_keep, int n_discard);

  int n_past() const { return n_past_; }
  // The earliest position after 0 that forward() may start from. Local layers (a window or
  // chunk) keep only their span and a batch of positions, in a ring: a rewind further back
  // than the ring holds would read overwritten keys, so it is refused. 0: any position.
  int earliest_rewind() const;
  int n_ctx() const { return n_ctx_; }
  int vocab_size() const { return c_.vocab_size; }
  int n_batch() const { return n_batch_; }
  int n_seq() const { return n_seq_; }
  CacheType cache_type() const;
  // Bytes the K and V caches hold: every layer's n_ctx positions, but a local layer's (a window
  // or chunk) only its span and a batch, in a ring (src/attention/attention.hpp).
  size_t kv_cache_bytes() const;
  int max_positions() const;  // 0: any (the model's PositionEncoding, positions.hpp)
  // Every layer's attention sums its weights' statistics into `stats` from the next forward on
  // (attention_stats.hpp; null: stop). The logits stay the same.
  void observe_attention(AttentionStats* stats);

 private:
  // Positions pos0..pos0+n-1 of every sequence: tokens of sequence s at tokens + s·stride,
  // logits (when wanted) at logits + s·logits_stride.
  void check_axis_positions(const int* positions, int n) const;  // forward()'s `positions`, refused when bad
  void forward_chunk(const int* tokens, int stride, int n, int pos0, float* logits, size_t logits_stride,
                     bool all_logits);

  const Model& model_;
  const ModelConfig& c_;
  // The positional encodings and the attention units (one per scheme and span: its layers'
  // caches, rotations and the kernel), in src/model/inference_state.cpp.
  struct Units;
  std::unique_ptr<Units> units_;
  int n_ctx_, n_batch_, n_seq_, n_past_ = 0;
  // For schemes that encode by the sequence's length (else empty): the tokens run so far
  // [seq][n_ctx], to re-encode the cache when the length's class changes; the length whose
  // class the cache holds; the statistics observed (none while re-encoding).
  std::vector<int> tokens_run_;
  int encoded_length_ = 0;
  AttentionStats* observed_ = nullptr;

  std::vector<float> x_, xb_;    // [seq][n_batch][d]
  std::vector<float> q_, att_;   // [seq][n_batch][n_heads·head_dim]
  std::vector<float> k_, v_;     // [seq][n_batch][n_kv_heads·head_dim]
  std::vector<float> gate_, up_; // [seq][n_batch][ffn]
  std::unique_ptr<MoeBlock> moe_;  // null without experts
};

}  // namespace pert
