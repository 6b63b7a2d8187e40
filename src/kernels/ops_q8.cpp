// 8-bit matrix products on the packed layout of ops.hpp (blocks of 32 int8 weights with one
// F16 scale each, as llama.cpp's Q8_0). x is quantized the same way, per row and block, so one
// block's dot product is exact in int32 and costs one float multiply-add per output:
//   y[t][n] = Σ_b  dx[t][b] · dw[n][b] · Σ_{k in b} qx[t][k] · qw[n][k].
// Three kernels, picked at run time by what the CPU has (or by select_q8_kernel, for tests):
//   avx512vnni  vpdpbusd multiplies 16 rows' quads (bytes qw + 128, unsigned) by one quad of qx
//               broadcast to every lane; the +128 comes back out as 128 · Σ qx, one integer per
//               row of x and block;
//   avx2        vpmaddubsw on |qx| and qw with qx's sign, 8 rows a register;
//   plain       the same integers in C++ (the sanitizer build runs it; so do the unit tests).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/amx_gemm.hpp"
#include "kernels/fp16.hpp"
#include "kernels/ops.hpp"
#include "kernels/parallel.hpp"
#include "pert/kernels.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pert {

size_t q8_packed_size(int N, int K) { return size_t((N + 15) / 16) * size_t((K + 31) / 32) * 512; }
size_t q8_scales_size(int N, int K) { return size_t((N + 15) / 16) * size_t((K + 31) / 32) * 16; }

float quantize_q8_block(const float* v, int n, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = i < n ? int8_t(std::lrintf(v[i] * inv)) : int8_t(0);
  return d;
}

namespace {

// The packed layout filled block by block: block(n, b, q) writes row n's block b of 32 int8 to q
// and returns its F16 scale; padding rows and columns are q = 0, d = 0.
template <class Block>
void pack_q8(uint8_t* packed, uint16_t* scales, int N, int K, Block block) {
  const int blocks = (K + 31) / 32;
  std::fill(packed, packed + q8_packed_size(N, K), uint8_t(128));  // padding: q = 0
  std::fill(scales, scales + q8_scales_size(N, K), uint16_t(0));
  int8_t q[32];
  for (int n = 0; n < N; ++n)
    for (int b = 0; b < blocks; ++b) {
      const size_t at = size_t(n / 16) * blocks + size_t(b);
      scales[at * 16 + size_t(n % 16)] = block(n, b, q);
      for (int k = 0; k < 32; ++k)
        packed[at * 512 + size_t(k / 4) * 64 + size_t(n % 16) * 4 + size_t(k % 4)] = uint8_t(q[k] + 128);
    }
}

}  // namespace

void quantize_q8(uint8_t* packed, uint16_t* scales, const float* rows, int N, int K) {
  pack_q8(packed, scales, N, K, [&](int n, int b, int8_t* q) {
    const int k0 = b * 32;
    return f32_to_f16(quantize_q8_block(rows + size_t(n) * K + k0, std::min(32, K - k0), q));
  });
}

void repack_q8_0(uint8_t* packed, uint16_t* scales, const uint8_t* rows, size_t row_stride, int N, int K) {
  pack_q8(packed, scales, N, K, [&](int n, int b, int8_t* q) {
    const uint8_t* block = rows + size_t(n) * row_stride + size_t(b) * 34;  // GGML's block_q8_0: F16 d, 32 int8
    std::memcpy(q, block + 2, 32);
    uint16_t d;
    std::memcpy(&d, block, 2);
    return d;
  });
}

float q8_value_at(const uint8_t* packed, const uint16_t* scales, int K, int n, int k) {
  const size_t at = size_t(n / 16) * size_t((K + 31) / 32) + size_t(k / 32);
  const int q = int(packed[at * 512 + size_t(k % 32 / 4) * 64 + size_t(n % 16) * 4 + size_t(k % 4)]) - 128;
  return f16_to_f32(scales[at * 16 + size_t(n % 16)]) * float(q);
}

namespace {

// x quantized: per row, `blocks` blocks of 32 int8 (zero-padded), each block's scale, and
// 128 · Σ q (what the VNNI kernel's unsigned weights add).
struct QuantizedRows {
  std::vector<int8_t> q;        // [T][blocks][32]
  std::vector<float> d;         // [T][blocks]
  std::vector<int32_t> offset;  // [T][blocks]
  void fill(const float* x, int T, int K) {
    const int blocks = (K + 31) / 32;
    q.resize(size_t(T) * blocks * 32);
    d.resize(size_t(T) * blocks);
    offset.resize(size_t(T) * blocks);
    int8_t* const qs = q.data();  // the caller's buffers: thread_local names another inside the loop
    float* const ds = d.data();
    int32_t* const offsets = offset.data();
    parallel_for_if(size_t(T) * K > 65536, T, [&](int t) {
      for (int b = 0; b < blocks; ++b) {
        const size_t at = size_t(t) * blocks + size_t(b);
        int8_t* qb = qs + at * 32;
        ds[at] = quantize_q8_block(x + size_t(t) * K + size_t(b) * 32, std::min(32, K - b * 32), qb);
        int32_t sum = 0;
        for (int i = 0; i < 32; ++i) sum += qb[i];
        offsets[at] = 128 * sum;
      }
    });
  }
};

// What every kernel is given: R rows of quantized x from t0, P groups of 16 weight rows from
// group g0, `valid_last` real rows in the last group; y at row t0, column 16·g0.
struct Tile {
  float* y;
  int ldy;
  const QuantizedRows* x;
  int t0;
  const uint8_t* packed;    // at group g0
  const uint16_t* scales;   // at group g0
  int blocks;               // per row: ⌈K/32⌉
  int valid_last;
  bool accumulate;
};

// out (+)= acc for R rows and P groups of 16 outputs, the last group's padding not stored.
template <int R, int P>
void store(const Tile& t, const float (&acc)[R][P][16]) {
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) {
      float* out = t.y + size_t(r) * t.ldy + 16 * p;
      const int n = p == P - 1 ? t.valid_last : 16;
      for (int j = 0; j < n; ++j) out[j] = t.accumulate ? out[j] + acc[r][p][j] : acc[r][p][j];
    }
}

template <int R, int P>
void kernel_plain(const Tile& t) {
  float acc[R][P][16] = {};
  for (int b = 0; b < t.blocks; ++b)
    for (int p = 0; p < P; ++p) {
      const size_t at = size_t(p) * t.blocks + size_t(b);
      const uint8_t* w = t.packed + at * 512;  // [8 quads][16 rows][4]
      float dw[16];
      for (int j = 0; j < 16; ++j) dw[j] = f16_to_f32(t.scales[at * 16 + size_t(j)]);
      for (int r = 0; r < R; ++r) {
        const size_t xb = size_t(t.t0 + r) * t.blocks + size_t(b);
        const int8_t* qx = t.x->q.data() + xb * 32;
        int32_t dot[16] = {};  // Σ (qw + 128)·qx, lane by lane as vpdpbusd sums it
        for (int quad = 0; quad < 8; ++quad)
          for (int j = 0; j < 16; ++j)
            for (int i = 0; i < 4; ++i) dot[j] += int32_t(w[quad * 64 + j * 4 + i]) * qx[quad * 4 + i];
        for (int j = 0; j < 16; ++j) acc[r][p][j] += float(dot[j] - t.x->offset[xb]) * (dw[j] * t.x->d[xb]);
      }
    }
  store<R, P>(t, acc);
}

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni,f16c,fma")
template <int R, int P>
void kernel_avx512vnni(const Tile& t) {
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  const size_t group_stride = size_t(t.blocks) * 512;
  for (int b = 0; b < t.blocks; ++b) {
    __m512i dot[R][P];  // from −128·Σ qx, so the unsigned weights' +128 cancels as it sums
    for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(-t.x->offset[size_t(t.t0 + r) * t.blocks + size_t(b)]);
      for (int p = 0; p < P; ++p) dot[r][p] = start;
    }
    const uint8_t* w = t.packed + size_t(b) * 512;
    for (int quad = 0; quad < 8; ++quad) {
      __m512i wv[P];
      for (int p = 0; p < P; ++p) {
        const uint8_t* at = w + p * group_stride + quad * 64;
        _mm_prefetch(reinterpret_cast<const char*>(at + 1024), _MM_HINT_T0);  // two blocks on
        wv[p] = _mm512_loadu_si512(at);
      }
      for (int r = 0; r < R; ++r) {
        int32_t quad_bits;
        std::memcpy(&quad_bits, t.x->q.data() + (size_t(t.t0 + r) * t.blocks + size_t(b)) * 32 + quad * 4, 4);
        const __m512i xv = _mm512_set1_epi32(quad_bits);
        for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], xv);
      }
    }
    __m512 dw[P];
    for (int p = 0; p < P; ++p)
      dw[p] = _mm512_maskz_cvtph_ps(  // maskz: the plain form trips a false GCC 12 warning
          0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.scales + (size_t(p) * t.blocks + size_t(b)) * 16)));
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(t.x->d[size_t(t.t0 + r) * t.blocks + size_t(b)]);
      for (int p = 0; p < P; ++p)
        acc[r][p] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, dot[r][p]), _mm512_mul_ps(dw[p], dx), acc[r][p]);
    }
  }
  float out[R][P][16];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(out[r][p], acc[r][p]);
  store<R, P>(t, out);
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,f16c,fma")
// Per group two registers of 8 rows; maddubs's pair sums stay within int16 since |q| <= 127.
template <int R, int P>
void kernel_avx2(const Tile& t) {
  __m256 acc[R][2 * P];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2 * P; ++h) acc[r][h] = _mm256_setzero_ps();
  const size_t group_stride = size_t(t.blocks) * 512;
  const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8(char(0x80));
  for (int b = 0; b < t.blocks; ++b) {
    __m256i dot[R][2 * P];
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2 * P; ++h) dot[r][h] = _mm256_setzero_si256();
    const uint8_t* w = t.packed + size_t(b) * 512;
    for (int quad = 0; quad < 8; ++quad) {
      __m256i wv[2 * P];  // signed weights
      for (int h = 0; h < 2 * P; ++h)
        wv[h] = _mm256_xor_si256(bias, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                           w + (h / 2) * group_stride + quad * 64 + (h % 2) * 32)));
      for (int r = 0; r < R; ++r) {
        int32_t quad_bits;
        std::memcpy(&quad_bits, t.x->q.data() + (size_t(t.t0 + r) * t.blocks + size_t(b)) * 32 + quad * 4, 4);
        const __m256i xv = _mm256_set1_epi32(quad_bits), ax = _mm256_abs_epi8(xv);
        for (int h = 0; h < 2 * P; ++h) {
          const __m256i pairs = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[h], xv));
          dot[r][h] = _mm256_add_epi32(dot[r][h], _mm256_madd_epi16(pairs, ones));
        }
      }
    }
    __m256 dw[2 * P];
    for (int h = 0; h < 2 * P; ++h)
      dw[h] = _mm256_cvtph_ps(_mm_loadu_si128(
          reinterpret_cast<const __m128i*>(t.scales + (size_t(h / 2) * t.blocks + size_t(b)) * 16 + (h % 2) * 8)));
    for (int r = 0; r < R; ++r) {
      const __m256 dx = _mm256_set1_ps(t.x->d[size_t(t.t0 + r) * t.blocks + size_t(b)]);
      for (int h = 0; h < 2 * P; ++h)
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][h]), _mm256_mul_ps(dw[h], dx), acc[r][h]);
    }
  }
  float out[R][P][16];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2 * P; ++h) _mm256_storeu_ps(out[r][h / 2] + (h % 2) * 8, acc[r][h]);
  store<R, P>(t, out);
}
#pragma GCC pop_options
#endif

using Kernel = void (*)(const Tile&);
constexpr int kRows = 4;      // rows of x per kernel call
constexpr int kGroups = 2;    // 16-row weight groups per call with several rows of x
constexpr int kGroupsGemv = 4;  // ... with one row (decoding): more independent sums
constexpr int kChunk = 64;    // rows of x per work item (a multiple of kRows)
constexpr size_t kMaxProducts = 4;  // products of one x in one call (q, k, v)

// The kernel for R rows and P groups from one of the three families.
template <template <int, int> class Family>
Kernel pick(int r, int p) {
  static const Kernel table[kRows][kGroupsGemv] = {
      {Family<1, 1>::run, Family<1, 2>::run, Family<1, 3>::run, Family<1, 4>::run},
      {Family<2, 1>::run, Family<2, 2>::run, Family<2, 3>::run, Family<2, 4>::run},
      {Family<3, 1>::run, Family<3, 2>::run, Family<3, 3>::run, Family<3, 4>::run},
      {Family<4, 1>::run, Family<4, 2>::run, Family<4, 3>::run, Family<4, 4>::run}};
  return table[r - 1][p - 1];
}
template <int R, int P> struct Plain { static void run(const Tile& t) { kernel_plain<R, P>(t); } };
#if defined(__x86_64__)
template <int R, int P> struct Avx512Vnni { static void run(const Tile& t) { kernel_avx512vnni<R, P>(t); } };
template <int R, int P> struct Avx2 { static void run(const Tile& t) { kernel_avx2<R, P>(t); } };
#endif

// The kernel family by name, resolved when selected rather than on every tile.
using Picker = Kernel (*)(int r, int p);
Picker picker_for(const std::string& name) {
#if defined(__x86_64__)
  if (name == "avx512vnni" || name == "amx") return pick<Avx512Vnni>;  // amx: decoding (T = 1)
  if (name == "avx2") return pick<Avx2>;
#endif
  return pick<Plain>;
}

struct Selection {
  std::string name;
  Picker pick;
};
Selection& selected() {
  static Selection s = [] {
    const std::string first = initial_kernel(q8_kernels());
    return Selection{first, picker_for(first)};
  }();
  return s;
}

}  // namespace

std::vector<std::string> q8_kernels() {
  std::vector<std::string> names;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (cpu_supports("amx")) names.push_back("amx");  // prefill on tiles (amx_gemm.cpp)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c"))
    names.push_back("avx512vnni");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    names.push_back("avx2");
#endif
  names.push_back("plain");
  return names;
}

const std::string& q8_kernel() { return selected().name; }

void select_q8_kernel(const std::string& name) {
  const std::vector<std::string> have = q8_kernels();
  if (std::find(have.begin(), have.end(), name) == have.end())
    throw std::invalid_argument("q8 kernel '" + name + "' is not available on this CPU");
  selected() = {name, picker_for(name)};
}

void matmul_q8(const float* x, int T, int K, const Projection* products, size_t count) {
  if (T > 1 && selected().name == "amx") return amx_matmul_q8(TileImpl::instructions, x, T, K, products, count);
  static thread_local QuantizedRows xq;  // grows once, then reused
  xq.fill(x, T, K);
  const QuantizedRows* const xs = &xq;  // this thread's: thread_local names another inside the loops
  const Picker pick_kernel = selected().pick;
  const int blocks = (K + 31) / 32;
  // Work items of all products in one parallel region: per_item groups of 16 weight rows times,
  // in prefill, a chunk of kChunk rows of x (so a short N still spreads over the threads).
  const int per_item = T == 1 ? kGroupsGemv : kGroups, chunks = (T + kChunk - 1) / kChunk;
  if (count > kMaxProducts) throw std::invalid_argument("matmul_q8: more products than kMaxProducts");
  int first_item[kMaxProducts + 1] = {};  // product i's items: [first_item[i], first_item[i + 1])
  size_t work = 0;
  for (size_t i = 0; i < count; ++i) {
    const int n_groups = (products[i].N + 15) / 16;
    first_item[i + 1] = first_item[i] + (n_groups + per_item - 1) / per_item * chunks;
    work += size_t(T) * size_t(products[i].N) * size_t(K);
  }
  parallel_for_if(work > 32768, first_item[count], [&](int item) {
    size_t i = 0;
    while (item >= first_item[i + 1]) ++i;
    const Projection& pr = products[i];
    const int local = item - first_item[i], g0 = local / chunks * per_item, c = local % chunks;
    const int groups = std::min(per_item, (pr.N + 15) / 16 - g0);
    for (int t0 = c * kChunk; t0 < std::min(T, (c + 1) * kChunk); t0 += kRows) {
      const int rows = std::min(kRows, T - t0);
      const Tile tile{pr.y + size_t(t0) * pr.N + size_t(g0) * 16, pr.N, xs, t0,
                      pr.w->q8 + size_t(g0) * blocks * 512, pr.w->q8_scales + size_t(g0) * blocks * 16, blocks,
                      std::min(16, pr.N - (g0 + groups - 1) * 16), pr.accumulate};
      pick_kernel(rows, groups)(tile);
    }
  });
}

void matmul_q8(float* y, const float* x, const Weight& w, int T, int K, int N, bool accumulate) {
  const Projection product{y, &w, N, accumulate};
  matmul_q8(x, T, K, &product, 1);
}

}  // namespace pert
