// The KV cache's storage (--cache-type): rows of `width` values (one position of one kv head),
// kept in F32, BF16, F16 or Q8 (blocks of 32 int8 with an F16 scale, as llama.cpp's Q8_0; the
// last block of a row may be shorter). Keys and values are rounded once, when stored; every
// rotation, bias and product still runs in F32 on rows widened when read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pert/cache_type.hpp"

namespace pert {


// A read-only view of cached rows from some row on, in whichever type they are kept.
struct KvRows {
  CacheType type = CacheType::F32;
  int width = 0;
  const float* f32 = nullptr;      // F32: [rows][width]
  const uint16_t* half = nullptr;  // BF16 / F16: [rows][width]
  const int8_t* q8 = nullptr;      // Q8: [rows][width]
  const uint16_t* scales = nullptr;  // Q8: [rows][⌈width/32⌉], F16
  static KvRows of(const float* rows, int width) { return {CacheType::F32, width, rows}; }
  KvRows at(ptrdiff_t row) const;  // the view from `row` rows further on
  // rows [0, n) as F32: the rows themselves when F32, else widened into `buf` [n][width].
  const float* read(int n, float* buf) const;
  // Decoding's two products over rows [0, n), each row widened in registers as it is read:
  // scores[j] = scale · q·row_j, and out[i] = Σ_j p[j] · row_j[i].
  void dot(const float* q, int n, float scale, float* scores) const;
  void weighted_sum(const float* p, int n, float* out) const;
};

class KvCache {
 public:
  KvCache() = default;
  KvCache(CacheType type, size_t rows, int width);  // zero-filled
  CacheType type() const { return type_; }
  size_t bytes() const;
  void store(size_t row, const float* x, size_t n = 1);  // rows [row, row + n) from x [n][width], rounded
  void load(float* out, size_t row, size_t n) const;      // rows [row, row + n) widened to out [n][width]
  void move(size_t dst, size_t src, size_t n);            // memmove of n rows
  KvRows rows(size_t row = 0) const;
  float* f32(size_t row) { return &f32_[row * size_t(width_)]; }  // F32 caches only

 private:
  CacheType type_ = CacheType::F32;
  int width_ = 0, blocks_ = 0;  // blocks_: Q8 blocks per row
  std::vector<float> f32_;
  std::vector<uint16_t> half_;
  std::vector<int8_t> q8_;
  std::vector<uint16_t> scales_;
};

}  // namespace pert
