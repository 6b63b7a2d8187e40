// AVX2 (+FMA, F16C) kernels for the block types: one weight row against R rows of x (the
// contract in quants_blocks.hpp), the row's codes unpacked once per block into registers and
// multiplied by each row of x in turn. Compiled for any x86-64 (`target` pragma) and chosen at
// run time (quants_dot.cpp), as src/kernels/ops_q8.cpp's kernels are.
//   codes × x   vpmaddubsw: unsigned codes (0..63) by signed x, pairs summed into int16 (at most
//               2·63·127, no saturation); Q8_0's signed codes, and MXFP4's doubled E2M1 values
//               (a vpshufb of its nibbles), go through as |w| and x·sign(w).
//   scales      vpmaddwd by the sub-block's integer scale (K-quants) or by 1, into int32.
//   blocks      4 blocks (legacy) or super-blocks (K-quants) a step: their int32 totals summed
//               at once (hadd) and scaled by one vfmadd into 4 float lanes — the plain kernels'
//               Lanes, lane for lane, so both give the same float.
#include "kernels/quants_blocks.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/quants.hpp"

namespace pert::quants {

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

inline int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The four int32 sums of a, b, c, d's lanes, in that order.
inline __m128i hsum4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// The 32 nibbles of 16 bytes: low nibbles (values 0..15) in the low half, high ones above.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i q = load128(qs), mask = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
}

// 0x10 in byte i where bit i of qh is set.
inline __m256i fifth_bits(uint32_t qh) {
  const __m256i spread = _mm256_shuffle_epi8(  // byte i takes byte i / 8 of qh
      _mm256_set1_epi32(int(qh)), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// A legacy block's 32 codes as bytes (Q8_0 and MXFP4: signed; the others 0..31, before any bias).
template <BlockType Type>
inline __m256i legacy_codes(const uint8_t* b) {
  switch (Type) {
    case BlockType::Q8_0: return load256(b + 2);
    case BlockType::MXFP4: return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(load128(kMxfp4Doubled)), nibbles(b + 1));
    case BlockType::Q4_0: return nibbles(b + 2);
    case BlockType::Q4_1: return nibbles(b + 4);
    case BlockType::Q5_0: return _mm256_or_si256(nibbles(b + 6), fifth_bits(load_u32(b + 2)));
    default: return _mm256_or_si256(nibbles(b + 8), fifth_bits(load_u32(b + 4)));  // Q5_1
  }
}

// Σ codes·x of one block as 8 int32 lanes.
template <BlockType Type>
inline __m256i block_dot(__m256i codes, const int8_t* x) {
  const __m256i xv = load256(x), ones = _mm256_set1_epi16(1);
  if (Type == BlockType::Q8_0 || Type == BlockType::MXFP4)
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(codes, codes), _mm256_sign_epi8(xv, codes)), ones);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, xv), ones);
}

template <BlockType Type, int R>
void legacy_avx2(const uint8_t* w, const QuantizedX& x, int t0, float* out) {
  constexpr bool affine = Type == BlockType::Q4_1 || Type == BlockType::Q5_1;
  constexpr int bias = Type == BlockType::Q4_0 ? 8 : Type == BlockType::Q5_0 ? 16 : 0;
  constexpr size_t bytes = Type == BlockType::Q8_0 ? 34 : Type == BlockType::Q4_0 ? 18 : Type == BlockType::Q4_1 ? 20
                           : Type == BlockType::Q5_0 ? 22 : Type == BlockType::MXFP4 ? 17 : 24;
  const int nb = x.K / QK, K = x.K;
  __m128 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm_setzero_ps();
  int b = 0;
  for (; b + 4 <= nb; b += 4, w += 4 * bytes) {
    _mm_prefetch(reinterpret_cast<const char*>(w + 8 * bytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w + 8 * bytes + 64), _MM_HINT_T0);
    const __m256i c0 = legacy_codes<Type>(w), c1 = legacy_codes<Type>(w + bytes), c2 = legacy_codes<Type>(w + 2 * bytes),
                  c3 = legacy_codes<Type>(w + 3 * bytes);
    const __m128 dw = Type == BlockType::MXFP4
                          ? _mm_setr_ps(mxfp4_half_scale(w[0]), mxfp4_half_scale(w[bytes]), mxfp4_half_scale(w[2 * bytes]),
                                        mxfp4_half_scale(w[3 * bytes]))
                          : _mm_cvtph_ps(_mm_setr_epi16(short(load_u16(w)), short(load_u16(w + bytes)), short(load_u16(w + 2 * bytes)),
                                                        short(load_u16(w + 3 * bytes)), 0, 0, 0, 0));
    __m128 m = _mm_setzero_ps();
    if (affine)
      m = _mm_cvtph_ps(_mm_setr_epi16(short(load_u16(w + 2)), short(load_u16(w + bytes + 2)),
                                      short(load_u16(w + 2 * bytes + 2)), short(load_u16(w + 3 * bytes + 2)), 0, 0, 0, 0));
    for (int r = 0; r < R; ++r) {
      const size_t xb = size_t(t0 + r) * nb + size_t(b);
      const int8_t* qx = x.q + size_t(t0 + r) * K + size_t(b) * QK;
      __m128i dot = hsum4(block_dot<Type>(c0, qx), block_dot<Type>(c1, qx + 32), block_dot<Type>(c2, qx + 64),
                          block_dot<Type>(c3, qx + 96));
      const __m128 dx = _mm_loadu_ps(x.d + xb);
      if (bias || affine) {
        const __m128i sx = load128(x.sum + xb);
        if (bias) dot = _mm_sub_epi32(dot, _mm_mullo_epi32(sx, _mm_set1_epi32(bias)));
        acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(dot), _mm_mul_ps(dw, dx), acc[r]);
        if (affine) acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(sx), _mm_mul_ps(m, dx), acc[r]);
      } else {
        acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(dot), _mm_mul_ps(dw, dx), acc[r]);
      }
    }
  }
  Lanes lanes[R];
  for (int r = 0; r < R; ++r) _mm_storeu_ps(lanes[r].v, acc[r]);
  for (; b < nb; ++b, w += bytes) {  // the last nb % 4 blocks one at a time, into their lanes
    const __m256i c = legacy_codes<Type>(w);
    const float dw = Type == BlockType::MXFP4 ? mxfp4_half_scale(w[0]) : load_f16(w), m = affine ? load_f16(w + 2) : 0.0f;
    for (int r = 0; r < R; ++r) {
      const size_t xb = size_t(t0 + r) * nb + size_t(b);
      const int dot = hsum(block_dot<Type>(c, x.q + xb * QK));
      lanes[r].add(b, float(dot - bias * x.sum[xb]), dw * x.d[xb]);
      if (affine) lanes[r].add(b, float(x.sum[xb]), m * x.d[xb]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = lanes[r].sum();
}

// The F16 fields at `at` of four consecutive blocks `bytes` apart, as four floats.
inline __m128 f16x4(const uint8_t* w, size_t bytes, size_t at) {
  return _mm_cvtph_ps(_mm_setr_epi16(short(load_u16(w + at)), short(load_u16(w + bytes + at)),
                                     short(load_u16(w + 2 * bytes + at)), short(load_u16(w + 3 * bytes + at)), 0, 0,
                                     0, 0));
}

// byte shuffles broadcasting int16 j of a 128-bit lane to all of it, j = 0..7
alignas(32) const uint8_t kBroadcast16[8][32] = {
#define PERT_B(j) {2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, \
                   2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1,   \
                   2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1, 2 * j, 2 * j + 1}
    PERT_B(0), PERT_B(1), PERT_B(2), PERT_B(3), PERT_B(4), PERT_B(5), PERT_B(6), PERT_B(7)
#undef PERT_B
};

// One super-block of Q4_K (Five false) or Q5_K against R rows of x: per row, the int32 lanes of
// Σ_j s_j·Σ c·qx (dot) and of Σ_j m_j·Σ_j qx (offset). Per chunk of 64 values the low nibbles
// are sub-block 2c and the high ones 2c + 1 (Q5_K: qh's bits 2c and 2c + 1 on top, taken as qh
// shifts down by 2 a chunk).
template <bool Five, int R>
inline void q45k_super(const uint8_t* w, const QuantizedX& x, size_t xs0, size_t nb, __m256i* dot, __m256i* offset) {
  const __m256i low4 = _mm256_set1_epi8(15), bit0 = _mm256_set1_epi8(1), bit1 = _mm256_set1_epi8(2);
  uint8_t sc[8], mn[8];
  scale_min_k4(w + 4, sc, mn);
  // the eight scales as int16 in both 128-bit lanes; the mins repeated per 16 values
  const __m128i s8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc));
  const __m256i s16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(s8));
  const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
  const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
  const uint8_t* qs = w + (Five ? 48 : 16);
  __m256i high = Five ? load256(w + 16) : _mm256_setzero_si256();
  for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load256(qs + 32 * c);
    __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    if (Five) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(high, bit0), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(high, bit1), 3));
      high = _mm256_srli_epi16(high, 2);
    }
    const __m256i s_lo = _mm256_shuffle_epi8(s16, load256(kBroadcast16[2 * c]));
    const __m256i s_hi = _mm256_shuffle_epi8(s16, load256(kBroadcast16[2 * c + 1]));
    for (int r = 0; r < R; ++r) {
      const int8_t* qx = x.q + (xs0 + size_t(r) * nb) * QK_K + 64 * c;
      const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(qx)), s_lo);
      const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(qx + 32)), s_hi);
      dot[r] = _mm256_add_epi32(dot[r], _mm256_add_epi32(p_lo, p_hi));
    }
  }
  for (int r = 0; r < R; ++r) offset[r] = _mm256_madd_epi16(load256(x.bsum + (xs0 + size_t(r) * nb) * 16), mins);
}

// One super-block of Q6_K against R rows of x: per row, the int32 lanes of Σ_j s_j·Σ c·qx −
// 32·Σ_j s_j·Σ_j qx. Per half (128 values) ql[64] and qh[32] give four parts of 32 values; part
// p is sub-blocks 2p and 2p + 1 of the half, whose scales go to the low and high 128-bit lanes.
template <int R>
inline void q6k_super(const uint8_t* w, const QuantizedX& x, size_t xs0, size_t nb, __m256i* dot) {
  const __m256i low4 = _mm256_set1_epi8(15), bits45 = _mm256_set1_epi8(0x30);
  // byte pattern picking int16 0 of each dword for the low lane and int16 1 for the high one
  const __m256i pick = _mm256_set_epi64x(0x0302030203020302, 0x0302030203020302, 0x0100010001000100, 0x0100010001000100);
  const __m256i scales = _mm256_cvtepi8_epi16(load128(w + 192));  // 16 int16
  for (int r = 0; r < R; ++r)  // from −32·Σ_j s_j·Σ_j qx
    dot[r] = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(),
                                                _mm256_madd_epi16(load256(x.bsum + (xs0 + size_t(r) * nb) * 16), scales)), 5);
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = load256(w + 64 * h), ql1 = load256(w + 64 * h + 32), qh = load256(w + 128 + 32 * h);
    const __m256i part[4] = {
        _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
        _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45))};
    for (int p = 0; p < 4; ++p) {
      const __m256i sp = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(4 * h + p)), pick);
      for (int r = 0; r < R; ++r) {
        const int8_t* qx = x.q + (xs0 + size_t(r) * nb) * QK_K + 128 * h + 32 * p;
        dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(part[p], load256(qx)), sp));
      }
    }
  }
}

// The K-quant kernels: four super-blocks a step, their int32 totals (hsum4) scaled into the four
// float lanes by one vfmadd (two for Q4_K/Q5_K: the scales, then the mins), as the plain
// kernels add them lane by lane; the last nb % 4 super-blocks one at a time.
template <BlockType Type, int R>
void k_avx2(const uint8_t* w, const QuantizedX& x, int t0, float* out) {
  constexpr bool six = Type == BlockType::Q6_K, five = Type == BlockType::Q5_K;
  constexpr size_t bytes = six ? 210 : five ? 176 : 144;
  constexpr size_t d_at = six ? 208 : 0;
  const size_t nb = size_t(x.K / QK_K);
  const size_t xs0 = size_t(t0) * nb;  // x's super-block (t0, 0)
  __m256i dot[4][R], offset[4][R];
  __m128 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm_setzero_ps();
  size_t s = 0;
  for (; s + 4 <= nb; s += 4, w += 4 * bytes) {
    for (int u = 0; u < 4; ++u) {
      const uint8_t* b = w + u * bytes;
      _mm_prefetch(reinterpret_cast<const char*>(b + 4 * bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + 4 * bytes + 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + 4 * bytes + 128), _MM_HINT_T0);
      if (six) {
        q6k_super<R>(b, x, xs0 + s + u, nb, dot[u]);
      } else {
        q45k_super<five, R>(b, x, xs0 + s + u, nb, dot[u], offset[u]);
      }
    }
    const __m128 d = f16x4(w, bytes, d_at);
    for (int r = 0; r < R; ++r) {
      const __m128 dx = _mm_loadu_ps(x.d + xs0 + size_t(r) * nb + s);
      acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(hsum4(dot[0][r], dot[1][r], dot[2][r], dot[3][r])), _mm_mul_ps(d, dx), acc[r]);
      if (!six) {
        const __m128i m = hsum4(offset[0][r], offset[1][r], offset[2][r], offset[3][r]);
        acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_sub_epi32(_mm_setzero_si128(), m)),
                              _mm_mul_ps(f16x4(w, bytes, 2), dx), acc[r]);
      }
    }
  }
  Lanes lanes[R];
  for (int r = 0; r < R; ++r) _mm_storeu_ps(lanes[r].v, acc[r]);
  for (; s < nb; ++s, w += bytes) {
    if (six) {
      q6k_super<R>(w, x, xs0 + s, nb, dot[0]);
    } else {
      q45k_super<five, R>(w, x, xs0 + s, nb, dot[0], offset[0]);
    }
    for (int r = 0; r < R; ++r) {
      const float dx = x.d[xs0 + size_t(r) * nb + s];
      lanes[r].add(int(s), float(hsum(dot[0][r])), load_f16(w + d_at) * dx);
      if (!six) lanes[r].add(int(s), float(-hsum(offset[0][r])), load_f16(w + 2) * dx);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = lanes[r].sum();
}

template <BlockType Type>
inline __m256 widen8(const uint8_t* w) {
  if (Type == BlockType::F16) return _mm256_cvtph_ps(load128(w));
  if (Type == BlockType::BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(w)), 16));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(w));
}

// F32/F16/BF16: U independent accumulators per row of x (more when R is small, to cover the FMA latency).
template <BlockType Type, int R>
void float_avx2(const uint8_t* w, const QuantizedX& x, int t0, float* out) {
  constexpr int U = R == 1 ? 4 : R == 2 ? 2 : 1;
  constexpr size_t width = Type == BlockType::F32 ? 4 : 2;
  const int K = x.K;
  const float* xr[R];
  __m256 acc[R][U];
  for (int r = 0; r < R; ++r) {
    xr[r] = x.f + size_t(t0 + r) * K;
    for (int u = 0; u < U; ++u) acc[r][u] = _mm256_setzero_ps();
  }
  int k = 0;
  for (; k + 8 * U <= K; k += 8 * U)
    for (int u = 0; u < U; ++u) {
      const __m256 wv = widen8<Type>(w + size_t(k + 8 * u) * width);
      for (int r = 0; r < R; ++r) acc[r][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xr[r] + k + 8 * u), acc[r][u]);
    }
  for (; k + 8 <= K; k += 8) {
    const __m256 wv = widen8<Type>(w + size_t(k) * width);
    for (int r = 0; r < R; ++r) acc[r][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xr[r] + k), acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm256_add_ps(acc[r][0], acc[r][u]);
    out[r] = hsum(acc[r][0]);
  }
  for (; k < K; ++k) {
    const float wk = Type == BlockType::F16    ? load_f16(w + 2 * size_t(k))
                     : Type == BlockType::BF16 ? bf16_to_f32(load_u16(w + 2 * size_t(k)))
                                               : reinterpret_cast<const float*>(w)[k];
    for (int r = 0; r < R; ++r) out[r] += wk * xr[r][k];
  }
}

template <BlockType T, int R> struct Legacy { static void run(const uint8_t* w, const QuantizedX& x, int t0, float* o) { legacy_avx2<T, R>(w, x, t0, o); } };
template <BlockType T, int R> struct KQuant { static void run(const uint8_t* w, const QuantizedX& x, int t0, float* o) { k_avx2<T, R>(w, x, t0, o); } };
template <BlockType T, int R> struct Float { static void run(const uint8_t* w, const QuantizedX& x, int t0, float* o) { float_avx2<T, R>(w, x, t0, o); } };

template <BlockType T> KernelSet k_quant() { return {{KQuant<T, 1>::run, KQuant<T, 2>::run, KQuant<T, 3>::run, KQuant<T, 4>::run}}; }
template <BlockType T> KernelSet legacy() { return {{Legacy<T, 1>::run, Legacy<T, 2>::run, Legacy<T, 3>::run, Legacy<T, 4>::run}}; }
template <BlockType T> KernelSet floats() { return {{Float<T, 1>::run, Float<T, 2>::run, Float<T, 3>::run, Float<T, 4>::run}}; }

}  // namespace

#pragma GCC pop_options

KernelSet avx2_kernels(int ggml_type) {
  switch (BlockType(ggml_type)) {
    case BlockType::F32: return floats<BlockType::F32>();
    case BlockType::F16: return floats<BlockType::F16>();
    case BlockType::BF16: return floats<BlockType::BF16>();
    case BlockType::Q8_0: return legacy<BlockType::Q8_0>();
    case BlockType::Q4_0: return legacy<BlockType::Q4_0>();
    case BlockType::Q4_1: return legacy<BlockType::Q4_1>();
    case BlockType::Q5_0: return legacy<BlockType::Q5_0>();
    case BlockType::Q5_1: return legacy<BlockType::Q5_1>();
    case BlockType::Q4_K: return k_quant<BlockType::Q4_K>();
    case BlockType::Q5_K: return k_quant<BlockType::Q5_K>();
    case BlockType::Q6_K: return k_quant<BlockType::Q6_K>();
    case BlockType::MXFP4: return legacy<BlockType::MXFP4>();
  }
  return {};
}

}  // namespace pert::quants

#else
namespace pert::quants {
KernelSet avx2_kernels(int) { return {}; }
}  // namespace pert::quants
#endif
