// Model and positional-scheme configuration: parsed from an HF-style config.json (plus pert's
// "position" block), with overrides, validated here and nowhere else (DESIGN.md §1, §3).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pert {

enum class PositionType { None, Learned, Sinusoidal, Rope, Alibi, T5 };
enum class RopeLayout { Half, Interleaved };  // pairs (i, i + r/2) or (2i, 2i + 1)
enum class RopeScalingType { None, Linear, Ntk, Dynamic, Yarn, Llama3, LongRope };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::None;
  double factor = 1.0;                 // s
  int original_max_position = 0;       // L: the length the model was trained at
  double beta_fast = 32.0;             // yarn
  double beta_slow = 1.0;              // yarn
  double attention_factor = 1.0;       // yarn, longrope: multiplies q and k (resolved default)
  double long_attention_factor = 1.0;  // longrope past L: long_mscale when given, else attention_factor
  double mscale = 0.0;                 // yarn (DeepSeek): attention factor m(s, mscale) / m(s, mscale_all_dim)
  double mscale_all_dim = 0.0;         //   when both are non-zero; 0: not given
  bool truncate = true;                // yarn: floor/ceil the correction range (HF's default)
  double low_freq_factor = 1.0;        // llama3
  double high_freq_factor = 4.0;       // llama3
  std::vector<double> short_factor;    // longrope, rotary_dim/2 entries, used while length <= L
  std::vector<double> long_factor;     // longrope, used past L
};

struct XPosConfig {
  bool enabled = false;
  double gamma = 0.4;
  double scale_base = 512.0;
};

// One flat struct for every scheme; fields that a scheme does not read keep their defaults.
struct PositionConfig {
  PositionType type = PositionType::Rope;
  int max_positions = 0;       // learned: rows of model.embed_positions.weight
  bool clamp_beyond = false;   // learned: past the table, reuse the last row instead of failing
  double base = 10000.0;       // rope θ base, sinusoidal base
  double embed_scale = 1.0;    // sinusoidal: token embeddings are scaled by this first
  int rotary_dim = 0;          // rope: r, even, <= head_dim (resolved default head_dim)
  RopeLayout layout = RopeLayout::Half;
  RopeScaling scaling;
  XPosConfig xpos;
  double max_bias = 8.0;       // alibi
  int num_buckets = 32;        // t5
  int max_distance = 128;      // t5
};

// The HF architecture of a checkpoint: its tensor names and what its blocks add to llama's
// (architecture.cpp). Each is llama's math plus the extras below.
enum class Architecture { Llama, Mistral, Qwen2, Qwen3, Phi3 };

struct ModelConfig {
  Architecture architecture = Architecture::Llama;
  int vocab_size = 0;
  int hidden_size = 0;         // d
  int intermediate_size = 0;   // MLP width
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int max_position_embeddings = 0;  // the trained context length
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  int bos_token_id = -1;            // -1: none
  std::vector<int> eos_token_ids;
  bool qkv_bias = false;            // q/k/v projections add a bias (Qwen2; Llama's attention_bias)
  bool o_bias = false;              // o_proj adds a bias (Llama's attention_bias)
  bool mlp_bias = false;            // gate/up/down add a bias (Llama's mlp_bias)
  bool fused_projections = false;   // Phi-3: qkv_proj [q + 2·kv][d] and gate_up_proj [2·ffn][d], gate first
  bool qk_norm = false;             // Qwen3: RMSNorm of each query and key head before RoPE (q_norm, k_norm)
  std::vector<int> sliding_window;  // [layer]: 0 full causal attention; W: query m sees keys m − W < n ≤ m
  PositionConfig position;
};

// Overrides applied, in order, over a model's config.json.
struct ConfigOverrides {
  std::vector<std::filesystem::path> files;  // JSON merge patches (RFC 7386)
  std::vector<std::string> sets;             // "key.path=value"; value is JSON, else a string
  bool empty() const { return files.empty() && sets.empty(); }
};

// Applies overrides to a raw config. A --set value replaces what is at its path (null
// removes it); a file is merged as RFC 7386 says. Throws ConfigError / FormatError / IoError.
nlohmann::json apply_overrides(nlohmann::json config, const ConfigOverrides& overrides);

// Builds and validates the typed config. `source` names the config in error messages.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);

// Top-level keys of `config` that pert does not read (HF bookkeeping such as
// "architectures" or "torch_dtype"); shown by `pert inspect`.
std::vector<std::string> ignored_config_keys(const nlohmann::json& config);

// The resolved config, with every default filled in, as pert's own JSON.
nlohmann::json to_json(const ModelConfig& config);
nlohmann::json to_json(const PositionConfig& position);

// One line in words, e.g. "RoPE (half layout, base 10000, rotary dim 64/64), YaRN ×4 ...".
std::string describe(const PositionConfig& position, int head_dim);

const char* position_type_name(PositionType type);
const char* architecture_name(Architecture architecture);  // "LlamaForCausalLM", ...
// The architecture and its extras in words, e.g. "Qwen2ForCausalLM: q/k/v biases; sliding window 4096 on layers 21-23".
std::string describe_architecture(const ModelConfig& config);
const char* rope_scaling_name(RopeScalingType type);

}  // namespace pert
