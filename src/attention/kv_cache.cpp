#include "attention/kv_cache.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/fp16.hpp"
#include "kernels/lane_sums.hpp"
#include "kernels/ops.hpp"
#include "pert/error.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/dispatch.hpp"
#include "pert/kernels.hpp"

namespace pert {

// Decoding's products over a BF16, F16 or Q8 cache read each row widened in registers. Three paths
// (kernels.hpp): avx2 (AVX2, FMA and F16C: 4 keys' dot products at a time, 64 outputs of P·V
// held across the rows), avx512 (the same on 16 lanes: 128 outputs) and plain C++.
namespace {

int q8_blocks(int width) { return (width + 31) / 32; }

void widen_bf16(float* out, const uint16_t* in, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

void widen_f16_plain(float* out, const uint16_t* in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

// One row of Q8 blocks: value k is scale[k / 32] · q[k].
void widen_q8_row(float* out, const int8_t* q, const uint16_t* scales, int width) {
  for (int b = 0, k0 = 0; k0 < width; ++b, k0 += 32) {
    const float d = f16_to_f32(scales[b]);
    const int end = std::min(width, k0 + 32);
#pragma omp simd
    for (int k = k0; k < end; ++k) out[k] = d * float(q[k]);
  }
}

// One row's value i widened, for the plain loops.
template <CacheType T>
float value_at(const KvRows& v, size_t row, int i) {
  const size_t at = row * size_t(v.width) + size_t(i);
  if constexpr (T == CacheType::BF16) return bf16_to_f32(v.half[at]);
  if constexpr (T == CacheType::F16) return f16_to_f32(v.half[at]);
  if constexpr (T == CacheType::Q8)
    return f16_to_f32(v.scales[row * size_t(q8_blocks(v.width)) + size_t(i / 32)]) * float(v.q8[at]);
  if constexpr (T == CacheType::F32) return v.f32[at];
}

// Rows [j0, n): scores[j] = scale · rows[j]·q.
template <CacheType T>
void dot_rows_plain(const KvRows& v, const float* q, int j0, int n, float scale, float* scores) {
  for (int j = j0; j < n; ++j) {
    float s = 0.0f;
    for (int i = 0; i < v.width; ++i) s += q[i] * value_at<T>(v, size_t(j), i);
    scores[j] = scale * s;
  }
}

// Outputs [i0, width): out[i] = Σ_j p[j]·rows[j][i].
template <CacheType T>
void weighted_sum_plain(const KvRows& v, const float* p, int n, int i0, float* out) {
  for (int i = i0; i < v.width; ++i) {
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += p[j] * value_at<T>(v, size_t(j), i);
    out[i] = s;
  }
}

template <CacheType T>
void dot_plain(const KvRows& v, const float* q, int n, float scale, float* scores) {
  dot_rows_plain<T>(v, q, 0, n, scale, scores);
}
template <CacheType T>
void weighted_plain(const KvRows& v, const float* p, int n, float* out) {
  weighted_sum_plain<T>(v, p, n, 0, out);
}

#if defined(__x86_64__)
// Rows [row, row + count) into the caches ahead of their use, a line at a time: a block of keys
// is a short run that the hardware prefetcher picks up late (Zen 5, F16 cache 8192 deep: +15-25%).
// The scales of a Q8 row follow its values closely enough to ride along.
constexpr int kAheadRows = 16;
template <CacheType T>
inline void prefetch_rows(const KvRows& v, size_t row, int count) {
  const size_t bytes = (T == CacheType::F32 ? 4 : T == CacheType::Q8 ? 1 : 2) * size_t(v.width);
  const char* base = T == CacheType::F32 ? reinterpret_cast<const char*>(v.f32)
                     : T == CacheType::Q8 ? reinterpret_cast<const char*>(v.q8) : reinterpret_cast<const char*>(v.half);
  for (size_t at = row * bytes; at < (row + size_t(count)) * bytes; at += 64) _mm_prefetch(base + at, _MM_HINT_T0);
}

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// 8 F16 values widened by vcvtph2ps: exact, as f16_to_f32 (test_kv_cache checks every F16 value).
inline __m256 load_f16x8(const uint16_t* in) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
}

void widen_f16_avx2(float* out, const uint16_t* in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load_f16x8(in + i));
  widen_f16_plain(out + i, in + i, n - i);
}

namespace avx2 {
#include "kernels/lanes_avx2.inc"

// Values [i, i + 8) of row `row` widened into a register (i + 8 <= width, i a multiple of 8).
template <CacheType T>
inline Vec load_values(const KvRows& v, size_t row, int i) {
  const size_t at = row * size_t(v.width) + size_t(i);
  if constexpr (T == CacheType::BF16)
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v.half + at))), 16));
  if constexpr (T == CacheType::F16) return load_f16x8(v.half + at);
  if constexpr (T == CacheType::Q8) {
    const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(v.q8 + at))));
    const uint16_t d = v.scales[row * size_t(q8_blocks(v.width)) + size_t(i / 32)];
    return _mm256_mul_ps(q, _mm256_cvtph_ps(_mm_set1_epi16(short(d))));  // the scale widened in every lane
  }
  if constexpr (T == CacheType::F32) return _mm256_loadu_ps(v.f32 + at);
}

#include "attention/kv_cache_simd.inc"
}  // namespace avx2

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

// avx512: the same steps on 16 lanes, so a row of 64 is 4 registers and the 128 outputs of P·V
// stay in 8.
namespace avx512 {
#include "kernels/lanes_avx512.inc"

// Values [i, i + 16) of row `row` widened (i + 16 <= width, i a multiple of 16).
template <CacheType T>
inline Vec load_values(const KvRows& v, size_t row, int i) {
  const size_t at = row * size_t(v.width) + size_t(i);
  if constexpr (T == CacheType::BF16)
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v.half + at))), 16));
  if constexpr (T == CacheType::F16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v.half + at)));
  if constexpr (T == CacheType::Q8) {
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v.q8 + at))));
    const uint16_t d = v.scales[row * size_t(q8_blocks(v.width)) + size_t(i / 32)];
    return _mm512_mul_ps(q, _mm512_cvtph_ps(_mm256_set1_epi16(short(d))));  // the scale widened in every lane
  }
  if constexpr (T == CacheType::F32) return _mm512_loadu_ps(v.f32 + at);
}

#include "attention/kv_cache_simd.inc"
}  // namespace avx512

#pragma GCC pop_options
#endif

// A path's products, by CacheType.
struct CacheKernels {
  void (*dot[4])(const KvRows&, const float*, int, float, float*);
  void (*weighted_sum[4])(const KvRows&, const float*, int, float*);
  void (*widen_f16)(float*, const uint16_t*, size_t);
};

KernelChoice<CacheKernels>& choice() {
  using C = CacheType;
  static KernelChoice<CacheKernels> c(
      "cache", {
#if defined(__x86_64__)
                   {"avx512",
                    {{avx512::dot<C::F32>, avx512::dot<C::BF16>, avx512::dot<C::F16>, avx512::dot<C::Q8>},
                     {avx512::weighted<C::F32>, avx512::weighted<C::BF16>, avx512::weighted<C::F16>, avx512::weighted<C::Q8>},
                     widen_f16_avx2}},
                   {"avx2",
                    {{avx2::dot<C::F32>, avx2::dot<C::BF16>, avx2::dot<C::F16>, avx2::dot<C::Q8>},
                     {avx2::weighted<C::F32>, avx2::weighted<C::BF16>, avx2::weighted<C::F16>, avx2::weighted<C::Q8>},
                     widen_f16_avx2}},
#endif
                   {"plain",
                    {{dot_plain<C::F32>, dot_plain<C::BF16>, dot_plain<C::F16>, dot_plain<C::Q8>},
                     {weighted_plain<C::F32>, weighted_plain<C::BF16>, weighted_plain<C::F16>, weighted_plain<C::Q8>},
                     widen_f16_plain}},
               });
  return c;
}

}  // namespace

std::vector<std::string> cache_kernels() { return choice().names(); }
const std::string& cache_kernel() { return choice().name(); }
void select_cache_kernel(const std::string& name) { choice().select(name); }

void KvRows::dot(const float* q, int n, float scale, float* scores) const {
  choice().table().dot[int(type)](*this, q, n, scale, scores);
}

void KvRows::weighted_sum(const float* p, int n, float* out) const {
  choice().table().weighted_sum[int(type)](*this, p, n, out);
}

const char* cache_type_name(CacheType type) {
  switch (type) {
    case CacheType::BF16: return "bf16";
    case CacheType::F16: return "f16";
    case CacheType::Q8: return "q8";
    default: return "f32";
  }
}

CacheType parse_cache_type(const std::string& name) {
  for (CacheType t : {CacheType::F32, CacheType::BF16, CacheType::F16, CacheType::Q8})
    if (name == cache_type_name(t)) return t;
  throw Error("cache type '" + name + "': expected f32, bf16, f16 or q8");
}

double cache_bytes_per_value(CacheType type, int width) {
  switch (type) {
    case CacheType::BF16:
    case CacheType::F16: return 2.0;
    case CacheType::Q8: return 1.0 + 2.0 * q8_blocks(width) / std::max(width, 1);
    default: return 4.0;
  }
}

KvRows KvRows::at(ptrdiff_t row) const {
  KvRows v = *this;
  const ptrdiff_t at = row * width;
  if (f32) v.f32 += at;
  if (half) v.half += at;
  if (q8) {
    v.q8 += at;
    v.scales += row * q8_blocks(width);
  }
  return v;
}

const float* KvRows::read(int n, float* buf) const {
  const size_t values = size_t(n) * size_t(width);
  switch (type) {
    case CacheType::F32: return f32;
    case CacheType::BF16: widen_bf16(buf, half, values); break;
    case CacheType::F16: choice().table().widen_f16(buf, half, values); break;
    case CacheType::Q8:
      for (int r = 0; r < n; ++r)
        widen_q8_row(buf + size_t(r) * width, q8 + size_t(r) * width, scales + size_t(r) * q8_blocks(width), width);
      break;
  }
  return buf;
}

KvCache::KvCache(CacheType type, size_t rows, int width) : type_(type), width_(width), blocks_(q8_blocks(width)) {
  const size_t values = rows * size_t(width);
  switch (type) {
    case CacheType::F32: f32_.assign(values, 0.0f); break;
    case CacheType::BF16:
    case CacheType::F16: half_.assign(values, 0); break;
    case CacheType::Q8:
      q8_.assign(values, 0);
      scales_.assign(rows * size_t(blocks_), 0);
      break;
  }
}

size_t KvCache::bytes() const {
  return f32_.size() * sizeof(float) + half_.size() * sizeof(uint16_t) + q8_.size() + scales_.size() * sizeof(uint16_t);
}

void KvCache::store(size_t row, const float* x, size_t n) {
  const size_t w = size_t(width_), at = row * w;
  switch (type_) {
    case CacheType::F32: std::memcpy(&f32_[at], x, sizeof(float) * n * w); break;
    case CacheType::BF16:
      for (size_t i = 0; i < n * w; ++i) half_[at + i] = f32_to_bf16(x[i]);
      break;
    case CacheType::F16:
      for (size_t i = 0; i < n * w; ++i) half_[at + i] = f32_to_f16(x[i]);
      break;
    case CacheType::Q8:
      for (size_t r = 0; r < n; ++r)
        for (int b = 0, k0 = 0; k0 < width_; ++b, k0 += 32) {
          int8_t q[32];
          const int len = std::min(32, width_ - k0);
          scales_[(row + r) * size_t(blocks_) + size_t(b)] = f32_to_f16(quantize_q8_block(x + r * w + size_t(k0), len, q));
          std::memcpy(&q8_[at + r * w + size_t(k0)], q, size_t(len));
        }
      break;
  }
}

void KvCache::load(float* out, size_t row, size_t n) const {
  const float* f = rows(row).read(int(n), out);
  if (f != out) std::memcpy(out, f, sizeof(float) * n * size_t(width_));
}

void KvCache::move(size_t dst, size_t src, size_t n) {
  const size_t w = size_t(width_);
  if (!f32_.empty()) std::memmove(&f32_[dst * w], &f32_[src * w], sizeof(float) * n * w);
  if (!half_.empty()) std::memmove(&half_[dst * w], &half_[src * w], sizeof(uint16_t) * n * w);
  if (!q8_.empty()) {
    std::memmove(&q8_[dst * w], &q8_[src * w], n * w);
    std::memmove(&scales_[dst * size_t(blocks_)], &scales_[src * size_t(blocks_)], sizeof(uint16_t) * n * size_t(blocks_));
  }
}

KvRows KvCache::rows(size_t row) const {
  KvRows v{type_, width_};
  if (!f32_.empty()) v.f32 = f32_.data();
  if (!half_.empty()) v.half = half_.data();
  if (!q8_.empty()) {
    v.q8 = q8_.data();
    v.scales = scales_.data();
  }
  return v.at(ptrdiff_t(row));
}

}  // namespace pert
