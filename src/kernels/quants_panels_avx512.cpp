// AVX-512 VNNI kernels for the panels (layout in quants_panels.cpp): two panels side by side,
// 16 weight rows, against R rows of x. A 512-bit register holds the same 32 bytes of both panels
// (panel a's 8 rows in the low half, b's in the high), so 4 bytes of x broadcast from memory
// (`vpdpbusd zmm, zmm, m32{1to16}`) meet 16 rows' 4 codes in one instruction and sum them straight
// into int32: no int16 stage, so no halving of Q5_K's and Q6_K's sub-blocks. A sub-block's int32
// sum is then multiplied by the 16 rows' scales (vpmulld), the mins and Q6_K's offset by
// vpdpwssd. The int32 totals are the AVX2 and plain kernels' (integer sums in another order),
// and the float steps theirs (quants_blocks.hpp: Lanes, lane s mod 4), so the floats are the same
// bit for bit. Why two panels rather than a new 16-row layout: every other path keeps its 8-row
// panels, and an odd panel at the end of a matrix runs the AVX2 kernel. Compiled for any x86-64
// (`target` pragma), chosen at run time.
#include "quants_blocks.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "quants.hpp"

namespace pert::quants {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

namespace {

constexpr size_t kAhead = 4;  // super-blocks
constexpr int kRows = 2 * kPanelRows;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// The same 32 (16) bytes of panels a and b: a's in the low half, b's in the high one.
inline __m512i pair256(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}
inline __m256i pair128(const uint8_t* a, const uint8_t* b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(load128(a)), load128(b), 1);
}
// 4 bytes from memory in every 4 bytes (x[0..3]; two int16 sums): a broadcast load, no ALU work.
inline __m512i broadcast4(const void* p) { return _mm512_broadcastd_epi32(_mm_loadu_si32(p)); }
inline __m512i broadcast_pair16(const int16_t* sums) { return broadcast4(sums); }

// Σ over Groups groups of 4 values (codes[g] against x from qx + 4g) of codes·x, in int32: two
// chains (even and odd groups) so that consecutive vpdpbusd do not wait on each other.
template <int Groups>
inline __m512i group_dots(const __m512i* codes, const int8_t* qx) {
  __m512i even = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes[0], broadcast4(qx));
  __m512i odd = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes[1], broadcast4(qx + 4));
  for (int g = 2; g < Groups; g += 2) {
    even = _mm512_dpbusd_epi32(even, codes[g], broadcast4(qx + 4 * g));
    odd = _mm512_dpbusd_epi32(odd, codes[g + 1], broadcast4(qx + 4 * g + 4));
  }
  return _mm512_add_epi32(even, odd);
}

template <size_t Bytes>
inline void prefetch_blocks(const uint8_t* a, const uint8_t* b) {  // as the AVX2 kernels, both panels
  for (size_t at = 0; at < Bytes; at += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(a + at), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + at), _MM_HINT_T0);
  }
}

// 8 groups of 4 values of 16 rows from 128 bytes of nibbles of each panel, and Five: a fifth bit
// each from 32 bytes (as the AVX2 kernels' unpack_groups, on both panels).
template <bool Five>
inline void unpack_groups(const uint8_t* a, const uint8_t* b, size_t codes, size_t high, __m512i* c) {
  const __m512i low4 = _mm512_set1_epi8(15), bit4 = _mm512_set1_epi8(0x10);
  for (int k = 0; k < 4; ++k) {
    const __m512i q = pair256(a + codes + 32 * k, b + codes + 32 * k);
    c[2 * k] = _mm512_and_si512(q, low4);
    c[2 * k + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
  }
  if (Five) {
    const __m512i h = pair256(a + high, b + high);
    for (int g = 0; g < 8; ++g)
      c[g] = _mm512_or_si512(c[g], _mm512_and_si512(g < 4 ? _mm512_slli_epi16(h, 4 - g) : _mm512_srli_epi16(h, g - 4), bit4));
  }
}

template <int R>
inline void zero_lanes(__m512 (*lanes)[4]) {
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < 4; ++u) lanes[r][u] = _mm512_setzero_ps();
}
// The float steps of a (super-)block s for the 16 rows (as Lanes::add: lane s mod 4, one fmadd each).
inline void add_lanes(__m512* lanes, size_t s, __m512i dot, __m512 scale, __m512 dx) {
  lanes[s & 3] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale, dx), lanes[s & 3]);
}
inline void store_rows(const __m512* lanes, float* out) {
  _mm512_storeu_ps(out, _mm512_add_ps(_mm512_add_ps(lanes[0], lanes[1]), _mm512_add_ps(lanes[2], lanes[3])));
}
inline __m512 f16x16(const uint8_t* a, const uint8_t* b) { return _mm512_cvtph_ps(pair128(a, b)); }

template <BlockType Type, int R>
void q45k_pair(const uint8_t* a, const uint8_t* b, const QuantizedX& x, int t0, float* out) {
  constexpr bool Five = Type == BlockType::Q5_K;
  constexpr PanelLayout at = panel_layout(Type);
  constexpr size_t bytes = at.bytes;
  const __m512i low8 = _mm512_set1_epi32(0xff);
  const size_t nb = size_t(x.K / QK_K), xs0 = size_t(t0) * nb;
  __m512 lanes[R][4];
  zero_lanes<R>(lanes);
  for (size_t s = 0; s < nb; ++s, a += bytes, b += bytes) {
    prefetch_blocks<bytes>(a + kAhead * bytes, b + kAhead * bytes);
    __m512i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
    __m512i pairs = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      // row i's scales of sub-blocks 2p, 2p + 1 as the bytes of dword i
      if (j % 2 == 0) pairs = _mm512_cvtepu16_epi32(pair128(a + at.scales + 8 * j, b + at.scales + 8 * j));
      const __m512i scale = j % 2 ? _mm512_srli_epi32(pairs, 8) : _mm512_and_si512(pairs, low8);
      __m512i c[8];
      unpack_groups<Five>(a, b, at.codes + 128 * j, at.high + 32 * j, c);
      for (int r = 0; r < R; ++r) {
        const int8_t* qx = x.q + (xs0 + size_t(r) * nb + s) * QK_K + 32 * j;
        dot[r] = _mm512_add_epi32(dot[r], _mm512_mullo_epi32(group_dots<8>(c, qx), scale));
      }
    }
    const __m512 d = f16x16(a, b), dmin = f16x16(a + 16, b + 16);
    __m512i mins[4];  // [i][e] int16: row i's mins of sub-blocks 2q, 2q + 1
    for (int q = 0; q < 4; ++q) mins[q] = _mm512_cvtepu8_epi16(pair128(a + at.mins + 16 * q, b + at.mins + 16 * q));
    for (int r = 0; r < R; ++r) {
      const size_t xs = xs0 + size_t(r) * nb + s;
      __m512i offset = _mm512_setzero_si512();  // Σ_j m_j·Σ_j qx
      for (int q = 0; q < 4; ++q) offset = _mm512_dpwssd_epi32(offset, mins[q], broadcast_pair16(x.sum32 + xs * 8 + 2 * q));
      const __m512 dx = _mm512_set1_ps(x.d[xs]);
      add_lanes(lanes[r], s, dot[r], d, dx);
      add_lanes(lanes[r], s, _mm512_sub_epi32(_mm512_setzero_si512(), offset), dmin, dx);
    }
  }
  for (int r = 0; r < R; ++r) store_rows(lanes[r], out + r * kRows);
}

template <int R>
void q6k_pair(const uint8_t* a, const uint8_t* b, const QuantizedX& x, int t0, float* out) {
  constexpr PanelLayout at = panel_layout(BlockType::Q6_K);
  constexpr size_t bytes = at.bytes;
  const __m512i low4 = _mm512_set1_epi8(15), bits45 = _mm512_set1_epi8(0x30);
  const size_t nb = size_t(x.K / QK_K), xs0 = size_t(t0) * nb;
  __m512 lanes[R][4];
  zero_lanes<R>(lanes);
  for (size_t s = 0; s < nb; ++s, a += bytes, b += bytes) {
    prefetch_blocks<bytes>(a + kAhead * bytes, b + kAhead * bytes);
    __m512i dot[R], offset[R];
    for (int r = 0; r < R; ++r) dot[r] = offset[r] = _mm512_setzero_si512();
    for (int q = 0; q < 8; ++q) {  // sub-blocks 2q and 2q + 1
      // [i][e] int16: row i's scales of sub-blocks 2q, 2q + 1 (the words of dword i)
      const __m512i pairs = _mm512_cvtepi8_epi16(pair128(a + at.scales + 16 * q, b + at.scales + 16 * q));
      for (int e = 0; e < 2; ++e) {
        const int j = 2 * q + e;
        const __m512i scale = e ? _mm512_srai_epi32(pairs, 16) : _mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 16);
        const __m512i q0 = pair256(a + at.codes + 64 * j, b + at.codes + 64 * j);
        const __m512i q1 = pair256(a + at.codes + 64 * j + 32, b + at.codes + 64 * j + 32);
        const __m512i h = pair256(a + at.high + 32 * j, b + at.high + 32 * j);
        const __m512i c[4] = {
            _mm512_or_si512(_mm512_and_si512(q0, low4), _mm512_and_si512(_mm512_slli_epi16(h, 4), bits45)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q0, 4), low4), _mm512_and_si512(_mm512_slli_epi16(h, 2), bits45)),
            _mm512_or_si512(_mm512_and_si512(q1, low4), _mm512_and_si512(h, bits45)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q1, 4), low4), _mm512_and_si512(_mm512_srli_epi16(h, 2), bits45))};
        for (int r = 0; r < R; ++r) {
          const int8_t* qx = x.q + (xs0 + size_t(r) * nb + s) * QK_K + 16 * j;
          dot[r] = _mm512_add_epi32(dot[r], _mm512_mullo_epi32(group_dots<4>(c, qx), scale));
        }
      }
      for (int r = 0; r < R; ++r)  // Σ_j s_j·Σ_j qx for the pair
        offset[r] = _mm512_dpwssd_epi32(offset[r], pairs, broadcast_pair16(x.bsum + (xs0 + size_t(r) * nb + s) * 16 + 2 * q));
    }
    const __m512 d = f16x16(a, b);
    for (int r = 0; r < R; ++r)
      add_lanes(lanes[r], s, _mm512_sub_epi32(dot[r], _mm512_slli_epi32(offset[r], 5)), d,
                _mm512_set1_ps(x.d[xs0 + size_t(r) * nb + s]));
  }
  for (int r = 0; r < R; ++r) store_rows(lanes[r], out + r * kRows);
}

// The legacy types, a block of 32 values (16 rows) a step: Σ c·qx in int32, the bias taken off
// (Q4_0 8·Σqx, Q5_0 16·Σqx), then one fmadd by d·dx (and Q4_1/Q5_1's m·dx·Σqx), as the row kernels.
template <BlockType Type, int R>
void legacy_pair(const uint8_t* a, const uint8_t* b, const QuantizedX& x, int t0, float* out) {
  constexpr bool five = Type == BlockType::Q5_0 || Type == BlockType::Q5_1;
  constexpr bool affine = Type == BlockType::Q4_1 || Type == BlockType::Q5_1;
  constexpr int bias = Type == BlockType::Q4_0 ? 8 : Type == BlockType::Q5_0 ? 16 : 0;
  constexpr PanelLayout at = panel_layout(Type);
  constexpr size_t bytes = at.bytes;
  const size_t nb = size_t(x.K / QK), xb0 = size_t(t0) * nb;
  __m512 lanes[R][4];
  zero_lanes<R>(lanes);
  for (size_t k = 0; k < nb; ++k, a += bytes, b += bytes) {
    prefetch_blocks<bytes>(a + 4 * kAhead * bytes, b + 4 * kAhead * bytes);  // a block is 3 lines: 16 blocks ahead
    __m512i c[8];
    unpack_groups<five>(a, b, at.codes, at.high, c);
    const __m512 d = f16x16(a, b), m = affine ? f16x16(a + at.mins, b + at.mins) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const size_t xb = xb0 + size_t(r) * nb + k;
      __m512i dot = group_dots<8>(c, x.q + xb * QK);
      if (bias) dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(bias * x.sum[xb]));
      const __m512 dx = _mm512_set1_ps(x.d[xb]);
      add_lanes(lanes[r], k, dot, d, dx);
      if (affine)
        lanes[r][k & 3] = _mm512_fmadd_ps(_mm512_set1_ps(float(x.sum[xb])), _mm512_mul_ps(m, dx), lanes[r][k & 3]);
    }
  }
  for (int r = 0; r < R; ++r) store_rows(lanes[r], out + r * kRows);
}

// MXFP4, a block of 32 values (16 rows) a step: the nibbles through the table (vpshufb) to the
// doubled E2M1 values plus 12, so unsigned (0..24) for vpdpbusd, and 12·Σqx taken off the int32
// sum; then one fmadd by the 16 rows' half scales times dx, as the row kernels.
template <int R>
void mxfp4_pair(const uint8_t* a, const uint8_t* b, const QuantizedX& x, int t0, float* out) {
  constexpr PanelLayout at = panel_layout(BlockType::MXFP4);
  constexpr size_t bytes = at.bytes;
  const __m512i table = _mm512_broadcast_i32x4(_mm_add_epi8(load128(kMxfp4Doubled), _mm_set1_epi8(12)));
  const size_t nb = size_t(x.K / QK), xb0 = size_t(t0) * nb;
  __m512 lanes[R][4];
  zero_lanes<R>(lanes);
  for (size_t k = 0; k < nb; ++k, a += bytes, b += bytes) {
    prefetch_blocks<bytes>(a + 4 * kAhead * bytes, b + 4 * kAhead * bytes);
    __m512i c[8];
    unpack_groups<false>(a, b, at.codes, 0, c);
    for (int g = 0; g < 8; ++g) c[g] = _mm512_shuffle_epi8(table, c[g]);
    // half of 2^(e − 127) for the 16 rows: e − 1 as the F32 exponent, or the subnormals for e < 2
    const __m128i e8 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                                          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
    const __m512i e = _mm512_cvtepu8_epi32(e8);
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __m512 d = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2)), normal, tiny));
    for (int r = 0; r < R; ++r) {
      const size_t xb = xb0 + size_t(r) * nb + k;
      const __m512i dot = _mm512_sub_epi32(group_dots<8>(c, x.q + xb * QK), _mm512_set1_epi32(12 * x.sum[xb]));
      add_lanes(lanes[r], k, dot, d, _mm512_set1_ps(x.d[xb]));
    }
  }
  for (int r = 0; r < R; ++r) store_rows(lanes[r], out + r * kRows);
}

template <BlockType T, int R> struct Pair {
  static void run(const uint8_t* a, const uint8_t* b, const QuantizedX& x, int t0, float* o) {
    if constexpr (T == BlockType::Q6_K) q6k_pair<R>(a, b, x, t0, o);
    else if constexpr (T == BlockType::Q4_K || T == BlockType::Q5_K) q45k_pair<T, R>(a, b, x, t0, o);
    else if constexpr (T == BlockType::MXFP4) mxfp4_pair<R>(a, b, x, t0, o);
    else legacy_pair<T, R>(a, b, x, t0, o);
  }
};
template <BlockType T> PairKernelSet pairs() { return {{Pair<T, 1>::run, Pair<T, 2>::run, Pair<T, 3>::run, Pair<T, 4>::run}}; }

}  // namespace

#pragma GCC pop_options

PairKernelSet avx512vnni_panel_pair_kernels(int ggml_type) {
  switch (BlockType(ggml_type)) {
    case BlockType::Q4_K: return pairs<BlockType::Q4_K>();
    case BlockType::Q5_K: return pairs<BlockType::Q5_K>();
    case BlockType::Q6_K: return pairs<BlockType::Q6_K>();
    case BlockType::Q4_0: return pairs<BlockType::Q4_0>();
    case BlockType::Q5_0: return pairs<BlockType::Q5_0>();
    case BlockType::Q4_1: return pairs<BlockType::Q4_1>();
    case BlockType::Q5_1: return pairs<BlockType::Q5_1>();
    case BlockType::MXFP4: return pairs<BlockType::MXFP4>();
    default: return {};
  }
}

}  // namespace pert::quants

#else
namespace pert::quants {
PairKernelSet avx512vnni_panel_pair_kernels(int) { return {}; }
}  // namespace pert::quants
#endif
