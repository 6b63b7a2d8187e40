// Rotary position embedding (Su et al., RoFormer) with its scaling variants and xPos.
//
// Pair (a, b) of a head vector rotates by m·θ_i: a' = a cos − b sin, b' = a sin + b cos, with
// pairs (i, i + r/2) in the "half" layout and (2i, 2i+1) in the "interleaved" one; dims past
// the rotary dim r are left alone. Frequencies follow HF transformers' modeling_rope_utils.py:
//   linear   θ_i / s                       (Chen et al. 2023, position interpolation)
//   ntk      base · s^(r/(r−2))            (bloc97, NTK-aware)
//   dynamic  base · (s·ℓ/L − (s−1))^(r/(r−2)) while ℓ > L   (HF "dynamic")
//   yarn     θ_i/s and θ_i blended by a ramp between the beta_fast / beta_slow correction dims
//            (floored / ceiled, as HF and llama.cpp do, unless truncate is false)  (Peng et al. 2023)
//   llama3   wavelength bands: long → θ/s, short → θ, smooth blend between
//   longrope θ_i / short_factor_i, or / long_factor_i once ℓ > L, ℓ the whole sequence's length
//            (transformers', "longrope_choice": "sequence") or each position's (m + 1, "position")
// YaRN and LongRoPE multiply the rotated dims of q and k by an attention factor, as HF does
// by scaling cos and sin (LongRoPE's may differ up to L and beyond: short/long_mscale). xPos (Sun et al. 2022) scales pair i of q by ζ_i^(m/scale_base) and
// of k by ζ_i^(−n/scale_base), ζ_i = (2i/r + γ)/(1 + γ).
#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/positions/rope.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

namespace {
// rope_inv_freq into `theta` (resized, so a warm vector allocates nothing).
void fill_inv_freq(const RopeConfig& p, int length, std::vector<double>& theta) {
  const RopeScaling& s = p.scaling;
  const int r = p.rotary_dim, half = r / 2;
  const double L = s.original_max_position;
  double base = p.base;
  if (s.type == RopeScalingType::Ntk) base *= std::pow(s.factor, r / (r - 2.0));
  if (s.type == RopeScalingType::Dynamic && length > L)
    base *= std::pow(s.factor * length / L - (s.factor - 1.0), r / (r - 2.0));

  theta.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) theta[size_t(i)] = std::pow(base, -2.0 * i / r);

  switch (s.type) {
    case RopeScalingType::None:
    case RopeScalingType::Ntk:
    case RopeScalingType::Dynamic:
      break;
    case RopeScalingType::Linear:
      for (double& t : theta) t /= s.factor;
      break;
    case RopeScalingType::Yarn: {
      // Dimension whose wavelength makes `rotations` turns over L positions.
      auto correction_dim = [&](double rotations) {
        return r * std::log(L / (rotations * 2.0 * M_PI)) / (2.0 * std::log(p.base));
      };
      const double fast = correction_dim(s.beta_fast), slow = correction_dim(s.beta_slow);
      const double low = std::max(s.truncate ? std::floor(fast) : fast, 0.0);
      double high = std::min(s.truncate ? std::ceil(slow) : slow, r - 1.0);
      if (high == low) high += 0.001;  // avoid a zero-width ramp
      for (int i = 0; i < half; ++i) {
        const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        const double extrapolation = 1.0 - ramp;  // 1: keep θ_i (high frequency), 0: interpolate
        theta[size_t(i)] = theta[size_t(i)] / s.factor * (1.0 - extrapolation) + theta[size_t(i)] * extrapolation;
      }
      break;
    }
    case RopeScalingType::Llama3: {
      const double low_wavelen = L / s.low_freq_factor, high_wavelen = L / s.high_freq_factor;
      for (double& t : theta) {
        const double wavelen = 2.0 * M_PI / t;
        if (wavelen > low_wavelen) {
          t /= s.factor;
        } else if (wavelen >= high_wavelen) {
          const double u = (L / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          t = (1.0 - u) * t / s.factor + u * t;
        }
      }
      break;
    }
    case RopeScalingType::LongRope: {
      const std::vector<double>& ext = length > L ? s.long_factor : s.short_factor;
      for (int i = 0; i < half; ++i) theta[size_t(i)] /= ext[size_t(i)];
      break;
    }
  }
}
}  // namespace

std::vector<double> rope_inv_freq(const RopeConfig& p, int length) {
  std::vector<double> theta;
  fill_inv_freq(p, length, theta);
  return theta;
}

double rope_attention_factor(const RopeConfig& p, int length) {
  const RopeScaling& s = p.scaling;
  if (s.type == RopeScalingType::LongRope) return length > s.original_max_position ? s.long_attention_factor : s.attention_factor;
  return s.type == RopeScalingType::Yarn ? s.attention_factor : 1.0;
}

namespace {

// One set of frequencies' turns e^(i·m·θ_j) at any position m = 64a + b, as coarse[a] × fine[b]:
// both exact in double (two sincos per 64 positions and pair instead of one per position, for a
// length-dependent scaling rebuilds them each token past L), the coarse ones times the attention
// factor, the product rounded to float once. Every rotation of a length-dependent scheme (the
// tables of one class, and each query's own turns in a forward over several) comes from at(), so
// all of them agree to the bit.
class Turns {
 public:
  static constexpr int kFine = 64;
  std::vector<double> theta;  // [half] the frequencies
  double factor = 1.0;        // the attention factor

  // Sets theta and factor first; then makes at() cover positions [0, positions).
  void cover(int positions) {
    const size_t half = theta.size(), groups = size_t((positions + kFine - 1) / kFine);
    if (fine_.empty())
      for (int b = 0; b < kFine; ++b) {
        for (size_t i = 0; i < half; ++i) fine_.push_back(std::cos(b * theta[i]));
        for (size_t i = 0; i < half; ++i) fine_.push_back(std::sin(b * theta[i]));
      }
    for (size_t a = coarse_.size() / (2 * half); a < groups; ++a) {
      for (size_t i = 0; i < half; ++i) coarse_.push_back(std::cos(double(a) * kFine * theta[i]) * factor);
      for (size_t i = 0; i < half; ++i) coarse_.push_back(std::sin(double(a) * kFine * theta[i]) * factor);
    }
  }
  void forget() { fine_.clear(), coarse_.clear(); }  // theta or factor changed (capacity stays)

  // c, s [half]: cos and sin of m·θ_j, times the factor.
  void at(int m, float* c, float* s) const {
    const int half = int(theta.size());
    const double *f_cos = &fine_[size_t(m % kFine) * 2 * half], *f_sin = f_cos + half;
    const double *g_cos = &coarse_[size_t(m / kFine) * 2 * half], *g_sin = g_cos + half;
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      c[i] = float(g_cos[i] * f_cos[i] - g_sin[i] * f_sin[i]);
      s[i] = float(g_sin[i] * f_cos[i] + g_cos[i] * f_sin[i]);
    }
  }

 private:
  std::vector<double> fine_;    // [64][cos, sin][half] of b·θ_j
  std::vector<double> coarse_;  // [groups][cos, sin][half] of 64a·θ_j, times the factor
};

class Rope final : public PositionEncoding {
 public:
  Rope(const RopeConfig& p, int head_dim) : p_(p), half_(p.rotary_dim / 2), head_dim_(head_dim) {
    const RopeScaling& s = p.scaling;
    // (LongRoPE with the same factors on both sides of L, as a GGUF file's rope_freqs, is static)
    const bool longrope = s.type == RopeScalingType::LongRope &&
                          (s.short_factor != s.long_factor || s.attention_factor != s.long_attention_factor);
    length_dependent_ = s.type == RopeScalingType::Dynamic || longrope;
    by_sequence_ = longrope && s.longrope_choice == LongRopeChoice::Sequence;
    on_read_ = length_dependent_ && !by_sequence_;
    for (int i = 0; i < half_; ++i) zeta_.push_back((2.0 * i / p.rotary_dim + p.xpos.gamma) / (1.0 + p.xpos.gamma));
    axes_ = mrope_axes(p);
    table_.theta = rope_inv_freq(p_, 1);  // static frequencies: for good
    table_.factor = rope_attention_factor(p_, 1);
    shift_cos_.resize(size_t(half_));
    shift_sin_.resize(size_t(half_));
  }

  bool rotates() const override { return true; }

  // M-RoPE: pair i of a token turns by its position on axis axes_[i], read from the tables' row of
  // that position (so positions equal on every axis turn it exactly as plain RoPE at that row).
  int position_axes() const override { return axes_.empty() ? 0 : 3; }
  void set_axis_positions(const int* positions, int pos0, int n) override {
    axis_n_ = positions ? n : 0;
    axis_pos0_ = pos0;
    axis_rows_ = 0;
    axis_pos_.assign(positions, positions + size_t(axis_n_) * 3);
    for (int p : axis_pos_) axis_rows_ = std::max(axis_rows_, p + 1);
  }
  bool rotates_keys_on_read() const override { return on_read_; }

  // xPos scales a key at position n by ζ^(−n/b), up to (1 + γ)/γ per b positions: past
  // e^80 (float's largest is e^88.7, less the q·k sums' headroom) scores overflow, so the
  // positions that fit are refused up front rather than turning into NaN logits mid-stream.
  int max_positions() const override {
    if (!p_.xpos.enabled) return 0;
    const double bound = std::floor(80.0 * p_.xpos.scale_base / std::log(1.0 / zeta_[0])) + 1;
    return bound >= double(std::numeric_limits<int>::max()) ? 0 : std::max(1, int(bound));
  }

  int length_class(int pos) const override {
    if (!length_dependent_) return 0;
    if (by_sequence_) return sequence_class(sequence_length_ > 0 ? sequence_length_ : pos + 1);
    const int L = p_.scaling.original_max_position;
    if (pos < L) return L;  // plain frequencies (dynamic) or the short factors (LongRoPE)
    return p_.scaling.type == RopeScalingType::LongRope ? L + 1 : pos + 1;
  }

  // LongRoPE by the whole sequence: its short factors up to L (class L), its long ones beyond (L + 1).
  bool encodes_by_sequence_length() const override { return by_sequence_; }
  int sequence_class(int length) const override {
    if (!by_sequence_) return 0;
    const int L = p_.scaling.original_max_position;
    return length > L ? L + 1 : L;
  }
  void begin_sequence(int length) override { sequence_length_ = length; }

  // Each class of a mixed forward keeps its turns up to its last query: at most kMixedBytes
  // of them at once (xPos's key scales stay with the one-class tables).
  int mixed_span(int pos, int max_n) const override {
    if (!on_read_ || p_.xpos.enabled || half_ > kMaxPairs) return 0;
    const double per_class = (Turns::kFine + (double(pos) + max_n) / Turns::kFine + 1) * half_ * 2 * sizeof(double);
    return int(std::clamp(kMixedBytes / per_class, 1.0, double(max_n)));
  }

  // Makes the tables cover positions [0, pos0 + n) with the frequencies of `length`.
  void begin_forward(int length, int pos0, int n) override {
    if (length_dependent_) {
      fill_inv_freq(p_, length, next_theta_);
      const double factor = rope_attention_factor(p_, length);
      if (next_theta_ != table_.theta || factor != table_.factor) {
        table_.theta.swap(next_theta_);
        table_.factor = factor;
        table_.forget();
        rows_ = 0;
      }
    }
    const int rows = std::max(pos0 + n, axis_rows_);
    if (rows <= rows_) return;
    const size_t cells = size_t(rows) * half_;
    cos_.resize(cells);
    sin_.resize(cells);
    table_.cover(rows);
    for (int m = rows_; m < rows; ++m) table_.at(m, &cos_[size_t(m) * half_], &sin_[size_t(m) * half_]);
    if (p_.xpos.enabled) {
      xpos_q_.resize(cells);
      xpos_k_.resize(cells);
    }
    for (int m = rows_; m < rows && p_.xpos.enabled; ++m)
      for (int i = 0; i < half_; ++i) {
        const size_t at = size_t(m) * half_ + i;
        const double e = m / p_.xpos.scale_base;
        xpos_q_[at] = float(std::pow(zeta_[size_t(i)], e));
        xpos_k_[at] = float(std::pow(zeta_[size_t(i)], -e));
        if (m >= max_positions())
          throw Error("xpos: position " + std::to_string(m) + " is past the " + std::to_string(max_positions()) +
                      " positions whose scales fit float (scale_base " + number_text(p_.xpos.scale_base) + ")");
      }
    rows_ = rows;
  }

  // The classes of positions [pos0, pos0 + n) (non-decreasing with the position), each one's
  // turns up to its last query (on one thread: this file is not a compute file, the fuzz
  // build links it without OpenMP; ~3% of a 512-position prefill at depth 4096).
  void begin_mixed(int pos0, int n) override {
    mixed_pos0_ = pos0;
    class_of_.assign(size_t(n), 0);
    class_end_.clear();
    for (int t = 0; t < n; ++t) {
      if (t > 0 && length_class(pos0 + t) != length_class(pos0 + t - 1)) class_end_.push_back(pos0 + t);
      class_of_[size_t(t)] = int(class_end_.size());
    }
    class_end_.push_back(pos0 + n);
    if (mixed_.size() < class_end_.size()) mixed_.resize(class_end_.size());
    for (size_t c = 0; c < class_end_.size(); ++c) {
      Turns& turns = mixed_[c];
      const int length = length_class(class_end_[c] - 1);
      fill_inv_freq(p_, length, turns.theta);
      turns.factor = rope_attention_factor(p_, length);
      turns.forget();
      turns.cover(class_end_[c]);
    }
  }

  void rotate_for_query(int query_pos, const float* src, float* dst, int pos0, int n_pos, int n_heads,
                        ptrdiff_t pos_stride, ptrdiff_t src_head_stride, ptrdiff_t dst_head_stride) const override {
    const Turns& turns = mixed_[size_t(class_of_[size_t(query_pos - mixed_pos0_)])];
    float c[kMaxPairs], s[kMaxPairs];
    const bool half_layout = p_.layout == RopeLayout::Half;
    const int r = 2 * half_;
    for (int t = 0; t < n_pos; ++t) {
      turns.at(pos0 + t, c, s);
      for (int h = 0; h < n_heads; ++h) {
        const float* from = src + t * pos_stride + h * src_head_stride;
        float* to = dst + t * pos_stride + h * dst_head_stride;
        if (half_layout) turn_pairs_into<true>(from, to, c, s, half_, half_);
        else turn_pairs_into<false>(from, to, c, s, half_, half_);
        if (from != to) std::copy(from + r, from + head_dim_, to + r);  // past the rotary dims
      }
    }
  }

  // A pure rotation by −delta·θ_i (the attention factor is in the keys already); for xPos
  // the key's magnitude moves from ζ^(−n/b) to ζ^(−(n−delta)/b), a factor ζ^(delta/b).
  // Keys cached unrotated (rotated on read): nothing to do. (LongRoPE by the sequence caches
  // them rotated with the frequencies of the cache's class, which the tables hold.)
  void shift_keys(float* k, int n_pos, int n_heads, ptrdiff_t pos_stride, ptrdiff_t head_stride, int delta) override {
    if (on_read_ || delta == 0) return;
    float* const c = shift_cos_.data();
    float* const s = shift_sin_.data();
    for (int i = 0; i < half_; ++i) {
      const double magnitude = p_.xpos.enabled ? std::pow(zeta_[size_t(i)], delta / p_.xpos.scale_base) : 1.0;
      c[i] = float(std::cos(-delta * table_.theta[size_t(i)]) * magnitude);
      s[i] = float(std::sin(-delta * table_.theta[size_t(i)]) * magnitude);
    }
    const RotatePairs turn = rotate_pairs_for(false);
    for (int t = 0; t < n_pos; ++t)
      for (int h = 0; h < n_heads; ++h) turn(k + t * pos_stride + h * head_stride, c, s, nullptr, half_);
  }

  // A whole position within the tables reads its row (Self-Extend's and ReRoPE's far keys, each
  // step again under a length-dependent scaling); others get their angles computed, kMaxPairs
  // pairs at a time on the stack (the decoding kernel calls this from its threads). No xPos
  // here, as the methods that call this refuse it.
  void rotate_at(float* x, const double* positions, int n_pos, int n_heads, ptrdiff_t pos_stride,
                 ptrdiff_t head_stride) const override {
    float c[kMaxPairs], s[kMaxPairs];
    for (int t = 0; t < n_pos; ++t) {
      const double p = positions[t];
      const bool row = p >= 0.0 && p < rows_ && p == std::floor(p);
      for (int i0 = 0; i0 < half_; i0 += kMaxPairs) {
        const int count = std::min(kMaxPairs, half_ - i0);
        const float* ct = row ? &cos_[size_t(p) * half_ + i0] : c;
        const float* st = row ? &sin_[size_t(p) * half_ + i0] : s;
        for (int i = 0; !row && i < count; ++i) {
          const double angle = p * table_.theta[size_t(i0 + i)];
          c[i] = float(std::cos(angle) * table_.factor);
          s[i] = float(std::sin(angle) * table_.factor);
        }
        for (int h = 0; h < n_heads; ++h) turn_pairs(x + t * pos_stride + h * head_stride, i0, count, ct, st);
      }
    }
  }

  void rotate(float* x, int pos0, int n_pos, int n_heads, ptrdiff_t pos_stride, ptrdiff_t head_stride,
              bool is_query) const override {
    if (axis_n_ > 0 && pos0 >= axis_pos0_ && pos0 + n_pos <= axis_pos0_ + axis_n_) {
      rotate_by_axes(x, pos0, n_pos, n_heads, pos_stride, head_stride);
      return;
    }
    const std::vector<float>* xpos = p_.xpos.enabled ? (is_query ? &xpos_q_ : &xpos_k_) : nullptr;
    const RotatePairs turn = rotate_pairs_for(xpos != nullptr);
    for (int t = 0; t < n_pos; ++t) {
      const size_t row = size_t(pos0 + t) * half_;
      const float* c = &cos_[row];
      const float* s = &sin_[row];
      const float* z = xpos ? &(*xpos)[row] : nullptr;
      for (int h = 0; h < n_heads; ++h) turn(x + t * pos_stride + h * head_stride, c, s, z, half_);
    }
  }

 private:
  // rotate() at the explicit positions of set_axis_positions (M-RoPE; no xPos, refused with it).
  void rotate_by_axes(float* x, int pos0, int n_pos, int n_heads, ptrdiff_t pos_stride, ptrdiff_t head_stride) const {
    float c[kMaxPairs], s[kMaxPairs];
    for (int t = 0; t < n_pos; ++t) {
      const int* at = &axis_pos_[size_t(pos0 - axis_pos0_ + t) * 3];
      for (int i0 = 0; i0 < half_; i0 += kMaxPairs) {
        const int count = std::min(kMaxPairs, half_ - i0);
        for (int i = 0; i < count; ++i) {
          const size_t cell = size_t(at[axes_[size_t(i0 + i)]]) * half_ + size_t(i0 + i);
          c[i] = cos_[cell];
          s[i] = sin_[cell];
        }
        for (int h = 0; h < n_heads; ++h) turn_pairs(x + t * pos_stride + h * head_stride, i0, count, c, s);
      }
    }
  }

  // Turns pair i of one head vector, (v[i], v[i + half]) in HF's half layout or (v[2i], v[2i+1])
  // interleaved, by (c[i], s[i]) and scales it by z[i] when Scaled (xPos). One instance per
  // case, so each loop is straight-line and vectorizes.
  using RotatePairs = void (*)(float* v, const float* c, const float* s, const float* z, int half);
  template <bool HalfLayout, bool Scaled>
  static void rotate_pairs(float* v, const float* c, const float* s, const float* z, int half) {
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      float* a = v + (HalfLayout ? i : 2 * i);
      float* b = a + (HalfLayout ? half : 1);
      const float zi = Scaled ? z[i] : 1.0f, a0 = *a, b0 = *b;
      *a = (a0 * c[i] - b0 * s[i]) * zi;
      *b = (a0 * s[i] + b0 * c[i]) * zi;
    }
  }
  // rotate_pairs<HalfLayout, false> from one vector into another, for `count` pairs from the
  // vectors' first (a pair's second element `half` further on in the half layout).
  template <bool HalfLayout>
  static void turn_pairs_into(const float* from, float* to, const float* c, const float* s, int count, int half) {
#pragma omp simd
    for (int i = 0; i < count; ++i) {
      const int ia = HalfLayout ? i : 2 * i, ib = ia + (HalfLayout ? half : 1);
      const float a0 = from[ia], b0 = from[ib];
      to[ia] = a0 * c[i] - b0 * s[i];
      to[ib] = a0 * s[i] + b0 * c[i];
    }
  }
  // Pairs [i0, i0 + count) of vector v, in place.
  void turn_pairs(float* v, int i0, int count, const float* c, const float* s) const {
    if (p_.layout == RopeLayout::Half) turn_pairs_into<true>(v + i0, v + i0, c, s, count, half_);
    else turn_pairs_into<false>(v + 2 * i0, v + 2 * i0, c, s, count, half_);
  }
  RotatePairs rotate_pairs_for(bool scaled) const {
    if (p_.layout == RopeLayout::Half) return scaled ? rotate_pairs<true, true> : rotate_pairs<true, false>;
    return scaled ? rotate_pairs<false, true> : rotate_pairs<false, false>;
  }

  static constexpr int kMaxPairs = 256;         // rotate_for_query's pairs on the stack
  static constexpr double kMixedBytes = 32 << 20;  // a mixed forward's turns, at most
  const RopeConfig p_;
  int half_, head_dim_;
  bool length_dependent_ = false;  // the frequencies depend on a length (dynamic, LongRoPE whose factors differ)
  bool by_sequence_ = false;       // ... on the whole sequence's (LongRoPE "sequence"): keys cached rotated
  bool on_read_ = false;           // ... on each position's: keys cached unrotated, rotated when read
  int sequence_length_ = 0;        // begin_sequence's length (0: not yet given)
  std::vector<double> zeta_;        // [half] xPos bases
  Turns table_;                     // the frequencies the tables were built for
  std::vector<double> next_theta_;  // [half] those of the length at hand (length-dependent scalings)
  int rows_ = 0;                    // positions the tables cover
  std::vector<float> cos_, sin_;    // [rows][half], times the attention factor
  std::vector<float> xpos_q_, xpos_k_;  // [rows][half]
  std::vector<float> shift_cos_, shift_sin_;  // [half] one context shift's rotation
  // M-RoPE: each pair's axis, and the explicit positions [axis_n][3] of tokens axis_pos0.. (none: 0)
  std::vector<int> axes_;
  std::vector<int> axis_pos_;
  int axis_pos0_ = 0, axis_n_ = 0, axis_rows_ = 0;
  // A forward over several length classes (begin_mixed):
  int mixed_pos0_ = 0;
  std::vector<int> class_of_;   // [n] each position's class
  std::vector<int> class_end_;  // [classes] one past each class's last position
  std::vector<Turns> mixed_;    // [classes] their turns (kept: the capacity stays)
};

}  // namespace

std::unique_ptr<PositionEncoding> RopeConfig::make(const ModelConfig& c, const TensorLookup&) const {
  return std::make_unique<Rope>(*this, c.head_dim);
}

}  // namespace pert
