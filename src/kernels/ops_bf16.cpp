// BF16 matrix products on the packed layout of ops.hpp. One vdpbf16ps multiplies 16 rows' column
// pairs by one pair of x broadcast to every lane, so a 16-row block accumulates in one register;
// the GEMM kernel holds R rows of x × P blocks of 16 outputs in R·P registers.
// CPUs without AVX-512 BF16 do the same arithmetic otherwise: decoding (T = 1) widens each pair
// word in AVX2 registers (a BF16 is the top half of an F32: a shift and a mask) and multiplies
// with FMA, streaming half F32's bytes; prefill widens 256 rows at a time into F32 and hands
// them to OpenBLAS's sgemm with x rounded to BF16 (products of BF16 values are exact in F32).

#include <algorithm>
#include <cstring>
#include <vector>

#include "parallel.hpp"
#include "pert/ops.hpp"

#if defined(__AVX512BF16__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if !defined(__AVX512BF16__)
#include <cblas.h>
#endif

namespace pert {

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
#elif defined(__AVX2__) && defined(__FMA__)
  // Lane j of a pair word holds row j's k (low half) and k + 1 (high half).
  const __m256i high = _mm256_set1_epi32(int(0xffff0000u));
  __m256 acc[R][P][2];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
  for (int kp = 0; kp < pairs; ++kp) {
    __m256 xlo[R], xhi[R];
    for (int r = 0; r < R; ++r) {
      const uint32_t xv = xp[size_t(r) * ldx + kp];
      xlo[r] = _mm256_set1_ps(bf16_to_f32_value(uint16_t(xv)));
      xhi[r] = _mm256_set1_ps(bf16_to_f32_value(uint16_t(xv >> 16)));
    }
    for (int p = 0; p < P; ++p)
      for (int half = 0; half < 2; ++half) {
        const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + p * block_stride + size_t(kp) * 32 + 16 * half));
        const __m256 lo = _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
        const __m256 hi = _mm256_castsi256_ps(_mm256_and_si256(words, high));
        for (int r = 0; r < R; ++r)
          acc[r][p][half] = _mm256_fmadd_ps(hi, xhi[r], _mm256_fmadd_ps(lo, xlo[r], acc[r][p][half]));
      }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, acc[r][p][0]);
      _mm256_store_ps(lanes + 8, acc[r][p][1]);
      float* out = y + size_t(r) * ldy + 16 * p;
      for (int j = 0; j < (p == P - 1 ? valid_last : 16); ++j) out[j] = accumulate ? out[j] + lanes[j] : lanes[j];
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

#if !defined(__AVX512BF16__)
// Prefill without vdpbf16ps: y (+)= round_bf16(x) · Wᵀ by sgemm, W widened kPanel rows at a time.
constexpr int kPanel = 256;
void matmul_widened(float* y, const float* x, const uint16_t* packed, int T, int K, int N, bool accumulate) {
  static thread_local std::vector<float> xr, panel;  // grow once, then reused
  xr.resize(size_t(T) * K);
  panel.resize(size_t(kPanel) * K);
  for (size_t i = 0; i < xr.size(); ++i) xr[i] = bf16_to_f32_value(f32_to_bf16(x[i]));
  float* const wf = panel.data();  // this thread's, named inside the loop
  for (int n0 = 0; n0 < N; n0 += kPanel) {
    const int rows = std::min(kPanel, N - n0);
    const int pairs = (K + 1) / 2;
    parallel_for_if(size_t(rows) * K > 32768, (rows + 15) / 16, [&](int b) {  // a block of 16 rows, pair by pair
      const uint16_t* src = packed + size_t(n0 / 16 + b) * size_t(pairs) * 32;
      const int n_rows = std::min(16, rows - 16 * b);
      for (int kp = 0; kp < pairs; ++kp, src += 32)
        for (int j = 0; j < n_rows; ++j) {
          float* dst = wf + size_t(16 * b + j) * K + 2 * kp;
          dst[0] = bf16_to_f32_value(src[2 * j]);
          if (2 * kp + 1 < K) dst[1] = bf16_to_f32_value(src[2 * j + 1]);
        }
    });
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, rows, K, 1.0f, xr.data(), K, wf, K, accumulate ? 1.0f : 0.0f,
                y + n0, N);
  }
}
#endif

}  // namespace

void matmul_shared(const float* x, int T, int K, std::initializer_list<Projection> products) {
  bool all_q8 = true, all_f32 = true, all_blocks = products.size() <= 4;
  for (const Projection& p : products)
    all_q8 = all_q8 && p.w->q8, all_f32 = all_f32 && p.w->f32, all_blocks = all_blocks && p.w->blocks.data;
  if (all_q8) return matmul_q8(x, T, K, products.begin(), products.size());
  if (all_blocks) {  // x quantized once for all of them
    BlockProduct blocks[4];
    size_t n = 0;
    for (const Projection& p : products) blocks[n++] = {p.y, &p.w->blocks, p.N, p.accumulate};
    return matmul_blocks(x, T, K, blocks, n);
  }
  if (all_f32) return matmul_f32(x, T, K, products.begin(), products.size());
  for (const Projection& p : products) matmul(p.y, x, *p.w, T, K, p.N, p.accumulate);
}

size_t weight_bytes(const Weight& w, int N, int K) {
  if (w.f32) return size_t(N) * size_t(K) * sizeof(float);
  if (w.q8) return q8_packed_size(N, K) + q8_scales_size(N, K) * sizeof(uint16_t);
  if (w.blocks.data) return size_t(N) * w.blocks.row_stride;
  return bf16_packed_size(N, K) * sizeof(uint16_t);
}

void matmul(float* y, const float* x, const Weight& w, int T, int K, int N, bool accumulate) {
  if (w.f32) return matmul(y, x, w.f32, T, K, N, accumulate);
  if (w.q8) return matmul_q8(y, x, w, T, K, N, accumulate);
  if (w.blocks.data) return matmul_blocks(y, x, w.blocks, T, K, N, accumulate);
#if !defined(__AVX512BF16__)
  if (T > 1) return matmul_widened(y, x, w.bf16, T, K, N, accumulate);
#endif
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
