// AMX's tiles behind one small interface with two implementations, so the tile kernels
// (amx_gemm.cpp) are written once and every machine's tests run them:
//   TileModel       portable C++ with the instructions' semantics as Intel's ISA reference gives
//                   them (configuration, tileloadd / tilestored / tilezero, tdpbf16ps, tdpbusd),
//                   one thread_local register file per thread as the hardware's is per thread;
//   TileIntrinsics  the instructions themselves (x86-64; run only where amx is usable:
//                   cpu_supports("amx"), which includes the OS's permission).
// Both are structs of static functions; a tile is named by a template argument (0..7) because
// the instructions encode it.
//
// Semantics kept by the model (palette 1):
//   configure  8 tiles, tile i rows[i] <= 16 rows of colsb[i] <= 64 bytes; a tile with rows 0 or
//              colsb 0 is unconfigured and using it is an error (the CPU raises #UD). Every
//              tile starts zeroed.
//   load       rows × colsb bytes from base + r·stride; the rest of the tile's 16 × 64 bytes zero.
//   store      rows × colsb bytes to base + r·stride.
//   dpbusd     C[m][n] += Σ_k Σ_i A[m][4k+i] (u8) · B[k][4n+i] (s8), int32, wrapping, no
//              saturation; k < A.colsb/4, which must equal B.rows; C.rows = A.rows, C.colsb = B.colsb.
//   dpbf16ps   per row m and column n two F32 sums from 0, even and odd halves of the BF16
//              pairs: e += A[m].bf16[2k]·B[k].bf16[2n], o += A[m].bf16[2k+1]·B[k].bf16[2n+1] over
//              k (each a fused multiply-add, rounded to nearest even), then C[m][n] += (e + o).
//              Denormal inputs (the BF16 values and C) are read as zero and denormal results
//              written as zero (DAZ, FTZ), whatever MXCSR says; same shape rules as dpbusd.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pert {

// LDTILECFG's 64-byte operand, palette 1.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tiles 0..7 (8..15 reserved, zero)
  uint8_t rows[16] = {};
  void set(int tile, int n_rows, int bytes_per_row) {
    rows[tile] = uint8_t(n_rows);
    colsb[tile] = uint16_t(bytes_per_row);
  }
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

namespace tile_model {

constexpr int kTiles = 8, kMaxRows = 16, kMaxColsb = 64;

struct RegisterFile {
  TileConfig config;
  bool configured = false;
  alignas(64) uint8_t data[kTiles][kMaxRows][kMaxColsb] = {};
};
inline RegisterFile& registers() {
  static thread_local RegisterFile file;
  return file;
}

[[noreturn]] inline void fault(const std::string& what) { throw std::logic_error("AMX tile model: " + what); }

inline void check_tile(int t) {
  const RegisterFile& f = registers();
  if (!f.configured) fault("tile instruction before a configuration");
  if (f.config.rows[t] == 0 || f.config.colsb[t] == 0) fault("tile " + std::to_string(t) + " is not configured");
}

// The three tiles of a product, shaped as the instruction requires.
inline void check_product(int c, int a, int b) {
  check_tile(c), check_tile(a), check_tile(b);
  const TileConfig& k = registers().config;
  if (k.rows[c] != k.rows[a] || k.colsb[a] / 4 != k.rows[b] || k.colsb[c] != k.colsb[b] || k.colsb[a] % 4 ||
      k.colsb[c] % 4)
    fault("product tiles C " + std::to_string(c) + ", A " + std::to_string(a) + ", B " + std::to_string(b) +
          " do not fit (C.rows = A.rows, A.colsb/4 = B.rows, C.colsb = B.colsb)");
}

// DAZ on an input, FTZ on a result: a denormal is a zero of its sign.
inline float flush_denormal(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }

inline float bf16_at(const uint8_t* row, int index) {
  uint16_t h;
  std::memcpy(&h, row + 2 * index, 2);
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return flush_denormal(f);
}

}  // namespace tile_model

struct TileModel {
  static void configure(const TileConfig& config) {
    using namespace tile_model;
    if (config.palette != 1) tile_model::fault("palette " + std::to_string(config.palette) + " (only 1 is modelled)");
    for (int t = 0; t < 16; ++t) {
      const bool listed = t < kTiles;
      if ((!listed && (config.rows[t] || config.colsb[t])) || config.rows[t] > kMaxRows || config.colsb[t] > kMaxColsb)
        tile_model::fault("tile " + std::to_string(t) + " configured as " + std::to_string(config.rows[t]) + " x " +
                          std::to_string(config.colsb[t]) + " bytes (at most 8 tiles of 16 x 64)");
    }
    RegisterFile& f = registers();
    f.config = config;
    f.configured = true;
    std::memset(f.data, 0, sizeof f.data);
  }
  static void release() {
    tile_model::RegisterFile& f = tile_model::registers();
    f.configured = false;
    std::memset(f.data, 0, sizeof f.data);
  }
  template <int t>
  static void zero() {
    tile_model::check_tile(t);
    std::memset(tile_model::registers().data[t], 0, sizeof tile_model::registers().data[t]);
  }
  template <int t>
  static void load(const void* base, size_t stride) {
    tile_model::check_tile(t);
    tile_model::RegisterFile& f = tile_model::registers();
    std::memset(f.data[t], 0, sizeof f.data[t]);
    for (int r = 0; r < f.config.rows[t]; ++r)
      std::memcpy(f.data[t][r], static_cast<const uint8_t*>(base) + size_t(r) * stride, f.config.colsb[t]);
  }
  template <int t>
  static void store(void* base, size_t stride) {
    tile_model::check_tile(t);
    const tile_model::RegisterFile& f = tile_model::registers();
    for (int r = 0; r < f.config.rows[t]; ++r)
      std::memcpy(static_cast<uint8_t*>(base) + size_t(r) * stride, f.data[t][r], f.config.colsb[t]);
  }
  template <int c, int a, int b>
  static void dpbusd() {
    tile_model::check_product(c, a, b);
    tile_model::RegisterFile& f = tile_model::registers();
    const int rows = f.config.rows[c], cols = f.config.colsb[c] / 4, depth = f.config.colsb[a] / 4;
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < cols; ++n) {
        int32_t acc;
        std::memcpy(&acc, f.data[c][m] + 4 * n, 4);
        uint32_t sum = uint32_t(acc);  // wraps as the instruction does
        for (int k = 0; k < depth; ++k)
          for (int i = 0; i < 4; ++i)
            sum += uint32_t(int32_t(f.data[a][m][4 * k + i]) * int32_t(int8_t(f.data[b][k][4 * n + i])));
        std::memcpy(f.data[c][m] + 4 * n, &sum, 4);
      }
  }
  template <int c, int a, int b>
  static void dpbf16ps() {
    using tile_model::bf16_at;
    using tile_model::flush_denormal;
    tile_model::check_product(c, a, b);
    tile_model::RegisterFile& f = tile_model::registers();
    const int rows = f.config.rows[c], cols = f.config.colsb[c] / 4, depth = f.config.colsb[a] / 4;
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < cols; ++n) {
        float even = 0.0f, odd = 0.0f;
        for (int k = 0; k < depth; ++k) {
          even = flush_denormal(std::fma(bf16_at(f.data[a][m], 2 * k), bf16_at(f.data[b][k], 2 * n), even));
          odd = flush_denormal(std::fma(bf16_at(f.data[a][m], 2 * k + 1), bf16_at(f.data[b][k], 2 * n + 1), odd));
        }
        float acc;
        std::memcpy(&acc, f.data[c][m] + 4 * n, 4);
        acc = flush_denormal(flush_denormal(acc) + flush_denormal(even + odd));
        std::memcpy(f.data[c][m] + 4 * n, &acc, 4);
      }
  }
};

#if defined(__x86_64__)
// The configuration through GCC's intrinsics, compiled for AMX.
#pragma GCC push_options
#pragma GCC target("amx-tile")
inline void amx_load_config(const TileConfig& config) {
  __asm__ volatile("" ::: "memory");  // the whole 64 bytes written before ldtilecfg reads them
  _tile_loadconfig(&config);
}
inline void amx_release_tiles() { _tile_release(); }
#pragma GCC pop_options

// The instructions. GCC's _tile_loadd / _tile_dpbf16ps ... are macros that paste a literal tile
// number into their assembly; these write the same instructions with the number as an
// immediate operand ("%c"), so a template argument can name the tile, and need no target
// attribute, so they inline into the kernels. Loads and stores tell the compiler they touch
// memory (GCC's _tile_loadd does not), so the buffers they read are written first.
struct TileIntrinsics {
  static void configure(const TileConfig& config) { amx_load_config(config); }
  static void release() { amx_release_tiles(); }
  template <int t>
  static void zero() {
    __asm__ volatile("tilezero %%tmm%c0" ::"i"(t));
  }
  template <int t>
  static void load(const void* base, size_t stride) {
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(long(stride)), "i"(t) : "memory");
  }
  template <int t>
  static void store(void* base, size_t stride) {
    __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(long(stride)), "i"(t) : "memory");
  }
  template <int c, int a, int b>
  static void dpbusd() {
    __asm__ volatile("tdpbusd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(c), "i"(a), "i"(b));
  }
  template <int c, int a, int b>
  static void dpbf16ps() {
    __asm__ volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(c), "i"(a), "i"(b));
  }
};
#endif

}  // namespace pert
