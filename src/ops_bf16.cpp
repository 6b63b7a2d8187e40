// BF16 matrix products on the packed layout of ops.hpp. One vdpbf16ps multiplies 16 rows' column
// pairs by one pair of x broadcast to every lane, so a 16-row block accumulates in one register;
// the GEMM kernel holds R rows of x × P blocks of 16 outputs in R·P registers.

#include <algorithm>
#include <cstring>
#include <vector>

#include "parallel.hpp"
#include "pert/ops.hpp"

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace pert {

uint16_t f32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

size_t bf16_packed_size(int N, int K) { return size_t((N + 15) / 16) * 16 * size_t((K + 1) / 2) * 2; }

void pack_bf16(uint16_t* packed, const uint16_t* rows, int N, int K) {
  std::fill(packed, packed + bf16_packed_size(N, K), uint16_t(0));
  const size_t pairs = size_t(K + 1) / 2;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      packed[((size_t(n / 16) * pairs + size_t(k / 2)) * 16 + size_t(n % 16)) * 2 + size_t(k % 2)] =
          rows[size_t(n) * K + k];
}

namespace {

constexpr int kRows = 6;    // rows of x per GEMM kernel call
constexpr int kBlocks = 4;  // 16-row weight blocks per GEMM kernel call

// out[r][16·p + j] (+)= Σ_pairs x[r] pair · W block p pair, for R rows and P blocks; `valid`
// outputs of the last block are stored (the rest is padding).
template <int R, int P>
void kernel(float* y, int ldy, const uint32_t* xp, int ldx, const uint16_t* w, size_t block_stride, int pairs,
            int valid_last, bool accumulate) {
#if defined(__AVX512BF16__)
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int kp = 0; kp < pairs; ++kp) {
    __m512bh wv[P];
    for (int p = 0; p < P; ++p) {
      const uint16_t* at = w + p * block_stride + size_t(kp) * 32;
      _mm_prefetch(reinterpret_cast<const char*>(at + 32 * 16), _MM_HINT_T0);  // 1 KB ahead in each stream
      wv[p] = (__m512bh)_mm512_loadu_si512(at);
    }
    for (int r = 0; r < R; ++r) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(int(xp[size_t(r) * ldx + kp]));
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_dpbf16_ps(acc[r][p], wv[p], xv);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) {
      float* out = y + size_t(r) * ldy + 16 * p;
      const __mmask16 m = p == P - 1 ? __mmask16((1u << valid_last) - 1) : __mmask16(0xffff);
      __m512 v = acc[r][p];
      if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out));
      _mm512_mask_storeu_ps(out, m, v);
    }
#else
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p)
      for (int j = 0; j < (p == P - 1 ? valid_last : 16); ++j) {
        float dot = 0.0f;
        for (int kp = 0; kp < pairs; ++kp) {
          const uint32_t xv = xp[size_t(r) * ldx + kp];
          const uint16_t* wp = w + p * block_stride + size_t(kp) * 32 + 2 * j;
          dot += bf16_to_f32_value(wp[0]) * bf16_to_f32_value(uint16_t(xv)) +
                 bf16_to_f32_value(wp[1]) * bf16_to_f32_value(uint16_t(xv >> 16));
        }
        float& out = y[size_t(r) * ldy + 16 * p + j];
        out = accumulate ? out + dot : dot;
      }
#endif
}

using Kernel = void (*)(float*, int, const uint32_t*, int, const uint16_t*, size_t, int, int, bool);

template <int R>
Kernel pick_blocks(int p) {
  switch (p) {
    case 1: return kernel<R, 1>;
    case 2: return kernel<R, 2>;
    case 3: return kernel<R, 3>;
    default: return kernel<R, 4>;
  }
}

Kernel pick(int r, int p) {
  switch (r) {
    case 1: return pick_blocks<1>(p);
    case 2: return pick_blocks<2>(p);
    case 3: return pick_blocks<3>(p);
    case 4: return pick_blocks<4>(p);
    case 5: return pick_blocks<5>(p);
    default: return pick_blocks<6>(p);
  }
}

}  // namespace

void matmul(float* y, const float* x, const Weight& w, int T, int K, int N, bool accumulate) {
  if (w.f32) return matmul(y, x, w.f32, T, K, N, accumulate);
  if (w.q8) return matmul_q8(y, x, w, T, K, N, accumulate);
  const int pairs = (K + 1) / 2, n_blocks = (N + 15) / 16;
  const size_t block_stride = size_t(pairs) * 32;
  // x rounded to BF16, as pairs: [T][pairs] (a zero pads odd K). Grows once, then reused.
  static thread_local std::vector<uint32_t> xb;
  xb.assign(size_t(T) * pairs, 0u);
  uint32_t* const xp = xb.data();  // this thread's: thread_local names another inside the loops
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k)
      xp[size_t(t) * pairs + k / 2] |= uint32_t(f32_to_bf16(x[size_t(t) * K + k])) << (16 * (k % 2));
  // Work items: groups of kBlocks weight blocks (independent accumulators, so no one waits).
  const int group = kBlocks, n_groups = (n_blocks + group - 1) / group;
  parallel_for_if(size_t(T) * N * K > 32768, n_groups, [&](int g) {
    const int b0 = g * group, nb = std::min(group, n_blocks - b0);
    const int valid_last = std::min(16, N - (b0 + nb - 1) * 16);
    for (int t0 = 0; t0 < T; t0 += kRows) {
      const int rows = std::min(kRows, T - t0);
      pick(rows, nb)(y + size_t(t0) * N + size_t(b0) * 16, N, xp + size_t(t0) * pairs, pairs,
                     w.bf16 + size_t(b0) * block_stride, block_stride, pairs, valid_last, accumulate);
    }
  });
}

}  // namespace pert
