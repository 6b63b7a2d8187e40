// Unit tests of the KV cache's storage (kv_cache.hpp): each type's rounding written out from its
// definition, F16 widening over every F16 value (vcvtph2ps where the CPU has it, the plain
// conversion elsewhere), views from a row on, moves, and names.
#include <cmath>
#include <cstring>
#include <vector>

#include "pert/error.hpp"
#include "kernels/fp16.hpp"
#include "attention/kv_cache.hpp"
#include "kernels/ops.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// What a row of `width` values reads back as, from each type's definition.
std::vector<float> rounded(CacheType type, const std::vector<float>& x, int width) {
  std::vector<float> out(x.size());
  for (size_t r = 0; r < x.size() / size_t(width); ++r)
    for (int k0 = 0; k0 < width; k0 += 32) {
      const size_t at = r * size_t(width) + size_t(k0);
      const int len = std::min(32, width - k0);
      float amax = 0.0f;
      for (int i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[at + size_t(i)]));
      const float d = amax / 127.0f, d16 = f16_to_f32(f32_to_f16(d));
      for (int i = 0; i < len; ++i) {
        const float v = x[at + size_t(i)];
        switch (type) {
          case CacheType::F32: out[at + size_t(i)] = v; break;
          case CacheType::BF16: out[at + size_t(i)] = bf16_to_f32_value(f32_to_bf16(v)); break;
          case CacheType::F16: out[at + size_t(i)] = f16_to_f32(f32_to_f16(v)); break;
          case CacheType::Q8: out[at + size_t(i)] = d16 * float(d > 0 ? std::lrintf(v / d) : 0); break;
        }
      }
    }
  return out;
}

}  // namespace

TEST_CASE("kv_cache: every type reads back its definition's rounding", "[kv_cache]") {
  for (CacheType type : {CacheType::F32, CacheType::BF16, CacheType::F16, CacheType::Q8})
    for (int width : {8, 32, 40, 64, 128}) {  // 8 and 40: a Q8 row's last block is short
      INFO(cache_type_name(type) << ", width " << width);
      const size_t rows = 37;
      std::vector<float> x = random_floats(rows * size_t(width), 7, 3.0f);
      x[5] = 0.0f;
      std::fill(x.begin() + width, x.begin() + 2 * width, 0.0f);  // an all-zero row: scale 0
      KvCache cache(type, rows + 3, width);
      cache.store(2, x.data(), rows);
      std::vector<float> back(x.size());
      cache.load(back.data(), 2, rows);
      const std::vector<float> want = rounded(type, x, width);
      size_t wrong = 0;
      double worst = 0.0;
      for (size_t i = 0; i < x.size(); ++i) {
        wrong += back[i] != want[i];
        worst = std::max(worst, double(std::fabs(back[i] - x[i])));
      }
      CHECK(wrong == 0);
      // The errors each type promises on values below 3 (so below 4): none, half an ulp of
      // [2, 4) (2^-7 in BF16, 2^-10 in F16), and for Q8 half a step d/2 plus the step's own F16
      // rounding (127 · d · 2^-11), d <= 3/127.
      const double d = 3.0 / 127, bound = type == CacheType::F32    ? 0.0
                                          : type == CacheType::BF16 ? 1.0 / 128
                                          : type == CacheType::F16  ? 1.0 / 1024
                                                                    : d / 2 + 127 * d / 2048;
      CHECK(worst <= bound);
      // A view from a row on reads the same rows.
      std::vector<float> buf(size_t(width) * 4);
      const float* r = cache.rows(7).read(4, buf.data());
      for (int i = 0; i < 4 * width; ++i) CHECK(r[i] == want[size_t(5 * width + i)]);
      // move: rows [10, 20) onto [3, 13), overlapping
      cache.move(3, 10, 10);
      std::vector<float> moved(size_t(10) * width);
      cache.load(moved.data(), 3, 10);
      for (int i = 0; i < 10 * width; ++i) CHECK(moved[size_t(i)] == want[size_t(8 * width + i)]);
      CHECK(cache.bytes() == size_t(double(rows + 3) * width * cache_bytes_per_value(type, width) + 0.5));
    }
}

TEST_CASE("kv_cache: F16 widening is exact over every F16 value", "[kv_cache]") {
  on_each_path("cache", cache_kernels, cache_kernel, select_cache_kernel, [&] {
    std::vector<float> all;  // every finite and infinite F16 value, NaNs aside
    for (uint32_t h = 0; h < 65536; ++h)
      if ((h & 0x7c00) != 0x7c00 || (h & 0x3ff) == 0) all.push_back(f16_to_f32(uint16_t(h)));
    const int width = 64;
    all.resize((all.size() + width - 1) / width * width, 0.0f);
    const size_t rows = all.size() / width;
    KvCache cache(CacheType::F16, rows, width);
    cache.store(0, all.data(), rows);
    std::vector<float> back(all.size());
    cache.load(back.data(), 0, rows);
    size_t wrong = 0;
    for (size_t i = 0; i < all.size(); ++i) wrong += bits(back[i]) != bits(all[i]);
    CHECK(wrong == 0);
  });
}

TEST_CASE("kv_cache: type names", "[kv_cache]") {
  for (CacheType t : {CacheType::F32, CacheType::BF16, CacheType::F16, CacheType::Q8})
    CHECK(parse_cache_type(cache_type_name(t)) == t);
  REQUIRE_THROWS_NAMING(parse_cache_type("q4"), Error, "cache type 'q4'");
  CHECK(cache_bytes_per_value(CacheType::Q8, 64) == Approx(1.0625));
  CHECK(cache_bytes_per_value(CacheType::Q8, 8) == Approx(1.25));
}

// Decoding's products widen in registers (AVX2 where the CPU has it, 4 rows and 64 outputs at a
// time, remainders plain): each equals the loop over the rows read back.
TEST_CASE("kv_cache: dot and weighted_sum equal loops over the rows read back", "[kv_cache]") {
  on_each_path("cache", cache_kernels, cache_kernel, select_cache_kernel, [&] {
    for (CacheType type : {CacheType::F32, CacheType::BF16, CacheType::F16, CacheType::Q8})
      for (int width : {8, 12, 40, 64, 72, 136})
        for (int n : {1, 3, 4, 7, 33}) {
          INFO(cache_type_name(type) << ", width " << width << ", rows " << n);
          const std::vector<float> x = random_floats(size_t(n + 2) * width, 3, 2.0f), q = random_floats(size_t(width), 4);
          const std::vector<float> p = random_floats(size_t(n), 5);
          KvCache cache(type, size_t(n + 2), width);
          cache.store(0, x.data(), size_t(n + 2));
          std::vector<float> rows(x.size());
          cache.load(rows.data(), 0, size_t(n + 2));
          std::vector<float> scores(static_cast<size_t>(n)), out(static_cast<size_t>(width), -1.0f);
          cache.rows(2).dot(q.data(), n, 0.5f, scores.data());
          cache.rows(2).weighted_sum(p.data(), n, out.data());
          for (int j = 0; j < n; ++j) {
            double want = 0.0;
            for (int i = 0; i < width; ++i) want += double(q[size_t(i)]) * rows[size_t((j + 2) * width + i)];
            CHECK(scores[size_t(j)] == Approx(0.5 * want).margin(1e-5));
          }
          for (int i = 0; i < width; ++i) {
            double want = 0.0;
            for (int j = 0; j < n; ++j) want += double(p[size_t(j)]) * rows[size_t((j + 2) * width + i)];
            CHECK(out[size_t(i)] == Approx(want).margin(1e-5));
          }
        }
  });
}
