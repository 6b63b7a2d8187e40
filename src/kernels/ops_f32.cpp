// F32 matrix products: y[T][N] (+)= x[T][K] · W[N][K]ᵀ with W row-major, as safetensors holds it.
// Decoding (T = 1) streams W once (gemv). Prefill runs the columns in one slice per thread, each
// slice one gemm_nt. Three paths (kernels.hpp), chosen at run time:
//   avx512  pert's own GEMM and a 16-lane gemv (src/kernels/ops_f32_avx512.cpp);
//   avx2    OpenBLAS's sgemm and an 8-lane gemv (here, in a target region), and a 6 × 16 GEMM
//           on packed panels for BF16 weights widened to F32 (gemm_packed);
//   plain   OpenBLAS's sgemm and loops in C++.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/dispatch.hpp"
#include "kernels/lane_sums.hpp"
#include "kernels/ops.hpp"
#include "kernels/ops_f32.hpp"
#include "kernels/parallel.hpp"
#include "pert/error.hpp"
#include "pert/kernels.hpp"

namespace pert {

namespace {

// ---- plain ----

void gemv_plain(float* y, const float* w, const float* x, int n0, int n1, int K, bool accumulate, Prefetch) {
  for (int n = n0; n < n1; ++n) {
    const float* row = w + size_t(n) * K;
    float dot = 0.0f;
    for (int k = 0; k < K; ++k) dot += row[k] * x[k];
    y[n] = accumulate ? y[n] + dot : dot;
  }
}

void add_weighted_plain(float* acc, const float* p, const float* rows, int n, int K) {
  for (int j = 0; j < n; ++j) {
    const float* row = rows + size_t(j) * K;
#pragma omp simd
    for (int k = 0; k < K; ++k) acc[k] += p[j] * row[k];
  }
}

void sgemm_nt(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int N, float alpha,
              bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, alpha, x, ldx, w, K, accumulate ? 1.0f : 0.0f, y, ldy);
}

void sgemm_nn(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int ldw, int N, bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, N, K, 1.0f, x, ldx, w, ldw, accumulate ? 1.0f : 0.0f, y, ldy);
}

// ---- avx2 ----

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#include "kernels/lanes_avx2.inc"
#include "kernels/ops_f32_simd.inc"

// y[r][j] (+)= Σ_k x[r][k]·w[k][j] for R rows of x and one block of 16 columns (w [K][16]), the
// first `valid` columns stored: 12 accumulators, two columns' vectors and x broadcast, 15 of the
// 16 registers.
template <int R>
void gemm_block(float* y, int ldy, const float* x, int ldx, const float* w, int K, int valid, bool accumulate) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int k = 0; k < K; ++k) {
    const __m256 w0 = _mm256_loadu_ps(w + 16 * size_t(k)), w1 = _mm256_loadu_ps(w + 16 * size_t(k) + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + size_t(r) * ldx + k);
      acc[r][0] = _mm256_fmadd_ps(xv, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(xv, w1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float row[16];
    _mm256_storeu_ps(row, acc[r][0]);
    _mm256_storeu_ps(row + 8, acc[r][1]);
    float* out = y + size_t(r) * ldy;
    for (int j = 0; j < valid; ++j) out[j] = accumulate ? out[j] + row[j] : row[j];
  }
}

// ops_f32.hpp's gemm_packed: each block of 16 columns against every 6 rows of x in turn, the block
// (K × 64 bytes) read from L2 by each.
void gemm_packed(float* y, int ldy, const float* x, int ldx, int T, const float* panels, int K, int cols,
                 bool accumulate) {
  using Block = void (*)(float*, int, const float*, int, const float*, int, int, bool);
  static constexpr Block kBlocks[6] = {gemm_block<1>, gemm_block<2>, gemm_block<3>, gemm_block<4>, gemm_block<5>, gemm_block<6>};
  for (int b = 0; 16 * b < cols; ++b)
    for (int t0 = 0; t0 < T; t0 += 6)
      kBlocks[std::min(6, T - t0) - 1](y + size_t(t0) * ldy + 16 * b, ldy, x + size_t(t0) * ldx, ldx,
                                       panels + size_t(b) * K * 16, K, std::min(16, cols - 16 * b), accumulate);
}
}  // namespace avx2
#pragma GCC pop_options
#endif

KernelChoice<F32Kernels>& choice() {
  static KernelChoice<F32Kernels> c("f32", {
#if defined(__x86_64__)
                                               {"avx512", f32_avx512_kernels()},
                                               {"avx2", {avx2::gemv, avx2::add_weighted_rows, sgemm_nt, sgemm_nn, avx2::gemm_packed}},
#endif
                                               {"plain", {gemv_plain, add_weighted_plain, sgemm_nt, sgemm_nn, nullptr}},
                                           });
  return c;
}

// The prefetch hint: PERT_PREFETCH, else stream on AMD CPUs and T0 elsewhere. T0 took an Intel
// Xeon's stories110M F32 decode from 22 to 56 t/s (issue 53); on an AMD EPYC Zen 4 stream read
// 22.6 GB/s on one core where T0 read 14.0 (docs/speed.md); Intel unmeasured with stream.
constexpr const char* kPrefetchNames[] = {"none", "t0", "nta", "stream"};  // by Prefetch
constexpr int kPrefetches = sizeof kPrefetchNames / sizeof kPrefetchNames[0];
Prefetch parse_prefetch(const std::string& hint) {
  for (int i = 0; i < kPrefetches; ++i)
    if (hint == kPrefetchNames[i]) return Prefetch(i);
  throw std::invalid_argument("prefetch hint '" + hint + "' is not one of nta, t0, none, stream");
}
Prefetch default_prefetch() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_is("amd")) return Prefetch::Stream;
#endif
  return Prefetch::T0;
}
Prefetch& prefetch() {
  static Prefetch p = [] {
    const char* env = std::getenv("PERT_PREFETCH");
    if (!env || !*env) return default_prefetch();
    try {
      return parse_prefetch(env);
    } catch (const std::invalid_argument& e) {
      throw Error(std::string("PERT_PREFETCH: ") + e.what());
    }
  }();
  return p;
}

}  // namespace

const F32Kernels& f32_kernels_table() { return choice().table(); }
std::vector<std::string> f32_kernels() { return choice().names(); }
const std::string& f32_kernel() { return choice().name(); }
void select_f32_kernel(const std::string& name) { choice().select(name); }
const std::string& f32_prefetch() {
  static const std::vector<std::string> names(std::begin(kPrefetchNames), std::end(kPrefetchNames));
  return names[size_t(prefetch())];
}
void select_f32_prefetch(const std::string& hint) { prefetch() = parse_prefetch(hint); }

void gemm_nt(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int N, float alpha,
             bool accumulate) {
  f32_kernels_table().gemm_nt(y, ldy, x, ldx, T, K, w, N, alpha, accumulate);
}

void gemm_nn(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int ldw, int N, bool accumulate) {
  f32_kernels_table().gemm_nn(y, ldy, x, ldx, T, K, w, ldw, N, accumulate);
}

void dot_rows(float* y, const float* rows, const float* x, int n, int K) {
  f32_kernels_table().gemv(y, rows, x, 0, n, K, false, Prefetch::T0);  // (the rows two steps on)
}

void add_weighted_rows(float* acc, const float* p, const float* rows, int n, int K) {
  f32_kernels_table().add_weighted_rows(acc, p, rows, n, K);
}

namespace {

// Decoding's products of one x in one run per thread (rows at multiples of 4), so each thread
// streams its part of every matrix once and the threads meet once per call, not once per
// product. Small products run on the calling thread.
void gemv_products(const float* x, int K, const Projection* products, size_t count) {
  const F32Kernels& kernels = f32_kernels_table();
  const Prefetch hint = prefetch();
  auto run = [&](int threads, int me) {
    thread_share(products, count, 4, threads, me, [&](const Projection& p, int n0, int n1) {
      kernels.gemv(p.y, p.w->f32, x, n0, n1, K, p.accumulate, hint);
    });
  };
  if (size_t(total_rows(products, count)) * size_t(K) > 32768) on_each_thread(run);
  else run(1, 0);
}

}  // namespace

void matmul(float* y, const float* x, const float* w, int T, int K, int N, bool accumulate) {
  const Weight weight = Weight::of_f32(w);
  const Projection product{y, &weight, N, accumulate};
  matmul_f32(x, T, K, &product, 1);
}

// The products' columns laid end to end and cut in one slice per thread, at multiples of 16, so
// no thread waits for another until the region ends (OpenBLAS's own threading splits one GEMM
// and hands packed panels between threads, waiting in sched_yield; BLAS called inside a parallel
// region runs single-threaded).
void matmul_f32(const float* x, int T, int K, const Projection* products, size_t count) {
  if (T == 1) return gemv_products(x, K, products, count);
  const F32Kernels& kernels = f32_kernels_table();
  on_each_thread([&](int threads, int me) {
    thread_share(products, count, 16, threads, me, [&](const Projection& p, int n0, int n1) {
      kernels.gemm_nt(p.y + n0, p.N, x, K, T, K, p.w->f32 + size_t(n0) * K, n1 - n0, 1.0f, p.accumulate);
    });
  });
}

}  // namespace pert
