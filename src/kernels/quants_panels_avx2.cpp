// AVX2 (+FMA, F16C) kernels for the panels (layout in quants_panels.cpp): 8 weight rows
// against R rows of x. Per 4 values of a sub-block, x's 4 bytes broadcast (vpbroadcastd) meet the
// 8 rows' codes in one vpmaddubsw; the sub-block's products add up in int16 (at most
// 8 × 2 × 15 × 127 = 30,480 for Q4_K, 4 × 2 × 31 × 127 = 31,496 for Q5_K and
// 2 × 2 × 63 × 127 = 32,004 for Q6_K, so half a sub-block at a time for Q5_K and Q6_K)
// before one vpmaddwd by the 8 rows' scales. The int32 totals and the float steps are the row
// kernels' (quants_blocks.hpp: Lanes), so the float is the same, bit for bit. Compiled for any
// x86-64 (`target` pragma), chosen at run time.
#include "kernels/quants_blocks.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/quants.hpp"

namespace pert::quants {

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

constexpr size_t kAhead = 4;  // super-blocks

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i broadcast4(const int8_t* x) {  // x[0..3] in every 4 bytes
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// A scales/mins pair register ([i][e]: row i's value of sub-blocks 2p, 2p + 1, as int16) to the
// int16 pairs (s, s) of sub-block 2p (Odd false) or 2p + 1 for vpmaddwd.
template <bool Odd>
inline __m256i one_of_pair(__m256i pairs) {
  const __m256i pick = _mm256_add_epi8(_mm256_setr_epi32(0x01000100, 0x05040504, 0x09080908, 0x0d0c0d0c, 0x01000100,
                                                          0x05040504, 0x09080908, 0x0d0c0d0c),
                                        _mm256_set1_epi8(Odd ? 2 : 0));  // pshufb picks within each 128-bit lane
  return _mm256_shuffle_epi8(pairs, pick);
}

// Σ over Groups groups of 4 values (codes[g] against x from qx + 4g) of codes·x, in int16.
template <int Groups>
inline __m256i group_sums(const __m256i* codes, const int8_t* qx) {
  __m256i a = _mm256_maddubs_epi16(codes[0], broadcast4(qx));
  for (int g = 1; g < Groups; ++g) a = _mm256_add_epi16(a, _mm256_maddubs_epi16(codes[g], broadcast4(qx + 4 * g)));
  return a;
}

// Every cache line of the super-block `ahead` super-blocks on: a panel's super-block spans 19 to
// 27 lines read as three streams (scales, codes, high bits), more than the hardware prefetcher
// keeps up with when decoding.
template <size_t Bytes>
inline void prefetch_block(const uint8_t* p) {
  for (size_t at = 0; at < Bytes; at += 64) _mm_prefetch(reinterpret_cast<const char*>(p + at), _MM_HINT_T0);
}

// 8 groups of 4 values of 8 rows (32 values each) from 128 bytes of nibbles, and Five: a fifth
// bit each from 32 bytes (bit g of each byte to bit 4 of group g's byte; 16-bit shifts keep each
// byte's own bits at 4).
template <bool Five>
inline void unpack_groups(const uint8_t* codes, const uint8_t* high, __m256i* c) {
  const __m256i low4 = _mm256_set1_epi8(15), bit4 = _mm256_set1_epi8(0x10);
  for (int k = 0; k < 4; ++k) {
    const __m256i q = load256(codes + 32 * k);
    c[2 * k] = _mm256_and_si256(q, low4);
    c[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
  }
  if (Five) {
    const __m256i h = load256(high);
    for (int g = 0; g < 8; ++g)
      c[g] = _mm256_or_si256(c[g], _mm256_and_si256(g < 4 ? _mm256_slli_epi16(h, 4 - g) : _mm256_srli_epi16(h, g - 4), bit4));
  }
}

template <int R>
inline void zero_lanes(__m256 (*lanes)[4]) {
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < 4; ++u) lanes[r][u] = _mm256_setzero_ps();
}

// The float steps of a super-block s for the 8 rows (as Lanes::add: lane s mod 4, one fmadd each).
inline void add_lanes(__m256* lanes, size_t s, __m256i dot, __m256 scale, __m256 dx) {
  lanes[s & 3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(scale, dx), lanes[s & 3]);
}
inline void store_rows(const __m256* lanes, float* out) {
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(lanes[0], lanes[1]), _mm256_add_ps(lanes[2], lanes[3])));
}

template <BlockType Type, int R>
void q45k_panel(const uint8_t* p, const QuantizedX& x, int t0, float* out) {
  constexpr bool Five = Type == BlockType::Q5_K;
  constexpr PanelLayout at = panel_layout(Type);
  constexpr size_t bytes = at.bytes;
  const size_t nb = size_t(x.K / QK_K), xs0 = size_t(t0) * nb;
  __m256 lanes[R][4];
  zero_lanes<R>(lanes);
  for (size_t s = 0; s < nb; ++s, p += bytes) {
    prefetch_block<bytes>(p + kAhead * bytes);
    __m256i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i pairs = _mm256_cvtepu8_epi16(load128(p + at.scales + 16 * (j / 2)));
      const __m256i scale = j % 2 ? one_of_pair<true>(pairs) : one_of_pair<false>(pairs);
      __m256i c[8];
      unpack_groups<Five>(p + at.codes + 128 * j, p + at.high + 32 * j, c);
      for (int r = 0; r < R; ++r) {
        const int8_t* qx = x.q + (xs0 + size_t(r) * nb + s) * QK_K + 32 * j;
        if (Five) {
          dot[r] = _mm256_add_epi32(dot[r], _mm256_add_epi32(_mm256_madd_epi16(group_sums<4>(c, qx), scale),
                                                             _mm256_madd_epi16(group_sums<4>(c + 4, qx + 16), scale)));
        } else {
          dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(group_sums<8>(c, qx), scale));
        }
      }
    }
    const __m256 d = _mm256_cvtph_ps(load128(p)), dmin = _mm256_cvtph_ps(load128(p + 16));
    for (int r = 0; r < R; ++r) {
      const size_t xs = xs0 + size_t(r) * nb + s;
      __m256i offset = _mm256_setzero_si256();  // Σ_j m_j·Σ_j qx, pairs of sub-blocks at once
      for (int q = 0; q < 4; ++q) {
        int32_t sums;
        std::memcpy(&sums, x.sum32 + xs * 8 + 2 * q, 4);
        offset = _mm256_add_epi32(offset, _mm256_madd_epi16(_mm256_cvtepu8_epi16(load128(p + at.mins + 16 * q)),
                                                            _mm256_set1_epi32(sums)));
      }
      const __m256 dx = _mm256_set1_ps(x.d[xs]);
      add_lanes(lanes[r], s, dot[r], d, dx);
      add_lanes(lanes[r], s, _mm256_sub_epi32(_mm256_setzero_si256(), offset), dmin, dx);
    }
  }
  for (int r = 0; r < R; ++r) store_rows(lanes[r], out + r * kPanelRows);
}

template <int R>
void q6k_panel(const uint8_t* p, const QuantizedX& x, int t0, float* out) {
  constexpr PanelLayout at = panel_layout(BlockType::Q6_K);
  constexpr size_t bytes = at.bytes;
  const __m256i low4 = _mm256_set1_epi8(15), bits45 = _mm256_set1_epi8(0x30);
  const size_t nb = size_t(x.K / QK_K), xs0 = size_t(t0) * nb;
  __m256 lanes[R][4];
  zero_lanes<R>(lanes);
  for (size_t s = 0; s < nb; ++s, p += bytes) {
    prefetch_block<bytes>(p + kAhead * bytes);
    __m256i dot[R], offset[R];
    for (int r = 0; r < R; ++r) dot[r] = offset[r] = _mm256_setzero_si256();
    for (int q = 0; q < 8; ++q) {  // sub-blocks 2q and 2q + 1
      const __m256i pairs = _mm256_cvtepi8_epi16(load128(p + at.scales + 16 * q));
      for (int e = 0; e < 2; ++e) {
        const int j = 2 * q + e;
        const __m256i scale = e ? one_of_pair<true>(pairs) : one_of_pair<false>(pairs);
        const __m256i q0 = load256(p + at.codes + 64 * j), q1 = load256(p + at.codes + 64 * j + 32);
        const __m256i h = load256(p + at.high + 32 * j);
        const __m256i c[4] = {
            _mm256_or_si256(_mm256_and_si256(q0, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), bits45)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q0, 4), low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45)),
            _mm256_or_si256(_mm256_and_si256(q1, low4), _mm256_and_si256(h, bits45)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q1, 4), low4), _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45))};
        for (int r = 0; r < R; ++r) {
          const int8_t* qx = x.q + (xs0 + size_t(r) * nb + s) * QK_K + 16 * j;
          dot[r] = _mm256_add_epi32(dot[r], _mm256_add_epi32(_mm256_madd_epi16(group_sums<2>(c, qx), scale),
                                                             _mm256_madd_epi16(group_sums<2>(c + 2, qx + 8), scale)));
        }
      }
      for (int r = 0; r < R; ++r) {  // Σ_j s_j·Σ_j qx for the pair
        int32_t sums;
        std::memcpy(&sums, x.bsum + (xs0 + size_t(r) * nb + s) * 16 + 2 * q, 4);
        offset[r] = _mm256_add_epi32(offset[r], _mm256_madd_epi16(pairs, _mm256_set1_epi32(sums)));
      }
    }
    const __m256 d = _mm256_cvtph_ps(load128(p));
    for (int r = 0; r < R; ++r)
      add_lanes(lanes[r], s, _mm256_sub_epi32(dot[r], _mm256_slli_epi32(offset[r], 5)), d,
                _mm256_set1_ps(x.d[xs0 + size_t(r) * nb + s]));
  }
  for (int r = 0; r < R; ++r) store_rows(lanes[r], out + r * kPanelRows);
}

// The legacy types, a block of 32 values (8 rows) a step: Σ c·qx in int16 (Q5's codes to 31:
// two halves), widened by vpmaddwd with ones, the bias taken off in int32 (Q4_0 8·Σqx, Q5_0
// 16·Σqx), then per block one fmadd by d·dx (and Q4_1/Q5_1's m·dx·Σqx), as the row kernels.
template <BlockType Type, int R>
void legacy_panel(const uint8_t* p, const QuantizedX& x, int t0, float* out) {
  constexpr bool five = Type == BlockType::Q5_0 || Type == BlockType::Q5_1;
  constexpr bool affine = Type == BlockType::Q4_1 || Type == BlockType::Q5_1;
  constexpr int bias = Type == BlockType::Q4_0 ? 8 : Type == BlockType::Q5_0 ? 16 : 0;
  constexpr PanelLayout at = panel_layout(Type);
  constexpr size_t bytes = at.bytes;
  const __m256i ones = _mm256_set1_epi16(1);
  const size_t nb = size_t(x.K / QK), xb0 = size_t(t0) * nb;
  __m256 lanes[R][4];
  zero_lanes<R>(lanes);
  for (size_t b = 0; b < nb; ++b, p += bytes) {
    prefetch_block<bytes>(p + 4 * kAhead * bytes);  // a block is 3 lines: 16 blocks ahead
    __m256i c[8];
    unpack_groups<five>(p + at.codes, p + at.high, c);
    const __m256 d = _mm256_cvtph_ps(load128(p)), m = affine ? _mm256_cvtph_ps(load128(p + at.mins)) : _mm256_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const size_t xb = xb0 + size_t(r) * nb + b;
      const int8_t* qx = x.q + xb * QK;
      __m256i dot = five ? _mm256_add_epi32(_mm256_madd_epi16(group_sums<4>(c, qx), ones),
                                            _mm256_madd_epi16(group_sums<4>(c + 4, qx + 16), ones))
                         : _mm256_madd_epi16(group_sums<8>(c, qx), ones);
      if (bias) dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(bias * x.sum[xb]));
      const __m256 dx = _mm256_set1_ps(x.d[xb]);
      add_lanes(lanes[r], b, dot, d, dx);
      if (affine)
        lanes[r][b & 3] = _mm256_fmadd_ps(_mm256_set1_ps(float(x.sum[xb])), _mm256_mul_ps(m, dx), lanes[r][b & 3]);
    }
  }
  for (int r = 0; r < R; ++r) store_rows(lanes[r], out + r * kPanelRows);
}

// MXFP4, a block of 32 values (8 rows) a step: the nibbles through the table (vpshufb) to the
// doubled E2M1 values, signed, so vpmaddubsw takes |c| against x·sign(c); a block's sums stay in
// int16 (8 · 2 · 12 · 127 = 24,384), then one vpmaddwd by ones and one fmadd by the 8 rows' half
// scales times dx, as the row kernels.
template <int R>
void mxfp4_panel(const uint8_t* p, const QuantizedX& x, int t0, float* out) {
  constexpr PanelLayout at = panel_layout(BlockType::MXFP4);
  constexpr size_t bytes = at.bytes;
  const __m256i ones = _mm256_set1_epi16(1), table = _mm256_broadcastsi128_si256(load128(kMxfp4Doubled));
  const size_t nb = size_t(x.K / QK), xb0 = size_t(t0) * nb;
  __m256 lanes[R][4];
  zero_lanes<R>(lanes);
  for (size_t b = 0; b < nb; ++b, p += bytes) {
    prefetch_block<bytes>(p + 4 * kAhead * bytes);
    __m256i c[8], magnitude[8];
    unpack_groups<false>(p + at.codes, nullptr, c);
    for (int g = 0; g < 8; ++g) c[g] = _mm256_shuffle_epi8(table, c[g]), magnitude[g] = _mm256_sign_epi8(c[g], c[g]);
    // half of 2^(e − 127) for the 8 rows: e − 1 as the F32 exponent, or the subnormals for e < 2
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256 d = _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
    for (int r = 0; r < R; ++r) {
      const size_t xb = xb0 + size_t(r) * nb + b;
      const int8_t* qx = x.q + xb * QK;
      __m256i sums = _mm256_maddubs_epi16(magnitude[0], _mm256_sign_epi8(broadcast4(qx), c[0]));
      for (int g = 1; g < 8; ++g)
        sums = _mm256_add_epi16(sums, _mm256_maddubs_epi16(magnitude[g], _mm256_sign_epi8(broadcast4(qx + 4 * g), c[g])));
      add_lanes(lanes[r], b, _mm256_madd_epi16(sums, ones), d, _mm256_set1_ps(x.d[xb]));
    }
  }
  for (int r = 0; r < R; ++r) store_rows(lanes[r], out + r * kPanelRows);
}

template <BlockType T, int R> struct Panel {
  static void run(const uint8_t* p, const QuantizedX& x, int t0, float* o) {
    if constexpr (T == BlockType::Q6_K) q6k_panel<R>(p, x, t0, o);
    else if constexpr (T == BlockType::Q4_K || T == BlockType::Q5_K) q45k_panel<T, R>(p, x, t0, o);
    else if constexpr (T == BlockType::MXFP4) mxfp4_panel<R>(p, x, t0, o);
    else legacy_panel<T, R>(p, x, t0, o);
  }
};
template <BlockType T> KernelSet panels() { return {{Panel<T, 1>::run, Panel<T, 2>::run, Panel<T, 3>::run, Panel<T, 4>::run}}; }

}  // namespace

#pragma GCC pop_options

KernelSet avx2_panel_kernels(int ggml_type) {
  switch (BlockType(ggml_type)) {
    case BlockType::Q4_K: return panels<BlockType::Q4_K>();
    case BlockType::Q5_K: return panels<BlockType::Q5_K>();
    case BlockType::Q6_K: return panels<BlockType::Q6_K>();
    case BlockType::Q4_0: return panels<BlockType::Q4_0>();
    case BlockType::Q5_0: return panels<BlockType::Q5_0>();
    case BlockType::Q4_1: return panels<BlockType::Q4_1>();
    case BlockType::Q5_1: return panels<BlockType::Q5_1>();
    case BlockType::MXFP4: return panels<BlockType::MXFP4>();
    default: return {};
  }
}

}  // namespace pert::quants

#else
namespace pert::quants {
KernelSet avx2_panel_kernels(int) { return {}; }
}  // namespace pert::quants
#endif
