// RoPE's config block (scheme "rope", src/attention/positions/rope_config.cpp): base, rotary dims, pair
// layout, the scalings that stretch it past the trained length, and xPos.
#pragma once
#include <vector>

#include "pert/positions.hpp"

namespace pert {

enum class RopeLayout { Half, Interleaved };  // pairs (i, i + r/2) or (2i, 2i + 1)
enum class RopeScalingType { None, Linear, Ntk, Dynamic, Yarn, Llama3, LongRope };
// Which length picks LongRoPE's short or long factors (and attention factor):
//   Sequence  the whole sequence's, as transformers runs it: every position of a forward and every
//             cached one takes those of the sequence's length (max position + 1), and the cache is
//             re-encoded when that length crosses L (InferenceState::forward)
//   Position  each position's own: position m as part of a sequence of m + 1 tokens (causal)
enum class LongRopeChoice { Sequence, Position };

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
  LongRopeChoice longrope_choice = LongRopeChoice::Sequence;  // longrope: "longrope_choice"
};

struct XPosConfig {
  bool enabled = false;
  double gamma = 0.4;
  double scale_base = 512.0;
};

struct RopeConfig final : SchemeConfig {
  double base = 10000.0;  // θ base
  int rotary_dim = 0;     // r, even, <= head_dim (resolved default head_dim)
  RopeLayout layout = RopeLayout::Half;
  RopeScaling scaling;
  XPosConfig xpos;
  // M-RoPE (Qwen2/2.5-VL, Qwen3-VL): each rotary pair turns by the position on one of three axes
  // (t, h, w), mrope_section[a] pairs for axis a (summing to r/2): contiguous runs t, h, w, or
  // interleaved t, h, w, t, h, w, ... while each axis has pairs left (Qwen3-VL). Empty: plain RoPE.
  std::vector<int> mrope_section;
  bool mrope_interleaved = false;

  const char* type() const override { return "rope"; }
  SchemeKind kind() const override { return SchemeKind::Rotary; }
  nlohmann::json to_json() const override;
  std::string describe(int head_dim) const override;
  std::string identity() const override { return xpos.enabled ? "rope+xpos" : "rope"; }
  std::string label() const override;
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override;
};

// Inverse frequencies θ_i (i < rotary_dim/2) after scaling, for a sequence `length` long, and
// the attention factor that multiplies the rotated parts of q and k.
std::vector<double> rope_inv_freq(const RopeConfig& rope, int length);
double rope_attention_factor(const RopeConfig& rope, int length = 1);
const char* rope_scaling_name(RopeScalingType type);
// M-RoPE's axis (0 t, 1 h, 2 w) of each rotary pair [r/2]; empty for plain RoPE.
std::vector<int> mrope_axes(const RopeConfig& rope);

}  // namespace pert
