// F32 products on AVX-512 (F, BW, VL, DQ), compiled for any x86-64 inside a target region and
// chosen at run time (src/kernels/ops_f32.cpp). Prefill: pert's own GEMM, W packed 64 columns at
// a time (a panel, [4][K][16], by 16 × 16 transposes in registers) and 6 rows of x multiplied by
// it in 24 registers, x broadcast, so no sums across lanes; gemm_nn reads a W whose rows already
// hold the columns side by side (attention's values) in place. That runs at twice the rate of
// OpenBLAS's AVX2 (Haswell) kernels, which some machines are held to (OPENBLAS_CORETYPE: older
// OpenBLAS builds' AVX-512 kernels fail on some CPUs). Decoding: ops_f32_simd.inc on 16 lanes.
#include "kernels/ops_f32.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/lane_sums.hpp"

namespace pert {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")

namespace {
namespace avx512 {

constexpr int kGemmRows = 6;     // rows of x per kernel call
constexpr int kPanelBlocks = 4;  // blocks of 16 columns per kernel call (a panel)

// y[r][16·p + j] (+)= alpha · Σ_k x[r][k] · w[p][k][j] for R rows and P blocks of 16 columns,
// w's block p at w + p·block_stride, its k-th row k_stride further; of the 16·P columns the
// first `valid` are read and stored.
template <int R, int P>
void gemm_kernel(float* y, int ldy, const float* x, int ldx, const float* w, size_t block_stride, size_t k_stride,
                 int K, int valid, float alpha, bool accumulate) {
  const __mmask16 last = __mmask16((1u << (valid - 16 * (P - 1))) - 1);  // the last block's columns
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int k = 0; k < K; ++k) {
    const float* at = w + size_t(k) * k_stride;
    __m512 wv[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      _mm_prefetch(reinterpret_cast<const char*>(at + p * block_stride + 16 * k_stride), _MM_HINT_T0);  // 16 rows ahead
      wv[p] = p < P - 1 ? _mm512_loadu_ps(at + p * block_stride) : _mm512_maskz_loadu_ps(last, at + p * block_stride);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_set1_ps(x[size_t(r) * ldx + k]);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(xv, wv[p], acc[r][p]);
    }
  }
  const __m512 a = _mm512_set1_ps(alpha);
  // Every loop over acc unrolled: indexed at run time, GCC keeps acc in memory and stores it each step.
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __mmask16 m = p < P - 1 ? __mmask16(0xffff) : last;
      float* out = y + size_t(r) * ldy + 16 * p;
      __m512 v = _mm512_mul_ps(acc[r][p], a);
      if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out));
      _mm512_mask_storeu_ps(out, m, v);
    }
}

using GemmKernel = void (*)(float*, int, const float*, int, const float*, size_t, size_t, int, int, float, bool);
template <int R>
constexpr GemmKernel kRowKernels[kPanelBlocks] = {gemm_kernel<R, 1>, gemm_kernel<R, 2>, gemm_kernel<R, 3>, gemm_kernel<R, 4>};
constexpr const GemmKernel* kGemmKernels[kGemmRows] = {kRowKernels<1>, kRowKernels<2>, kRowKernels<3>,
                                                       kRowKernels<4>, kRowKernels<5>, kRowKernels<6>};

// Every 6 rows of x against one panel of `cols` <= 64 columns, laid out as gemm_kernel reads it.
void gemm_panel(float* y, int ldy, const float* x, int ldx, int T, const float* w, size_t block_stride,
                size_t k_stride, int K, int cols, float alpha, bool accumulate) {
  const int blocks = (cols + 15) / 16;
  for (int t0 = 0; t0 < T; t0 += kGemmRows) {
    const int rows = std::min(kGemmRows, T - t0);
    kGemmKernels[rows - 1][blocks - 1](y + size_t(t0) * ldy, ldy, x + size_t(t0) * ldx, ldx, w, block_stride, k_stride,
                                       K, cols, alpha, accumulate);
  }
}

// Full-mask forms with a defined pass-through (a): GCC 12 warns that the plain forms' internal
// _mm512_undefined_ps() may be used uninitialized.
__m512 unpack_lo(__m512 a, __m512 b) { return _mm512_mask_unpacklo_ps(a, 0xffff, a, b); }
__m512 unpack_hi(__m512 a, __m512 b) { return _mm512_mask_unpackhi_ps(a, 0xffff, a, b); }
template <int kLanes>
__m512 lanes(__m512 a, __m512 b) { return _mm512_mask_shuffle_f32x4(a, 0xffff, a, b, kLanes); }

// r[i][j] -> r[j][i] for a 16 × 16 tile: pairs, then quads within each 128-bit lane, then lanes.
void transpose16(__m512 r[16]) {
  __m512 a[16], b[16];
  for (int i = 0; i < 16; i += 2) {  // lane L of a[i]: rows i, i+1 at columns 4L, 4L+1 (lo) or 4L+2, 4L+3 (hi)
    a[i] = unpack_lo(r[i], r[i + 1]);
    a[i + 1] = unpack_hi(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // lane L of b[i + c]: rows i..i+3 at column 4L + c
    b[i] = _mm512_shuffle_ps(a[i], a[i + 2], 0x44);
    b[i + 1] = _mm512_shuffle_ps(a[i], a[i + 2], 0xee);
    b[i + 2] = _mm512_shuffle_ps(a[i + 1], a[i + 3], 0x44);
    b[i + 3] = _mm512_shuffle_ps(a[i + 1], a[i + 3], 0xee);
  }
  for (int c = 0; c < 4; ++c) {  // column 4L + c: lane L of b[c], b[4 + c], b[8 + c], b[12 + c]
    const __m512 even0 = lanes<0x88>(b[c], b[4 + c]), odd0 = lanes<0xdd>(b[c], b[4 + c]);
    const __m512 even1 = lanes<0x88>(b[8 + c], b[12 + c]), odd1 = lanes<0xdd>(b[8 + c], b[12 + c]);
    r[c] = lanes<0x88>(even0, even1);
    r[4 + c] = lanes<0x88>(odd0, odd1);
    r[8 + c] = lanes<0xdd>(even0, even1);
    r[12 + c] = lanes<0xdd>(odd0, odd1);
  }
}

// block[k][j] = W[j][k] for the block's first n <= 16 rows of W (zero past them), k < K.
void pack_block(float* block, const float* w, int n, int K) {
  for (int k0 = 0; k0 < K; k0 += 16) {
    const int kn = std::min(16, K - k0);
    const __mmask16 m = __mmask16((1u << kn) - 1);
    __m512 r[16];
    for (int j = 0; j < 16; ++j) r[j] = j < n ? _mm512_maskz_loadu_ps(m, w + size_t(j) * K + k0) : _mm512_setzero_ps();
    transpose16(r);
    for (int k = 0; k < kn; ++k) _mm512_storeu_ps(block + size_t(k0 + k) * 16, r[k]);
  }
}

// W's rows are packed 64 at a time into a panel ([4][K][16], each block's columns side by side).
void gemm_nt(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int N, float alpha,
             bool accumulate) {
  constexpr int kPanel = 16 * kPanelBlocks;  // columns
  static thread_local std::vector<float> panel_storage;  // grows once, then reused
  panel_storage.resize(size_t(K) * kPanel);
  float* const panel = panel_storage.data();  // this thread's: thread_local names another inside loops
  for (int n0 = 0; n0 < N; n0 += kPanel) {
    const int cols = std::min(kPanel, N - n0);
    for (int b = 0; b * 16 < cols; ++b)
      pack_block(panel + size_t(b) * K * 16, w + size_t(n0 + 16 * b) * K, std::min(16, cols - 16 * b), K);
    gemm_panel(y + n0, ldy, x, ldx, T, panel, size_t(K) * 16, 16, K, cols, alpha, accumulate);
  }
}

// W's rows already hold 16 columns side by side: each panel is read where it is.
void gemm_nn(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int ldw, int N, bool accumulate) {
  for (int n0 = 0; n0 < N; n0 += 16 * kPanelBlocks)
    gemm_panel(y + n0, ldy, x, ldx, T, w + n0, 16, size_t(ldw), K, std::min(16 * kPanelBlocks, N - n0), 1.0f, accumulate);
}


// Panels [⌈cols/16⌉][K][16] as they are, 64 columns a call.
void gemm_packed(float* y, int ldy, const float* x, int ldx, int T, const float* panels, int K, int cols,
                 bool accumulate) {
  for (int n0 = 0; n0 < cols; n0 += 16 * kPanelBlocks)
    gemm_panel(y + n0, ldy, x, ldx, T, panels + size_t(n0) * K, size_t(K) * 16, 16, K,
               std::min(16 * kPanelBlocks, cols - n0), 1.0f, accumulate);
}

#include "kernels/lanes_avx512.inc"
#include "kernels/ops_f32_simd.inc"

}  // namespace avx512
}  // namespace

#pragma GCC pop_options

F32Kernels f32_avx512_kernels() {
  return {avx512::gemv, avx512::add_weighted_rows, avx512::gemm_nt, avx512::gemm_nn, avx512::gemm_packed};
}

}  // namespace pert

#endif
