// AVX-512 VNNI kernels for the panels (quants_panels_vnni.inc): two panels side by side, 16
// weight rows, against R rows of x. A 512-bit register holds the same 32 bytes of both panels
// (panel a's 8 rows in the low half, b's in the high), so 4 bytes of x broadcast from memory meet
// 16 rows' 4 codes in one vpdpbusd. Why two panels rather than a new 16-row layout: every other
// path keeps its 8-row panels, and an odd panel at the end of a matrix runs the AVX2 kernel.
// Compiled for any x86-64 (`target` pragma), chosen at run time.
#include "kernels/quants_blocks.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/quants.hpp"

namespace pert::quants {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

namespace {

constexpr size_t kAhead = 4;  // super-blocks
constexpr int kRows = 2 * kPanelRows;
using V = __m512i;
using F = __m512;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// The same 32 (16) bytes of panels a and b, `at` on: a's in the low half, b's in the high one.
inline V code_bytes(const uint8_t* a, const uint8_t* b, size_t at) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a + at)), load256(b + at), 1);
}
inline __m256i half_bytes(const uint8_t* a, const uint8_t* b, size_t at) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(load128(a + at)), load128(b + at), 1);
}
// 4 bytes from memory in every 4 bytes (x[0..3]; two int16 sums): a broadcast load, no ALU work.
inline V broadcast4(const void* p) { return _mm512_broadcastd_epi32(_mm_loadu_si32(p)); }
inline V dpbusd(V acc, V u8, V s8) { return _mm512_dpbusd_epi32(acc, u8, s8); }
inline V dpwssd(V acc, V a, V b) { return _mm512_dpwssd_epi32(acc, a, b); }
inline V vand(V a, V b) { return _mm512_and_si512(a, b); }
inline V vor(V a, V b) { return _mm512_or_si512(a, b); }
inline V vadd(V a, V b) { return _mm512_add_epi32(a, b); }
inline V vsub(V a, V b) { return _mm512_sub_epi32(a, b); }
inline V vmullo(V a, V b) { return _mm512_mullo_epi32(a, b); }
template <int N> inline V srli16(V a) { return _mm512_srli_epi16(a, N); }
template <int N> inline V slli16(V a) { return _mm512_slli_epi16(a, N); }
template <int N> inline V srli32(V a) { return _mm512_srli_epi32(a, N); }
template <int N> inline V srai32(V a) { return _mm512_srai_epi32(a, N); }
template <int N> inline V slli32(V a) { return _mm512_slli_epi32(a, N); }
inline V vzero() { return _mm512_setzero_si512(); }
inline V set8(char v) { return _mm512_set1_epi8(v); }
inline V set32(int v) { return _mm512_set1_epi32(v); }
inline V widen_u16(__m256i h) { return _mm512_cvtepu16_epi32(h); }
inline V widen_s8_16(__m256i h) { return _mm512_cvtepi8_epi16(h); }
inline V widen_u8_16(__m256i h) { return _mm512_cvtepu8_epi16(h); }
inline F widen_f16(__m256i h) { return _mm512_cvtph_ps(h); }
inline F fzero() { return _mm512_setzero_ps(); }
inline F fset1(float v) { return _mm512_set1_ps(v); }
inline F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
inline F fmul(F a, F b) { return _mm512_mul_ps(a, b); }
inline F fadd(F a, F b) { return _mm512_add_ps(a, b); }
inline F to_float(V a) { return _mm512_cvtepi32_ps(a); }
inline void fstore(float* p, F a) { _mm512_storeu_ps(p, a); }
inline V lookup(V table, V idx) { return _mm512_shuffle_epi8(table, idx); }
// MXFP4's doubled E2M1 values plus 12 (0..24, unsigned for vpdpbusd), in every 16 bytes.
inline V mxfp4_biased_table() { return _mm512_broadcast_i32x4(_mm_add_epi8(load128(kMxfp4Doubled), _mm_set1_epi8(12))); }
// Half of 2^(e − 127) for the 16 rows: e − 1 as the F32 exponent, or the subnormals for e < 2.
inline F mxfp4_half_scales(const uint8_t* a, const uint8_t* b) {
  const __m128i e8 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
  const V e = _mm512_cvtepu8_epi32(e8);
  const V normal = _mm512_slli_epi32(_mm512_sub_epi32(e, set32(1)), 23);
  const V tiny = _mm512_sllv_epi32(set32(0x00200000), e);
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(e, set32(2)), normal, tiny));
}
template <size_t Bytes>
inline void prefetch_blocks(const uint8_t* a, const uint8_t* b) {  // as the AVX2 kernels, both panels
  for (size_t at = 0; at < Bytes; at += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(a + at), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + at), _MM_HINT_T0);
  }
}

#include "kernels/quants_panels_vnni.inc"

template <BlockType T> PairKernelSet pairs() {
  return {{VnniPanels<T, 1>::run, VnniPanels<T, 2>::run, VnniPanels<T, 3>::run, VnniPanels<T, 4>::run}};
}

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
