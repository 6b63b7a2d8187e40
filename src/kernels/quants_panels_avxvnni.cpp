// AVX-VNNI kernels for the panels (quants_panels_vnni.inc): one panel, 8 weight rows, in 256-bit
// registers with the VEX vpdpbusd of CPUs that have it without AVX-512 (Intel client CPUs from
// Alder Lake; Zen 5 has both). The same code as the avx512vnni path's two panels, at half the
// width. Compiled for any x86-64 (`target` pragma), chosen at run time.
#include "kernels/quants_blocks.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/quants.hpp"

namespace pert::quants {

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")

namespace {

constexpr size_t kAhead = 4;  // super-blocks
constexpr int kRows = kPanelRows;
using V = __m256i;
using F = __m256;

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// The 32 (16) bytes of panel a, `at` on (b, the second panel of the wider path, is not read).
inline V code_bytes(const uint8_t* a, const uint8_t*, size_t at) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + at)); }
inline __m128i half_bytes(const uint8_t* a, const uint8_t*, size_t at) { return load128(a + at); }
// 4 bytes from memory in every 4 bytes (x[0..3]; two int16 sums): a broadcast load, no ALU work.
inline V broadcast4(const void* p) { return _mm256_broadcastd_epi32(_mm_loadu_si32(p)); }
inline V dpbusd(V acc, V u8, V s8) { return _mm256_dpbusd_avx_epi32(acc, u8, s8); }
inline V dpwssd(V acc, V a, V b) { return _mm256_dpwssd_avx_epi32(acc, a, b); }
inline V vand(V a, V b) { return _mm256_and_si256(a, b); }
inline V vor(V a, V b) { return _mm256_or_si256(a, b); }
inline V vadd(V a, V b) { return _mm256_add_epi32(a, b); }
inline V vsub(V a, V b) { return _mm256_sub_epi32(a, b); }
inline V vmullo(V a, V b) { return _mm256_mullo_epi32(a, b); }
template <int N> inline V srli16(V a) { return _mm256_srli_epi16(a, N); }
template <int N> inline V slli16(V a) { return _mm256_slli_epi16(a, N); }
template <int N> inline V srli32(V a) { return _mm256_srli_epi32(a, N); }
template <int N> inline V srai32(V a) { return _mm256_srai_epi32(a, N); }
template <int N> inline V slli32(V a) { return _mm256_slli_epi32(a, N); }
inline V vzero() { return _mm256_setzero_si256(); }
inline V set8(char v) { return _mm256_set1_epi8(v); }
inline V set32(int v) { return _mm256_set1_epi32(v); }
inline V widen_u16(__m128i h) { return _mm256_cvtepu16_epi32(h); }
inline V widen_s8_16(__m128i h) { return _mm256_cvtepi8_epi16(h); }
inline V widen_u8_16(__m128i h) { return _mm256_cvtepu8_epi16(h); }
inline F widen_f16(__m128i h) { return _mm256_cvtph_ps(h); }
inline F fzero() { return _mm256_setzero_ps(); }
inline F fset1(float v) { return _mm256_set1_ps(v); }
inline F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
inline F fmul(F a, F b) { return _mm256_mul_ps(a, b); }
inline F fadd(F a, F b) { return _mm256_add_ps(a, b); }
inline F to_float(V a) { return _mm256_cvtepi32_ps(a); }
inline void fstore(float* p, F a) { _mm256_storeu_ps(p, a); }
inline V lookup(V table, V idx) { return _mm256_shuffle_epi8(table, idx); }
// MXFP4's doubled E2M1 values plus 12 (0..24, unsigned for vpdpbusd), in both 16-byte lanes.
inline V mxfp4_biased_table() { return _mm256_broadcastsi128_si256(_mm_add_epi8(load128(kMxfp4Doubled), _mm_set1_epi8(12))); }
// Half of 2^(e − 127) for the 8 rows: e − 1 as the F32 exponent, or the subnormals for e < 2.
inline F mxfp4_half_scales(const uint8_t* a, const uint8_t*) {
  const V e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)));
  const V normal = _mm256_slli_epi32(_mm256_sub_epi32(e, set32(1)), 23);
  const V tiny = _mm256_sllv_epi32(set32(0x00200000), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, _mm256_cmpgt_epi32(set32(2), e)));
}
template <size_t Bytes>
inline void prefetch_blocks(const uint8_t* a, const uint8_t*) {  // as the AVX2 kernels
  for (size_t at = 0; at < Bytes; at += 64) _mm_prefetch(reinterpret_cast<const char*>(a + at), _MM_HINT_T0);
}

#include "kernels/quants_panels_vnni.inc"

template <BlockType T, int R> void one_panel(const uint8_t* w, const QuantizedX& x, int t0, float* out) {
  VnniPanels<T, R>::run(w, w, x, t0, out);
}
template <BlockType T> KernelSet panels() {
  return {{one_panel<T, 1>, one_panel<T, 2>, one_panel<T, 3>, one_panel<T, 4>}};
}

}  // namespace

#pragma GCC pop_options

KernelSet avxvnni_panel_kernels(int ggml_type) {
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
KernelSet avxvnni_panel_kernels(int) { return {}; }
}  // namespace pert::quants
#endif
