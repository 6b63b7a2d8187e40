// BF16 matrix products on the packed layout of ops.hpp. Four paths (kernels.hpp), chosen at run
// time:
//   avx512bf16  one vdpbf16ps multiplies 16 rows' column pairs by one pair of x broadcast to every
//               lane, so a 16-row block accumulates in one register; the GEMM kernel holds R rows
//               of x × P blocks of 16 outputs in R·P registers, prefill and decoding alike (so
//               prefill's rows are decoding's bits); prefill rounds x 16 values a step, once for
//               all the products of one x, in one parallel region (matmul_dpbf16);
//   avx512      decoding as avx2; prefill widens 64 rows at a time into the F32 panels of pert's
//               own AVX-512 GEMM (src/kernels/ops_f32_avx512.cpp) and multiplies them there;
//   avx2        decoding widens each pair word in registers (a BF16 is the top half of an F32: a
//               shift and a mask) and multiplies with FMA, streaming half F32's bytes; prefill
//               widens 64 rows at a time (the same shift and mask, 16 values a step) into the
//               panels of pert's AVX2 GEMM (src/kernels/ops_f32.cpp);
//   plain       the same arithmetic in C++, prefill widening 256 rows at a time for OpenBLAS's sgemm.
// Prefill rounds x to BF16 first, so the widened products are exact in F32 as vdpbf16ps's are.

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/amx_gemm.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/ops.hpp"
#include "kernels/ops_f32.hpp"
#include "kernels/parallel.hpp"
#include "pert/kernels.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
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

// Every kernel: out[r][16·p + j] (+)= Σ_pairs x[r] pair · W block p pair, for R rows and P
// blocks; `valid_last` outputs of the last block are stored (the rest is padding).
using Kernel = void (*)(float* y, int ldy, const uint32_t* xp, int ldx, const uint16_t* w, size_t block_stride,
                        int pairs, int valid_last, bool accumulate);
// Widening: a 16-row block's pairs [pairs][16][2] to F32 out[k][j] = W[j][k], out's rows
// k_stride apart, k < K.
using Widen = void (*)(float* out, size_t k_stride, const uint16_t* block, int pairs, int K);

template <int R, int P>
void kernel_plain(float* y, int ldy, const uint32_t* xp, int ldx, const uint16_t* w, size_t block_stride, int pairs,
                  int valid_last, bool accumulate) {
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
}

void widen_plain(float* out, size_t k_stride, const uint16_t* block, int pairs, int K) {
  for (int kp = 0; kp < pairs; ++kp, block += 32)
    for (int half = 0; half < 2 && 2 * kp + half < K; ++half)
      for (int j = 0; j < 16; ++j) out[size_t(2 * kp + half) * k_stride + j] = bf16_to_f32_value(block[2 * j + half]);
}

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

template <int R, int P>
void kernel_avx2(float* y, int ldy, const uint32_t* xp, int ldx, const uint16_t* w, size_t block_stride, int pairs,
                 int valid_last, bool accumulate) {
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
}

// 16 values a step: a pair word's low halves are the block's k, its high halves k + 1.
void widen_avx2(float* out, size_t k_stride, const uint16_t* block, int pairs, int K) {
  const __m256i high = _mm256_set1_epi32(int(0xffff0000u));
  for (int kp = 0; kp < pairs; ++kp, block += 32) {
    float* at = out + size_t(2 * kp) * k_stride;
    for (int half = 0; half < 2; ++half) {  // rows 8·half ... 8·half + 7
      const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 16 * half));
      _mm256_storeu_ps(at + 8 * half, _mm256_castsi256_ps(_mm256_slli_epi32(words, 16)));
      if (2 * kp + 1 < K) _mm256_storeu_ps(at + k_stride + 8 * half, _mm256_castsi256_ps(_mm256_and_si256(words, high)));
    }
  }
}

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")

template <int R, int P>
void kernel_avx512bf16(float* y, int ldy, const uint32_t* xp, int ldx, const uint16_t* w, size_t block_stride,
                       int pairs, int valid_last, bool accumulate) {
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
}

// x's rows as f32_to_bf16 rounds them (nearest even, a NaN kept and made quiet), 16 values a
// step, into pairs words [T][ldx] (a zero pads odd K). Full-mask forms of the shift and the
// narrowing: GCC 12 warns that the plain forms' undefined pass-through may be used uninitialized.
void round_rows_avx512(uint32_t* xp, int ldx, const float* x, int T, int K) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  const __mmask16 all = 0xffff;
  for (int t = 0; t < T; ++t) {
    uint16_t* out = reinterpret_cast<uint16_t*>(xp + size_t(t) * ldx);
    const float* row = x + size_t(t) * K;
    for (int k = 0; k < K; k += 16) {
      const __mmask16 m = K - k >= 16 ? all : __mmask16((1u << (K - k)) - 1);
      const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, row + k));
      const __m512i high = _mm512_maskz_srli_epi32(all, u, 16);
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
      const __m512i lsb = _mm512_and_si512(high, one);
      const __m512i rounded = _mm512_maskz_srli_epi32(all, _mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
      const __m512i r = _mm512_mask_or_epi32(rounded, nan, high, quiet);
      _mm256_mask_storeu_epi16(out + k, m, _mm512_maskz_cvtepi32_epi16(all, r));
    }
    if (K % 2) out[K] = 0;
  }
}

#pragma GCC pop_options
#endif

template <int R, int P> struct Plain { static constexpr Kernel kernel = kernel_plain<R, P>; };
#if defined(__x86_64__)
template <int R, int P> struct Avx2 { static constexpr Kernel kernel = kernel_avx2<R, P>; };
template <int R, int P> struct Avx512Bf16 { static constexpr Kernel kernel = kernel_avx512bf16<R, P>; };
#endif

// The kernel for r rows of x and p blocks, of one path.
using Picker = Kernel (*)(int r, int p);
template <template <int, int> class F, int R>
Kernel pick_blocks(int p) {
  switch (p) {
    case 1: return F<R, 1>::kernel;
    case 2: return F<R, 2>::kernel;
    case 3: return F<R, 3>::kernel;
    default: return F<R, 4>::kernel;
  }
}
template <template <int, int> class F>
Kernel pick(int r, int p) {
  switch (r) {
    case 1: return pick_blocks<F, 1>(p);
    case 2: return pick_blocks<F, 2>(p);
    case 3: return pick_blocks<F, 3>(p);
    case 4: return pick_blocks<F, 4>(p);
    case 5: return pick_blocks<F, 5>(p);
    default: return pick_blocks<F, 6>(p);
  }
}

// A path: its kernels, and for prefill without vdpbf16ps the widening (null: the kernels do prefill too).
struct Bf16Kernels {
  Picker pick;
  Widen widen;
};

KernelChoice<Bf16Kernels>& choice() {
  static KernelChoice<Bf16Kernels> c("bf16", {
#if defined(__x86_64__)
                                                 {"amx", {pick<Avx512Bf16>, nullptr}},  // prefill: amx_gemm.cpp
                                                 {"avx512bf16", {pick<Avx512Bf16>, nullptr}},
                                                 {"avx512", {pick<Avx2>, widen_avx2}},
                                                 {"avx2", {pick<Avx2>, widen_avx2}},
#endif
                                                 {"plain", {pick<Plain>, widen_plain}},
                                             });
  return c;
}

// Prefill without vdpbf16ps: y (+)= round_bf16(x) · Wᵀ for each product, W widened to F32 a
// chunk at a time. Where the F32 path has its own GEMM (avx512, avx2), the columns are cut in one slice
// per thread (multiples of 16), each slice widened 64 rows at a time into this thread's panels
// [4][K][16] and multiplied there, so no thread waits for another. Else each product's 256-row
// chunks are widened by all threads into [K][256] and handed to OpenBLAS's sgemm, which threads
// itself. (Two threads of one region calling Debian's OpenBLAS 0.3.21 sgemm on such NN operands
// at once left stories260K's BF16 logits off by up to 27 at -t 2, though each product checked
// right after its call was exact; the same calls one at a time were exact.)
void matmul_widened(const float* x, int T, int K, const Projection* products, size_t count, Widen widen) {
  static thread_local std::vector<float> xr;  // x rounded to BF16: [T][K], read by every thread
  xr.resize(size_t(T) * K);
  for (size_t i = 0; i < xr.size(); ++i) xr[i] = bf16_to_f32_value(f32_to_bf16(x[i]));
  const float* const xb = xr.data();
  const int pairs = (K + 1) / 2;
  auto block = [&](const Projection& p, int b) { return p.w->bf16 + size_t(b) * size_t(pairs) * 32; };  // 16 rows
  const F32Kernels& f32 = f32_kernels_table();
  if (f32.gemm_packed) {
    constexpr int kChunk = 64;
    return on_each_thread([&](int threads, int me) {
      static thread_local std::vector<float> buffer;  // grows once, then reused
      buffer.resize(size_t(K) * kChunk);
      float* const panels = buffer.data();  // this thread's, named inside the loop
      thread_share(products, count, 16, threads, me, [&](const Projection& p, int n0, int n1) {
        for (int c0 = n0; c0 < n1; c0 += kChunk) {
          const int cols = std::min(kChunk, n1 - c0);
          for (int b = 0; b * 16 < cols; ++b)
            widen(panels + size_t(b) * K * 16, 16, block(p, c0 / 16 + b), pairs, K);
          f32.gemm_packed(p.y + c0, p.N, xb, K, T, panels, K, cols, p.accumulate);
        }
      });
    });
  }
  constexpr int kChunk = 256;
  static thread_local std::vector<float> buffer;  // [K][256], grows once, then reused
  buffer.resize(size_t(K) * kChunk);
  float* const wf = buffer.data();  // this thread's: thread_local names another inside the loop
  for (size_t i = 0; i < count; ++i) {
    const Projection& p = products[i];
    for (int c0 = 0; c0 < p.N; c0 += kChunk) {
      const int cols = std::min(kChunk, p.N - c0);
      parallel_for_if(size_t(cols) * K > 32768, (cols + 15) / 16, [&](int b) {
        widen(wf + 16 * b, kChunk, block(p, c0 / 16 + b), pairs, K);
      });
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, cols, K, 1.0f, xb, K, wf, kChunk,
                  p.accumulate ? 1.0f : 0.0f, p.y + c0, p.N);
    }
  }
}

#if defined(__x86_64__)
// Prefill on vdpbf16ps: x rounded once for all the products, then each thread its slice of their
// columns (thread_share), cut into panels of up to kBlocks blocks as even as the slice allows (9
// blocks are 3 panels of 3, not 4 + 4 + 1: a 1-block panel loads a row of x for each 16 products);
// every 6 rows of x pass a panel's weights, which stay in L2. Each output is decoding's sum.
void matmul_dpbf16(const float* x, int T, int K, const Projection* products, size_t count) {
  const int pairs = (K + 1) / 2;
  static thread_local std::vector<uint32_t> xb;  // x rounded to BF16, as pairs: [T][pairs]
  xb.resize(size_t(T) * pairs);
  round_rows_avx512(xb.data(), pairs, x, T, K);
  const uint32_t* const xp = xb.data();  // this thread's: thread_local names another inside the region
  const size_t block_stride = size_t(pairs) * 32;
  size_t work = 0;
  for (size_t i = 0; i < count; ++i) work += size_t(T) * size_t(products[i].N) * size_t(K);
  auto body = [&](int threads, int me) {
    thread_share(products, count, 16, threads, me, [&](const Projection& p, int n0, int n1) {
      const int blocks = (n1 - n0 + 15) / 16, panels = (blocks + kBlocks - 1) / kBlocks;
      for (int i = 0, b0 = n0 / 16; i < panels; ++i) {
        const int nb = blocks / panels + (i < blocks % panels ? 1 : 0);
        const int valid_last = std::min(16, p.N - (b0 + nb - 1) * 16);
        for (int t0 = 0; t0 < T; t0 += kRows)
          pick<Avx512Bf16>(std::min(kRows, T - t0), nb)(p.y + size_t(t0) * p.N + size_t(b0) * 16, p.N,
                                                        xp + size_t(t0) * pairs, pairs,
                                                        p.w->bf16 + size_t(b0) * block_stride, block_stride, pairs,
                                                        valid_last, p.accumulate);
        b0 += nb;
      }
    });
  };
  if (work > 32768)
    on_each_thread(body);
  else
    body(1, 0);
}
#endif

void matmul_bf16(float* y, const float* x, const uint16_t* packed, int T, int K, int N, bool accumulate) {
  if (T > 1 && choice().name() == "amx") return amx_matmul_bf16(TileImpl::instructions, y, x, packed, T, K, N, accumulate);
  const Bf16Kernels& path = choice().table();
  if (T > 1) {
    const Weight w = Weight::of_bf16(packed);
    const Projection product{y, &w, N, accumulate};
    if (path.widen) return matmul_widened(x, T, K, &product, 1, path.widen);
#if defined(__x86_64__)
    return matmul_dpbf16(x, T, K, &product, 1);
#endif
  }
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
  const Picker pick_kernel = path.pick;
  parallel_for_if(size_t(T) * N * K > 32768, n_groups, [&](int g) {
    const int b0 = g * group, nb = std::min(group, n_blocks - b0);
    const int valid_last = std::min(16, N - (b0 + nb - 1) * 16);
    for (int t0 = 0; t0 < T; t0 += kRows) {
      const int rows = std::min(kRows, T - t0);
      pick_kernel(rows, nb)(y + size_t(t0) * N + size_t(b0) * 16, N, xp + size_t(t0) * pairs, pairs,
                            packed + size_t(b0) * block_stride, block_stride, pairs, valid_last, accumulate);
    }
  });
}

}  // namespace

std::vector<std::string> bf16_kernels() { return choice().names(); }
const std::string& bf16_kernel() { return choice().name(); }
void select_bf16_kernel(const std::string& name) { choice().select(name); }

const char* layout_name(Weight::Layout layout) {
  switch (layout) {
    case Weight::F32: return "f32";
    case Weight::BF16: return "bf16";
    case Weight::Q8: return "q8";
    case Weight::Blocks: return "blocks";
    case Weight::None: break;
  }
  return "none";
}

void matmul_shared(const float* x, int T, int K, std::initializer_list<Projection> products) {
  auto all = [&](Weight::Layout layout) {
    return std::all_of(products.begin(), products.end(), [&](const Projection& p) { return p.w->layout == layout; });
  };
  if (all(Weight::Q8)) return matmul_q8(x, T, K, products.begin(), products.size());
  if (all(Weight::Blocks) && products.size() <= 4) {  // x quantized once for all of them
    BlockProduct blocks[4];
    size_t n = 0;
    for (const Projection& p : products) blocks[n++] = {p.y, &p.w->blocks, p.N, p.accumulate};
    return matmul_blocks(x, T, K, blocks, n);
  }
  if (all(Weight::F32)) return matmul_f32(x, T, K, products.begin(), products.size());
  const Bf16Kernels& path = choice().table();
  const bool all_bf16 = all(Weight::BF16);
  if (all_bf16 && T > 1 && path.widen) return matmul_widened(x, T, K, products.begin(), products.size(), path.widen);
#if defined(__x86_64__)
  // vdpbf16ps: x rounded once for all of them (amx: each product its tiles, through matmul_bf16)
  if (all_bf16 && T > 1 && choice().name() == "avx512bf16") return matmul_dpbf16(x, T, K, products.begin(), products.size());
#endif
  for (const Projection& p : products) matmul(p.y, x, *p.w, T, K, p.N, p.accumulate);
}

size_t weight_bytes(const Weight& w, int N, int K) {
  switch (w.layout) {
    case Weight::F32: return size_t(N) * size_t(K) * sizeof(float);
    case Weight::Q8: return q8_packed_size(N, K) + q8_scales_size(N, K) * sizeof(uint16_t);
    case Weight::Blocks: return size_t(N) * w.blocks.row_stride;
    case Weight::BF16: return bf16_packed_size(N, K) * sizeof(uint16_t);
    case Weight::None: break;
  }
  return 0;
}

void matmul(float* y, const float* x, const Weight& w, int T, int K, int N, bool accumulate) {
  switch (w.layout) {
    case Weight::F32: return matmul(y, x, w.f32, T, K, N, accumulate);
    case Weight::Q8: return matmul_q8(y, x, w, T, K, N, accumulate);
    case Weight::Blocks: return matmul_blocks(y, x, w.blocks, T, K, N, accumulate);
    case Weight::BF16: return matmul_bf16(y, x, w.bf16, T, K, N, accumulate);
    case Weight::None: break;
  }
  throw std::invalid_argument("matmul: a weight with no data");
}

}  // namespace pert
