// Prefill's BF16 and Q8 products on AMX tiles (amx_gemm.hpp), each a template over the tile
// interface of amx_tiles.hpp. One step holds up to 2 × 2 result tiles, as registers allow:
//   tiles 0..3  C, result tile (i, j) = 2·i + j: rows 16·i of x, weight block j
//   tiles 4, 5  A: x's rows 0..15 and 16..31
//   tiles 6, 7  B: weight blocks 0 and 1 (16 output rows each)
// Each work item (two weight blocks of one product) configures the tiles on its thread, runs
// every 32 rows of x and releases them.
#include "kernels/amx_gemm.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/amx_tiles.hpp"
#include "kernels/fp16.hpp"
#include "kernels/parallel.hpp"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pert {

namespace {

constexpr int kTileRows = 16;

TileConfig all_tiles(int a_colsb, int b_rows) {
  TileConfig c;
  for (int t = 0; t < 4; ++t) c.set(t, kTileRows, 64);
  for (int t = 4; t < 6; ++t) c.set(t, kTileRows, a_colsb);
  for (int t = 6; t < 8; ++t) c.set(t, b_rows, 64);
  return c;
}

// The products of one step: C(i, j) += A(i) · B(j) for i < MT, j < NB, with the tiles'
// numbers as template arguments.
template <class Tiles, bool Int8, int MT, int NB>
void multiply_step() {
  auto product = [](auto c, auto a, auto b) {
    if constexpr (Int8)
      Tiles::template dpbusd<decltype(c)::value, decltype(a)::value, decltype(b)::value>();
    else
      Tiles::template dpbf16ps<decltype(c)::value, decltype(a)::value, decltype(b)::value>();
  };
  using I = std::integral_constant<int, 0>;
  product(I{}, std::integral_constant<int, 4>{}, std::integral_constant<int, 6>{});
  if constexpr (NB > 1) product(std::integral_constant<int, 1>{}, std::integral_constant<int, 4>{}, std::integral_constant<int, 7>{});
  if constexpr (MT > 1) product(std::integral_constant<int, 2>{}, std::integral_constant<int, 5>{}, std::integral_constant<int, 6>{});
  if constexpr (MT > 1 && NB > 1)
    product(std::integral_constant<int, 3>{}, std::integral_constant<int, 5>{}, std::integral_constant<int, 7>{});
}

template <class Tiles, int MT, int NB>
void zero_results() {
  Tiles::template zero<0>();
  if constexpr (NB > 1) Tiles::template zero<1>();
  if constexpr (MT > 1) Tiles::template zero<2>();
  if constexpr (MT > 1 && NB > 1) Tiles::template zero<3>();
}

// Result tiles to out[2·i + j] (16 × 16 of 4 bytes).
template <class Tiles, int MT, int NB, class Cell>
void store_results(Cell (*out)[kTileRows][16]) {
  Tiles::template store<0>(out[0], 64);
  if constexpr (NB > 1) Tiles::template store<1>(out[1], 64);
  if constexpr (MT > 1) Tiles::template store<2>(out[2], 64);
  if constexpr (MT > 1 && NB > 1) Tiles::template store<3>(out[3], 64);
}

template <class Tiles, int MT>
void load_a(const void* rows0, size_t stride, size_t tile_stride) {
  Tiles::template load<4>(rows0, stride);
  if constexpr (MT > 1) Tiles::template load<5>(static_cast<const uint8_t*>(rows0) + tile_stride, stride);
}

template <class Tiles, int NB>
void load_b(const void* const* blocks, size_t stride) {
  Tiles::template load<6>(blocks[0], stride);
  if constexpr (NB > 1) Tiles::template load<7>(blocks[1], stride);
}

// out[t][n] (+)= acc for the step's rows t0 + 16·i + r < T and columns n0 + 16·j + c < N.
void add_results(float* y, int ldy, int T, int N, int t0, int n0, int MT, int NB, const float (*acc)[kTileRows][16],
                 bool accumulate) {
  for (int i = 0; i < MT; ++i)
    for (int r = 0; r < kTileRows && t0 + 16 * i + r < T; ++r)
      for (int j = 0; j < NB; ++j) {
        float* out = y + size_t(t0 + 16 * i + r) * ldy + n0 + 16 * j;
        const float* v = acc[2 * i + j][r];
        for (int c = 0; c < std::min(16, N - n0 - 16 * j); ++c) out[c] = accumulate ? out[c] + v[c] : v[c];
      }
}

// step.run<MT, NB>() for a step of mt row tiles and nb weight blocks (1 or 2 each).
template <class Step>
void with_shape(int mt, int nb, Step& step) {
  if (mt > 1 && nb > 1) return step.template run<2, 2>();
  if (mt > 1) return step.template run<2, 1>();
  if (nb > 1) return step.template run<1, 2>();
  step.template run<1, 1>();
}

// ---- BF16 ----

template <class Tiles>
struct Bf16Step {
  const uint32_t* xp;  // x as BF16 pairs, [rows][ldx], zero-padded
  size_t ldx;
  const uint16_t* blocks[2];  // the two weight blocks' pairs
  int pairs, chunks;
  uint16_t (*tail)[kTileRows * 32];  // zeroed tiles for a last run of fewer than 16 pairs
  float (*out)[kTileRows][16];
  template <int MT, int NB>
  void run() {
    zero_results<Tiles, MT, NB>();
    for (int kc = 0; kc < chunks; ++kc) {
      load_a<Tiles, MT>(xp + size_t(kc) * 16, ldx * 4, size_t(kTileRows) * ldx * 4);
      const void* b[2];
      const int have = std::min(16, pairs - kc * 16);
      for (int j = 0; j < NB; ++j) {
        b[j] = blocks[j] + size_t(kc) * 16 * 32;
        if (have < 16) {  // the block's pairs end here: read no further than they go
          std::memcpy(tail[j], b[j], size_t(have) * 64);
          std::memset(tail[j] + have * 32, 0, size_t(16 - have) * 64);
          b[j] = tail[j];
        }
      }
      load_b<Tiles, NB>(b, 64);
      multiply_step<Tiles, false, MT, NB>();
    }
    store_results<Tiles, MT, NB>(out);
  }
};

template <class Tiles>
void matmul_bf16_tiles(float* y, const float* x, const uint16_t* packed, int T, int K, int N, bool accumulate) {
  const int pairs = (K + 1) / 2, chunks = (pairs + 15) / 16, m_tiles = (T + kTileRows - 1) / kTileRows;
  const size_t ldx = size_t(chunks) * 16, block_stride = size_t(pairs) * 32;
  static thread_local std::vector<uint32_t> buffer;  // grows once, then reused
  buffer.assign(size_t(m_tiles) * kTileRows * ldx, 0u);
  uint32_t* const xp = buffer.data();  // this thread's: thread_local names another inside the loop
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k)
      xp[size_t(t) * ldx + size_t(k / 2)] |= uint32_t(f32_to_bf16(x[size_t(t) * K + k])) << (16 * (k % 2));
  const int n_blocks = (N + 15) / 16, items = (n_blocks + 1) / 2;
  const TileConfig config = all_tiles(64, kTileRows);
  parallel_for_if(size_t(T) * N * K > 32768, items, [&](int item) {
    alignas(64) uint16_t tail[2][kTileRows * 32];
    alignas(64) float out[4][kTileRows][16];
    const int b0 = 2 * item, nb = std::min(2, n_blocks - b0);
    Tiles::configure(config);
    for (int mi = 0; mi < m_tiles; mi += 2) {
      Bf16Step<Tiles> step{xp + size_t(mi) * kTileRows * ldx, ldx,
                           {packed + size_t(b0) * block_stride, packed + size_t(b0 + nb - 1) * block_stride},
                           pairs, chunks, tail, out};
      const int mt = std::min(2, m_tiles - mi);
      with_shape(mt, nb, step);
      add_results(y, N, T, N, mi * kTileRows, b0 * 16, mt, nb, out, accumulate);
    }
    Tiles::release();
  });
}

// ---- Q8 ----

// x quantized as every q8 kernel does (quantize_q8_block per row and block of 32), kept as
// tdpbusd's unsigned A: bytes q + 128, [rows padded to 16][blocks][32]; and the scales.
struct TileRows {
  std::vector<uint8_t> a;
  std::vector<float> d;  // [rows][blocks], 0 on padding rows
  void fill(const float* x, int T, int K, int rows) {
    const int blocks = (K + 31) / 32;
    a.assign(size_t(rows) * blocks * 32, uint8_t(128));
    d.assign(size_t(rows) * blocks, 0.0f);
    uint8_t* const as = a.data();  // the caller's buffers: thread_local names another inside the loop
    float* const ds = d.data();
    parallel_for_if(size_t(T) * K > 65536, T, [&](int t) {
      int8_t q[32];
      for (int b = 0; b < blocks; ++b) {
        const size_t at = size_t(t) * blocks + size_t(b);
        ds[at] = quantize_q8_block(x + size_t(t) * K + size_t(b) * 32, std::min(32, K - b * 32), q);
        for (int i = 0; i < 32; ++i) as[at * 32 + size_t(i)] = uint8_t(q[i]) ^ 0x80u;
      }
    });
  }
};

// One group of 16 weight rows as tdpbusd's signed B, block after block ([blocks][8][16][4]
// bytes q), with 128 · Σ q per row and block (what x's +128 adds) and the scales in F32.
struct SignedGroup {
  std::vector<uint8_t> b;
  std::vector<int32_t> offset;  // [blocks][16]
  std::vector<float> d;         // [blocks][16]
  void fill(const uint8_t* packed, const uint16_t* scales, int blocks) {
    b.resize(size_t(blocks) * 512);
    offset.assign(size_t(blocks) * 16, 0);
    d.resize(size_t(blocks) * 16);
    for (size_t i = 0; i < b.size(); ++i) {
      b[i] = packed[i] ^ 0x80u;
      offset[i / 512 * 16 + i % 64 / 4] += 128 * int32_t(int8_t(b[i]));
    }
    for (size_t i = 0; i < d.size(); ++i) d[i] = f16_to_f32(scales[i]);
  }
};

template <class Tiles>
struct Q8Step {
  const TileRows* x;
  int row0, blocks;
  const SignedGroup* w[2];
  int32_t (*dots)[kTileRows][16];
  float (*acc)[kTileRows][16];
  template <int MT, int NB>
  void run() {
    std::memset(acc, 0, sizeof(float) * 4 * kTileRows * 16);
    const size_t lda = size_t(blocks) * 32;
    for (int b = 0; b < blocks; ++b) {
      zero_results<Tiles, MT, NB>();
      load_a<Tiles, MT>(x->a.data() + size_t(row0) * lda + size_t(b) * 32, lda, kTileRows * lda);
      const void* blocks_b[2] = {w[0]->b.data() + size_t(b) * 512, w[NB - 1]->b.data() + size_t(b) * 512};
      load_b<Tiles, NB>(blocks_b, 64);
      multiply_step<Tiles, true, MT, NB>();
      store_results<Tiles, MT, NB>(dots);
      // The q8 kernels' float step, block after block: one fused multiply-add, as the SIMD paths
      // write it (_mm512_fmadd_ps) and the plain kernel's expression contracts to where FMA is
      // compiled in; std::fma, so that a build without FMA gives the SIMD paths' floats too.
      for (int i = 0; i < MT; ++i)
        for (int j = 0; j < NB; ++j)
          for (int r = 0; r < kTileRows; ++r) {
            const float dx = x->d[size_t(row0 + 16 * i + r) * blocks + size_t(b)];
            const int32_t* off = w[j]->offset.data() + size_t(b) * 16;
            const float* dw = w[j]->d.data() + size_t(b) * 16;
            float* out = acc[2 * i + j][r];
            const int32_t* dot = dots[2 * i + j][r];
            for (int c = 0; c < 16; ++c) out[c] = std::fma(float(dot[c] - off[c]), dw[c] * dx, out[c]);
          }
    }
  }
};

constexpr size_t kMaxProducts = 4;

template <class Tiles>
void matmul_q8_tiles(const float* x, int T, int K, const Projection* products, size_t count) {
  if (count > kMaxProducts) throw std::invalid_argument("amx_matmul_q8: more products than kMaxProducts");
  const int blocks = (K + 31) / 32, m_tiles = (T + kTileRows - 1) / kTileRows;
  static thread_local TileRows rows;  // grows once, then reused
  rows.fill(x, T, K, m_tiles * kTileRows);
  const TileRows* const xs = &rows;  // this thread's: thread_local names another inside the loop
  int first_item[kMaxProducts + 1] = {};  // product i's items (pairs of 16-row groups)
  size_t work = 0;
  for (size_t i = 0; i < count; ++i) {
    first_item[i + 1] = first_item[i] + ((products[i].N + 15) / 16 + 1) / 2;
    work += size_t(T) * size_t(products[i].N) * size_t(K);
  }
  const TileConfig config = all_tiles(32, 8);
  parallel_for_if(work > 32768, first_item[count], [&](int item) {
    size_t i = 0;
    while (item >= first_item[i + 1]) ++i;
    const Projection& p = products[i];
    const int g0 = 2 * (item - first_item[i]), nb = std::min(2, (p.N + 15) / 16 - g0);
    static thread_local SignedGroup groups[2];
    for (int j = 0; j < nb; ++j)
      groups[j].fill(p.w->q8 + size_t(g0 + j) * blocks * 512, p.w->q8_scales + size_t(g0 + j) * blocks * 16, blocks);
    alignas(64) int32_t dots[4][kTileRows][16];
    alignas(64) float acc[4][kTileRows][16];
    Tiles::configure(config);
    for (int mi = 0; mi < m_tiles; mi += 2) {
      Q8Step<Tiles> step{xs, mi * kTileRows, blocks, {&groups[0], &groups[nb - 1]}, dots, acc};
      const int mt = std::min(2, m_tiles - mi);
      with_shape(mt, nb, step);
      add_results(p.y, p.N, T, p.N, mi * kTileRows, g0 * 16, mt, nb, acc, p.accumulate);
    }
    Tiles::release();
  });
}

}  // namespace

void amx_matmul_bf16(TileImpl impl, float* y, const float* x, const uint16_t* packed, int T, int K, int N,
                     bool accumulate) {
#if defined(__x86_64__)
  if (impl == TileImpl::instructions) return matmul_bf16_tiles<TileIntrinsics>(y, x, packed, T, K, N, accumulate);
#endif
  if (impl == TileImpl::instructions) throw std::invalid_argument("amx_matmul_bf16: no AMX instructions on this build");
  matmul_bf16_tiles<TileModel>(y, x, packed, T, K, N, accumulate);
}

void amx_matmul_q8(TileImpl impl, const float* x, int T, int K, const Projection* products, size_t count) {
#if defined(__x86_64__)
  if (impl == TileImpl::instructions) return matmul_q8_tiles<TileIntrinsics>(x, T, K, products, count);
#endif
  if (impl == TileImpl::instructions) throw std::invalid_argument("amx_matmul_q8: no AMX instructions on this build");
  matmul_q8_tiles<TileModel>(x, T, K, products, count);
}

std::string amx_refusal(bool tile, bool bf16, bool int8, int (*request_permission)()) {
  if (!tile) return "no AMX-TILE on this CPU";
  if (!bf16 || !int8) return std::string("AMX without ") + (!bf16 ? "AMX-BF16" : "AMX-INT8");
  const int error = request_permission();
  if (error) return std::string("the OS refused AMX's tile data (arch_prctl ARCH_REQ_XCOMP_PERM: ") + std::strerror(error) + ")";
  return "";
}

int request_tile_permission() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return errno;
  unsigned long granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0) return errno;
  return granted & (1ul << kXfeatureXtiledata) ? 0 : EPERM;
#else
  return ENOSYS;
#endif
}

}  // namespace pert
