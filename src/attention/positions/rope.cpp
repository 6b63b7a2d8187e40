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
//   longrope θ_i / short_factor_i, or / long_factor_i once ℓ > L
// YaRN and LongRoPE multiply the rotated dims of q and k by an attention factor, as HF does
// by scaling cos and sin (LongRoPE's may differ up to L and beyond: short/long_mscale). xPos (Sun et al. 2022) scales pair i of q by ζ_i^(m/scale_base) and
// of k by ζ_i^(−n/scale_base), ζ_i = (2i/r + γ)/(1 + γ).
#include <algorithm>
#include <cmath>
#include <limits>

#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/rope.hpp"

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

class Rope final : public PositionEncoding {
 public:
  explicit Rope(const RopeConfig& p) : p_(p), half_(p.rotary_dim / 2), attention_factor_(rope_attention_factor(p, 1)) {
    const RopeScalingType t = p.scaling.type;
    on_read_ = t == RopeScalingType::Dynamic || t == RopeScalingType::LongRope;
    for (int i = 0; i < half_; ++i) zeta_.push_back((2.0 * i / p.rotary_dim + p.xpos.gamma) / (1.0 + p.xpos.gamma));
    if (!on_read_) theta_ = rope_inv_freq(p_, 1);  // static frequencies: computed once
    coarse_cos_.resize(size_t(half_));
    coarse_sin_.resize(size_t(half_));
    shift_cos_.resize(size_t(half_));
    shift_sin_.resize(size_t(half_));
    at_cos_.resize(size_t(half_));
    at_sin_.resize(size_t(half_));
  }

  bool rotates() const override { return true; }
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
    if (!on_read_) return 0;
    const int L = p_.scaling.original_max_position;
    if (pos < L) return L;  // plain frequencies (dynamic) or the short factors (LongRoPE)
    return p_.scaling.type == RopeScalingType::LongRope ? L + 1 : pos + 1;
  }

  // Makes the tables cover positions [0, pos0 + n) with the frequencies of `length`.
  void begin_forward(int length, int pos0, int n) override {
    if (on_read_) {
      fill_inv_freq(p_, length, next_theta_);
      const double factor = rope_attention_factor(p_, length);
      if (next_theta_ != theta_ || factor != attention_factor_) {
        theta_.swap(next_theta_);
        attention_factor_ = factor;
        rows_ = 0;
      }
    }
    const int rows = pos0 + n;
    if (rows <= rows_) return;
    const size_t cells = size_t(rows) * half_;
    cos_.resize(cells);
    sin_.resize(cells);
    if (p_.xpos.enabled) {
      xpos_q_.resize(cells);
      xpos_k_.resize(cells);
    }
    fill_angles(rows_, rows);
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

  // cos_ and sin_ of rows [from, to): m·θ_i as (64a + b)·θ_i, e^(i·64a·θ) · e^(i·b·θ) in double
  // from the exact values at multiples of 64 and at 0..63 (a length-dependent scaling rebuilds
  // the whole table every token past L: two sincos per 64 positions instead of one per position).
  void fill_angles(int from, int to) {
    constexpr int kFine = 64;
    if (rows_ == 0) fine_.clear();  // new frequencies (rows_ = 0 marks them); the capacity stays
    for (int b = fine_.empty() ? 0 : kFine; b < kFine; ++b)
      for (int i = 0; i < half_; ++i) {
        const double angle = double(b) * theta_[size_t(i)];
        fine_.push_back(std::cos(angle));
        fine_.push_back(std::sin(angle));
      }
    for (int a = from / kFine; a * kFine < to; ++a) {
      for (int i = 0; i < half_; ++i) {
        const double angle = double(a) * kFine * theta_[size_t(i)];
        coarse_cos_[size_t(i)] = std::cos(angle) * attention_factor_;
        coarse_sin_[size_t(i)] = std::sin(angle) * attention_factor_;
      }
      for (int m = std::max(from, a * kFine); m < std::min(to, (a + 1) * kFine); ++m) {
        const double* f = &fine_[size_t(m - a * kFine) * half_ * 2];
        float* c = &cos_[size_t(m) * half_];
        float* s = &sin_[size_t(m) * half_];
#pragma omp simd
        for (int i = 0; i < half_; ++i) {
          c[i] = float(coarse_cos_[size_t(i)] * f[2 * i] - coarse_sin_[size_t(i)] * f[2 * i + 1]);
          s[i] = float(coarse_sin_[size_t(i)] * f[2 * i] + coarse_cos_[size_t(i)] * f[2 * i + 1]);
        }
      }
    }
  }

  // A pure rotation by −delta·θ_i (the attention factor is in the keys already); for xPos
  // the key's magnitude moves from ζ^(−n/b) to ζ^(−(n−delta)/b), a factor ζ^(delta/b).
  // Length-dependent scalings cache keys unrotated: nothing to do.
  void shift_keys(float* k, int n_pos, int n_heads, ptrdiff_t pos_stride, ptrdiff_t head_stride, int delta) override {
    if (on_read_ || delta == 0) return;
    float* const c = shift_cos_.data();
    float* const s = shift_sin_.data();
    for (int i = 0; i < half_; ++i) {
      const double magnitude = p_.xpos.enabled ? std::pow(zeta_[size_t(i)], delta / p_.xpos.scale_base) : 1.0;
      c[i] = float(std::cos(-delta * theta_[size_t(i)]) * magnitude);
      s[i] = float(std::sin(-delta * theta_[size_t(i)]) * magnitude);
    }
    const RotatePairs turn = rotate_pairs_for(false);
    for (int t = 0; t < n_pos; ++t)
      for (int h = 0; h < n_heads; ++h) turn(k + t * pos_stride + h * head_stride, c, s, nullptr, half_);
  }

  // Angles computed per position (the tables hold integer positions only); no xPos here, as
  // the methods that call this refuse it.
  void rotate_at(float* x, const double* positions, int n_pos, int n_heads, ptrdiff_t pos_stride,
                 ptrdiff_t head_stride) const override {
    const RotatePairs turn = rotate_pairs_for(false);
    for (int t = 0; t < n_pos; ++t) {
      for (int i = 0; i < half_; ++i) {
        const double angle = positions[t] * theta_[size_t(i)];
        at_cos_[size_t(i)] = float(std::cos(angle) * attention_factor_);
        at_sin_[size_t(i)] = float(std::sin(angle) * attention_factor_);
      }
      for (int h = 0; h < n_heads; ++h) turn(x + t * pos_stride + h * head_stride, at_cos_.data(), at_sin_.data(), nullptr, half_);
    }
  }

  void rotate(float* x, int pos0, int n_pos, int n_heads, ptrdiff_t pos_stride, ptrdiff_t head_stride,
              bool is_query) const override {
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
  RotatePairs rotate_pairs_for(bool scaled) const {
    if (p_.layout == RopeLayout::Half) return scaled ? rotate_pairs<true, true> : rotate_pairs<true, false>;
    return scaled ? rotate_pairs<false, true> : rotate_pairs<false, false>;
  }

  const RopeConfig p_;
  int half_;
  double attention_factor_;
  bool on_read_ = false;
  std::vector<double> zeta_;        // [half] xPos bases
  std::vector<double> theta_;       // [half] frequencies the tables were built for
  std::vector<double> next_theta_;  // [half] those of the length at hand (length-dependent scalings)
  int rows_ = 0;                    // positions the tables cover
  std::vector<float> cos_, sin_;    // [rows][half], times the attention factor
  std::vector<float> xpos_q_, xpos_k_;  // [rows][half]
  std::vector<float> shift_cos_, shift_sin_;  // [half] one context shift's rotation
  std::vector<double> fine_;                  // [64][half][cos, sin] of b·θ_i
  std::vector<double> coarse_cos_, coarse_sin_;  // [half] of 64a·θ_i, times the attention factor
  mutable std::vector<float> at_cos_, at_sin_;  // [half] rotate_at's current position
};

}  // namespace

std::unique_ptr<PositionEncoding> RopeConfig::make(const ModelConfig&, const TensorLookup&) const {
  return std::make_unique<Rope>(*this);
}

}  // namespace pert
