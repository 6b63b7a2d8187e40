// GGML's block types: the table, and rows into and out of blocks (layouts: src/kernels/quants_blocks.hpp).
// The legacy quantizers (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) and MXFP4's round as GGML's reference
// ones do, so they write the same bytes; the K-quants' scale searches are pert's own, on GGML's idea: per
// sub-block a weighted least-squares fit over a few candidate grids, then the sub-blocks' scales
// (and mins) quantized to 6 or 8 bits against one F16 super-scale and the values requantized
// on the scales as stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.hpp"
#include "kernels/quants.hpp"
#include "kernels/quants_blocks.hpp"
#include "pert/error.hpp"

namespace pert {

using namespace quants;

namespace {

// a·b rounded to F32 on its own. C++ lets GCC fuse a·b + c into one FMA, which rounds once;
// GGML's reference rounds the product first, and the quantizers must round as it does.
inline float product(float a, float b) {
  float p = a * b;
  __asm__("" : "+m"(p));
  return p;
}

// Round to nearest, ties to even (GGML's nearest_int), in the default rounding mode.
inline int nearest(float v) { return int(std::lrintf(v)); }

inline void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// The value of largest magnitude, with its sign (the first of equals).
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  return max;
}

// ---- legacy types: one block of 32 ----

void quantize_q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int i = 0; i < QK; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b, d);
  for (int i = 0; i < QK; ++i) b[2 + i] = uint8_t(int8_t(std::roundf(x[i] * id)));
}

// Q4_0 and Q5_0: d = the signed extreme / −2^(bits−1), so it maps to code 0; codes truncated
// from x/d + 2^(bits−1) + ½ and capped at the top code.
template <int Bits>
void quantize_symmetric(const float* x, uint8_t* b) {
  constexpr int half = 1 << (Bits - 1), top = (1 << Bits) - 1;
  const float d = signed_absmax(x, QK) / float(-half), id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b, d);
  uint8_t* qs = b + (Bits == 5 ? 6 : 2);
  uint32_t qh = 0;
  for (int i = 0; i < QK / 2; ++i) {
    const int lo = std::min(top, int(product(x[i], id) + (float(half) + 0.5f)));
    const int hi = std::min(top, int(product(x[i + QK / 2], id) + (float(half) + 0.5f)));
    qs[i] = uint8_t((lo & 15) | (hi & 15) << 4);
    qh |= uint32_t(lo >> 4) << i | uint32_t(hi >> 4) << (i + QK / 2);
  }
  if (Bits == 5) std::memcpy(b + 2, &qh, 4);
}

// Q4_1 and Q5_1: d = (max − min) / top code, m = min; codes round (x − min)/d + ½ down.
template <int Bits>
void quantize_affine(const float* x, uint8_t* b) {
  constexpr int top = (1 << Bits) - 1;
  float min = x[0], max = x[0];
  for (int i = 1; i < QK; ++i) min = std::min(min, x[i]), max = std::max(max, x[i]);
  const float d = (max - min) / float(top), id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b, d);
  store_f16(b + 2, min);
  uint8_t* qs = b + (Bits == 5 ? 8 : 4);
  uint32_t qh = 0;
  for (int i = 0; i < QK / 2; ++i) {
    const int lo = std::min(top, int(product(x[i] - min, id) + 0.5f));
    const int hi = std::min(top, int(product(x[i + QK / 2] - min, id) + 0.5f));
    qs[i] = uint8_t((lo & 15) | (hi & 15) << 4);
    qh |= uint32_t(lo >> 4) << i | uint32_t(hi >> 4) << (i + QK / 2);
  }
  if (Bits == 5) std::memcpy(b + 4, &qh, 4);
}

// Code i of a legacy block: its 4 low bits, plus the fifth from qh (Q5_0/Q5_1).
inline int nibble(const uint8_t* qs, int i) { return i < QK / 2 ? qs[i] & 15 : qs[i - QK / 2] >> 4; }

void dequantize_legacy(BlockType type, const uint8_t* b, float* y) {
  const float d = load_f16(b);
  switch (type) {
    case BlockType::Q8_0:
      for (int i = 0; i < QK; ++i) y[i] = d * float(int8_t(b[2 + i]));
      break;
    case BlockType::Q4_0:
      for (int i = 0; i < QK; ++i) y[i] = float(nibble(b + 2, i) - 8) * d;
      break;
    case BlockType::Q4_1: {
      const float m = load_f16(b + 2);
      for (int i = 0; i < QK; ++i) y[i] = product(float(nibble(b + 4, i)), d) + m;
      break;
    }
    case BlockType::Q5_0: {
      const uint32_t qh = load_u32(b + 2);
      for (int i = 0; i < QK; ++i) y[i] = float(nibble(b + 6, i) + int(qh >> i & 1) * 16 - 16) * d;
      break;
    }
    default: {  // Q5_1
      const float m = load_f16(b + 2);
      const uint32_t qh = load_u32(b + 4);
      for (int i = 0; i < QK; ++i) y[i] = product(float(nibble(b + 8, i) + int(qh >> i & 1) * 16), d) + m;
    }
  }
}

// ---- MXFP4: one block of 32 ----

// GGML's reference: e = ⌊log2 max|x|⌋ − 2 + 127, which puts max|x| at 4 to 8 times the scale
// 2^(e − 127), in the top two E2M1 values' reach (4, 6); each value then takes the code nearest
// it (the first of equals: +0 before −0, the smaller magnitude at a midpoint). Where GGML's cast
// of that float to uint8_t is undefined (max|x| below 2^−125, or not finite) e is 0.
void quantize_mxfp4(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int i = 0; i < QK; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float biased = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
  const uint8_t e = biased > 0.0f && biased <= 254.0f ? uint8_t(biased) : 0;
  const float d = mxfp4_half_scale(e);
  auto code = [&](float v) {
    int best = 0;
    float best_err = std::fabs(product(float(kMxfp4Doubled[0]), d) - v);
    for (int c = 1; c < 16; ++c) {
      const float err = std::fabs(product(float(kMxfp4Doubled[c]), d) - v);
      if (err < best_err) best = c, best_err = err;
    }
    return best;
  };
  b[0] = e;
  for (int i = 0; i < QK / 2; ++i) b[1 + i] = uint8_t(code(x[i]) | code(x[i + QK / 2]) << 4);
}

void dequantize_mxfp4(const uint8_t* b, float* y) {
  const float d = mxfp4_half_scale(b[0]);
  for (int i = 0; i < QK; ++i) y[i] = float(kMxfp4Doubled[nibble(b + 1, i)]) * d;
}

// ---- K-quants: one super-block of 256 ----

// x[32] ≈ scale·L + min with L in [0, nmax] and min <= 0, minimising Σ w·(scale·L + min − x)².
// The first grid spans [min(x, 0), max x] in nmax steps; then grids of nmax + rmin + rdelta·s
// steps over the same range (a little coarser or finer, so the extremes may round inwards),
// each solved for scale and min by weighted least squares, the best kept. Returns the scale;
// *neg_min = −min.
float fit_scale_min(const float* x, const float* w, int nmax, float rmin, float rdelta, int steps, uint8_t* L,
                    float* neg_min) {
  float lo = x[0], hi = x[0], sum_w = 0.0f, sum_x = 0.0f;
  for (int i = 0; i < 32; ++i) {
    lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    sum_w += w[i], sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill(L, L + 32, uint8_t(0));
    *neg_min = -lo;
    return 0.0f;
  }
  auto codes = [&](float inv, float from, uint8_t* out) {
    for (int i = 0; i < 32; ++i) out[i] = uint8_t(std::clamp(nearest(inv * (x[i] - from)), 0, nmax));
  };
  auto error = [&](float scale, float min, const uint8_t* l) {
    float e = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float diff = scale * float(l[i]) + min - x[i];
      e += w[i] * diff * diff;
    }
    return e;
  };
  float scale = (hi - lo) / float(nmax), min = lo;
  codes(1.0f / scale, lo, L);
  float best = error(scale, min, L);
  uint8_t trial[32];
  for (int s = 0; s <= steps; ++s) {
    codes((float(nmax) + rmin + rdelta * float(s)) / (hi - lo), lo, trial);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float l = float(trial[i]);
      sum_l += w[i] * l, sum_l2 += w[i] * l * l, sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0.0f) continue;
    float s_fit = (sum_w * sum_xl - sum_x * sum_l) / det, m_fit = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m_fit > 0.0f) m_fit = 0.0f, s_fit = sum_xl / sum_l2;  // the min must not be positive
    const float e = error(s_fit, m_fit, trial);
    if (e < best) best = e, scale = s_fit, min = m_fit, std::copy(trial, trial + 32, L);
  }
  *neg_min = -min;
  return scale;
}

// Q4_K (Bits 4) and Q5_K (Bits 5). Each sub-block of 32 weighted by |x| + rms(x), as GGML's
// reference weighs them, so large values count more but small ones not for nothing.
template <int Bits>
void quantize_k_affine(const float* x, uint8_t* b) {
  constexpr int nmax = (1 << Bits) - 1;
  float scales[8], mins[8], w[32];
  uint8_t L[QK_K];
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    float ss = 0.0f;
    for (int i = 0; i < 32; ++i) ss += xj[i] * xj[i];
    const float rms = std::sqrt(ss / 32.0f);
    for (int i = 0; i < 32; ++i) w[i] = rms + std::fabs(xj[i]);
    scales[j] = Bits == 4 ? fit_scale_min(xj, w, nmax, -1.0f, 0.1f, 20, L + 32 * j, &mins[j])
                          : fit_scale_min(xj, w, nmax, -0.5f, 0.1f, 15, L + 32 * j, &mins[j]);
  }
  const float max_scale = *std::max_element(scales, scales + 8), max_min = *std::max_element(mins, mins + 8);
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  std::memset(b, 0, block_type_info(Bits == 4 ? BlockType::Q4_K : BlockType::Q5_K).block_bytes);
  store_f16(b, max_scale / 63.0f);
  store_f16(b + 2, max_min / 63.0f);
  uint8_t* packed = b + 4;
  for (int j = 0; j < 8; ++j) {
    const int ls = std::min(63, nearest(inv_scale * scales[j])), lm = std::min(63, nearest(inv_min * mins[j]));
    if (j < 4) {
      packed[j] = uint8_t(ls), packed[j + 4] = uint8_t(lm);
    } else {
      packed[j + 4] = uint8_t((ls & 15) | (lm & 15) << 4);
      packed[j - 4] |= uint8_t((ls >> 4) << 6);
      packed[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  // The values again, on the scales and mins as stored.
  uint8_t sc[8], mn[8];
  scale_min_k4(packed, sc, mn);
  const float d = load_f16(b), dmin = load_f16(b + 2);
  for (int j = 0; j < 8; ++j) {
    const float dj = d * float(sc[j]), mj = dmin * float(mn[j]);
    if (dj == 0.0f) continue;  // keeps the fit's codes, which the scale 0 multiplies away
    for (int i = 0; i < 32; ++i) L[32 * j + i] = uint8_t(std::clamp(nearest((x[32 * j + i] + mj) / dj), 0, nmax));
  }
  uint8_t* qh = b + 16;
  uint8_t* qs = b + (Bits == 4 ? 16 : 48);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
      qs[32 * c + l] = uint8_t((lo & 15) | (hi & 15) << 4);
      if (Bits == 5) qh[l] |= uint8_t((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
    }
}

// x[16] ≈ scale·(L − 32), L − 32 in [−32, 31], weighted by x² (the large values matter most):
// the grid that maps the signed extreme to −32, then grids of 32 ± 0.1·s steps, each with its
// least-squares scale, the best kept. Returns the scale (negative when the extreme is positive).
float fit_scale_symmetric(const float* x, int8_t* L) {
  const float max = signed_absmax(x, 16);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + 16, int8_t(0));
    return 0.0f;
  }
  auto fit = [&](float inv, int8_t* out, float* sum_lx, float* sum_l2) {
    *sum_lx = *sum_l2 = 0.0f;
    for (int i = 0; i < 16; ++i) {
      const int l = std::clamp(nearest(inv * x[i]), -32, 31);
      if (out) out[i] = int8_t(l);
      const float w = x[i] * x[i];
      *sum_lx += w * x[i] * float(l), *sum_l2 += w * float(l * l);
    }
  };
  float sum_lx, sum_l2;
  fit(-32.0f / max, L, &sum_lx, &sum_l2);
  float scale = sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f, best = scale * sum_lx;  // best: Σ w·x·(scale·l), the fit's gain
  for (int s = -9; s <= 9; ++s) {
    if (s == 0) continue;
    const float inv = -(32.0f + 0.1f * float(s)) / max;
    fit(inv, nullptr, &sum_lx, &sum_l2);
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      fit(inv, L, &sum_lx, &sum_l2);
      scale = sum_lx / sum_l2, best = scale * sum_lx;
    }
  }
  return scale;
}

void quantize_q6_k(const float* x, uint8_t* b) {
  float scales[16];
  int8_t L[QK_K];
  float max_scale = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_scale_symmetric(x + 16 * j, L + 16 * j);
    if (std::fabs(scales[j]) > std::fabs(max_scale)) max_scale = scales[j];
  }
  std::memset(b, 0, 210);
  if (std::fabs(max_scale) < 1e-15f) return;  // all zero: d = 0
  // The largest scale to −128 (int8's extreme), the others rounded on that step.
  const float inv = -128.0f / max_scale;
  store_f16(b + 208, 1.0f / inv);
  int8_t* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int j = 0; j < 16; ++j) sc[j] = int8_t(std::min(127, nearest(inv * scales[j])));
  const float d = load_f16(b + 208);
  uint8_t codes[QK_K];
  for (int j = 0; j < 16; ++j) {
    const float dj = d * float(sc[j]);
    for (int i = 0; i < 16; ++i)
      codes[16 * j + i] = uint8_t(dj == 0.0f ? L[16 * j + i] + 32 : std::clamp(nearest(x[16 * j + i] / dj), -32, 31) + 32);
  }
  for (int h = 0; h < 2; ++h) {
    const uint8_t* c = codes + 128 * h;
    uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = uint8_t((c[l] & 15) | (c[l + 64] & 15) << 4);
      ql[l + 32] = uint8_t((c[l + 32] & 15) | (c[l + 96] & 15) << 4);
      qh[l] = uint8_t(c[l] >> 4 | (c[l + 32] >> 4) << 2 | (c[l + 64] >> 4) << 4 | (c[l + 96] >> 4) << 6);
    }
  }
}

void dequantize_k(BlockType type, const uint8_t* b, float* y) {
  if (type == BlockType::Q6_K) {
    const float d = load_f16(b + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int h = 0; h < 2; ++h) {
      const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
      for (int p = 0; p < 4; ++p)
        for (int l = 0; l < 32; ++l) {
          const int low = (ql[l + 32 * (p % 2)] >> (4 * (p / 2))) & 15, high = (qh[l] >> (2 * p)) & 3;
          const int i = 128 * h + 32 * p + l;
          y[i] = d * float(sc[i / 16]) * float((low | high << 4) - 32);
        }
    }
    return;
  }
  const bool five = type == BlockType::Q5_K;
  uint8_t sc[8], mn[8];
  scale_min_k4(b + 4, sc, mn);
  const float d = load_f16(b), dmin = load_f16(b + 2);
  const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
  for (int j = 0; j < 8; ++j) {
    const float dj = d * float(sc[j]), mj = dmin * float(mn[j]);
    const int c = j / 2, shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      const int q = (qs[32 * c + l] >> shift & 15) | (five ? (qh[l] >> j & 1) << 4 : 0);
      y[32 * j + l] = product(dj, float(q)) - mj;
    }
  }
}

// One block of each type, as the table's to_float and from_float take it.
template <BlockType Type>
void to_float(const uint8_t* b, float* y) {
  if constexpr (Type == BlockType::F32) std::memcpy(y, b, 4);
  else if constexpr (Type == BlockType::F16) *y = load_f16(b);
  else if constexpr (Type == BlockType::BF16) *y = bf16_to_f32(load_u16(b));
  else if constexpr (Type == BlockType::Q4_K || Type == BlockType::Q5_K || Type == BlockType::Q6_K) dequantize_k(Type, b, y);
  else if constexpr (Type == BlockType::MXFP4) dequantize_mxfp4(b, y);
  else dequantize_legacy(Type, b, y);
}
void f32_from_float(const float* x, uint8_t* b) { std::memcpy(b, x, 4); }
void f16_from_float(const float* x, uint8_t* b) { store_f16(b, *x); }
void bf16_from_float(const float* x, uint8_t* b) {
  const uint16_t h = f32_to_bf16(*x);  // ties to even, NaN kept (as GGML)
  std::memcpy(b, &h, 2);
}

using Fam = BlockFamily;
using S = BlockScales;
constexpr S kNone{}, kD{S::F16, 1, {0, 0}}, kDm{S::F16, 2, {0, 2}};
const std::vector<BlockTypeInfo> kTypes = {
    // type             name     --dtype  values bytes family       scales                 fallback
    {BlockType::F32,   "F32",   nullptr, 1,   4,   Fam::Float,  kNone,                 BlockType::F32,   to_float<BlockType::F32>,   f32_from_float},
    {BlockType::F16,   "F16",   nullptr, 1,   2,   Fam::Float,  kNone,                 BlockType::F16,   to_float<BlockType::F16>,   f16_from_float},
    {BlockType::BF16,  "BF16",  nullptr, 1,   2,   Fam::Float,  kNone,                 BlockType::BF16,  to_float<BlockType::BF16>,  bf16_from_float},
    {BlockType::Q8_0,  "Q8_0",  "q8_0",  QK,  34,  Fam::Legacy, kD,                    BlockType::Q8_0,  to_float<BlockType::Q8_0>,  quantize_q8_0},
    {BlockType::Q4_0,  "Q4_0",  "q4_0",  QK,  18,  Fam::Legacy, kD,                    BlockType::Q4_0,  to_float<BlockType::Q4_0>,  quantize_symmetric<4>},
    {BlockType::Q4_1,  "Q4_1",  "q4_1",  QK,  20,  Fam::Legacy, kDm,                   BlockType::Q4_1,  to_float<BlockType::Q4_1>,  quantize_affine<4>},
    {BlockType::Q5_0,  "Q5_0",  "q5_0",  QK,  22,  Fam::Legacy, kD,                    BlockType::Q5_0,  to_float<BlockType::Q5_0>,  quantize_symmetric<5>},
    {BlockType::Q5_1,  "Q5_1",  "q5_1",  QK,  24,  Fam::Legacy, kDm,                   BlockType::Q5_1,  to_float<BlockType::Q5_1>,  quantize_affine<5>},
    {BlockType::Q4_K,  "Q4_K",  "q4_k",  QK_K, 144, Fam::KQuant, kDm,                  BlockType::Q5_0,  to_float<BlockType::Q4_K>,  quantize_k_affine<4>},
    {BlockType::Q5_K,  "Q5_K",  "q5_k",  QK_K, 176, Fam::KQuant, kDm,                  BlockType::Q5_1,  to_float<BlockType::Q5_K>,  quantize_k_affine<5>},
    {BlockType::Q6_K,  "Q6_K",  "q6_k",  QK_K, 210, Fam::KQuant, {S::F16, 1, {208, 0}}, BlockType::Q8_0, to_float<BlockType::Q6_K>,  quantize_q6_k},
    {BlockType::MXFP4, "MXFP4", nullptr, QK,  17,  Fam::Legacy, {S::E8M0, 1, {0, 0}},  BlockType::MXFP4, to_float<BlockType::MXFP4>, quantize_mxfp4},
};

}  // namespace

const std::vector<BlockTypeInfo>& block_types() { return kTypes; }

std::string block_type_names() {
  return comma_list(kTypes, [](const BlockTypeInfo& t) { return std::string(t.name); });
}

const BlockTypeInfo* block_type_info(uint32_t ggml_type) {
  for (const BlockTypeInfo& t : kTypes)
    if (uint32_t(t.type) == ggml_type) return &t;
  return nullptr;
}

const BlockTypeInfo& block_type_info(BlockType type) {
  if (const BlockTypeInfo* t = block_type_info(uint32_t(type))) return *t;
  throw Error("block type " + ggml_type_name(uint32_t(type)) + " is not one pert reads");
}

std::string ggml_type_name(uint32_t ggml_type) {
  // ggml_type's numbers; empty: never defined or since removed.
  static const char* const names[] = {
      "F32",   "F16",    "Q4_0",   "Q4_1",    "",      "",       "Q5_0",  "Q5_1",  "Q8_0",   "Q8_1",  "Q2_K",
      "Q3_K",  "Q4_K",   "Q5_K",   "Q6_K",    "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
      "IQ2_S", "IQ4_XS", "I8",     "I16",     "I32",   "I64",    "F64",   "IQ1_M", "BF16",   "",      "",
      "",      "TQ1_0",  "TQ2_0",  "",        "",      "",       "MXFP4", "NVFP4", "Q1_0",   "Q2_0"};
  if (ggml_type < sizeof names / sizeof names[0] && *names[ggml_type]) return names[ggml_type];
  return "type " + std::to_string(ggml_type);
}

size_t block_row_bytes(BlockType type, int64_t n) {
  const BlockTypeInfo& t = block_type_info(type);
  if (n < 0 || n % t.block_size != 0)
    throw Error(std::string("a row of ") + std::to_string(n) + " values is not a whole number of " + t.name +
                " blocks of " + std::to_string(t.block_size));
  return size_t(n / t.block_size) * t.block_bytes;
}

void dequantize_row(BlockType type, const void* blocks, float* out, int64_t n) {
  const BlockTypeInfo& t = block_type_info(type);
  const size_t count = block_row_bytes(type, n) / t.block_bytes;
  const uint8_t* b = static_cast<const uint8_t*>(blocks);
  for (size_t i = 0; i < count; ++i, b += t.block_bytes, out += t.block_size) t.to_float(b, out);
}

void mxfp4_from_hf(const uint8_t* blocks, const uint8_t* scales, int64_t n_blocks, uint8_t* out) {
  for (int64_t i = 0; i < n_blocks; ++i, blocks += QK / 2, out += 17) {
    uint8_t codes[QK];  // HF's byte j: value 2j in its low nibble, 2j + 1 in its high one
    for (int j = 0; j < QK / 2; ++j) codes[2 * j] = blocks[j] & 15, codes[2 * j + 1] = blocks[j] >> 4;
    out[0] = scales[i];  // the same E8M0 byte: HF's 2^(s − 127)·v is GGML's 2^(s − 128)·2v
    for (int j = 0; j < QK / 2; ++j) out[1 + j] = uint8_t(codes[j] | codes[j + QK / 2] << 4);
  }
}

void quantize_row(BlockType type, const float* values, void* blocks, int64_t n) {
  const BlockTypeInfo& t = block_type_info(type);
  const size_t count = block_row_bytes(type, n) / t.block_bytes;
  uint8_t* b = static_cast<uint8_t*>(blocks);
  for (size_t i = 0; i < count; ++i, b += t.block_bytes, values += t.block_size) t.from_float(values, b);
}

}  // namespace pert
