// Prefill on GGML's block panels on AMX tiles (amx_blocks.hpp: the operands and why), a
// template over the tile interface of amx_tiles.hpp. One step holds up to 2 × 2 result tiles:
//   tiles 0..3  C, result tile (i, j) = 2·i + j: weight rows 16·i of the item, x tile j
//   tiles 4, 5  A: the item's weight rows 0..15 and 16..31, one sub-block
//   tiles 6, 7  B: x's rows 0..15 and 16..31 of the step, the same sub-block
// A work item is 32 weight rows (four panels; fewer at a product's end) of one product: it
// decodes their codes and scales once, configures the tiles on its thread, runs every 32 rows
// of x over all the (super-)blocks and releases the tiles.
#include "kernels/amx_blocks.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/amx_tiles.hpp"
#include "kernels/parallel.hpp"

namespace pert {

using namespace quants;

namespace {

constexpr int kTileRows = 16;
constexpr int kItemRows = 2 * kTileRows;  // weight rows of a work item: two A tiles
constexpr size_t kMaxProducts = 4;

constexpr bool is_k_quant(BlockType t) { return t == BlockType::Q4_K || t == BlockType::Q5_K || t == BlockType::Q6_K; }
constexpr int unit_values(BlockType t) { return is_k_quant(t) ? QK_K : QK; }    // a (super-)block
constexpr int sub_values(BlockType t) { return t == BlockType::Q6_K ? 16 : 32; }  // a sub-block: one tdpbusd's K

// x's int8 values as B tiles: [tiles of 16 rows][K/4 quads][16 rows][4 bytes], zero past T.
struct XTiles {
  std::vector<int8_t> b;
  int quads = 0;
  void fill(const QuantizedX& x, int T) {
    quads = x.K / 4;
    const int tiles = (T + kTileRows - 1) / kTileRows;
    b.assign(size_t(tiles) * size_t(quads) * 64, int8_t(0));
    int8_t* const out = b.data();  // the caller's buffer: thread_local names another inside the loop
    const int q = quads;
    parallel_for_if(size_t(T) * size_t(x.K) > 65536, T, [&](int t) {
      int8_t* row = out + size_t(t / kTileRows) * size_t(q) * 64 + size_t(t % kTileRows) * 4;
      const int8_t* from = x.q + size_t(t) * size_t(x.K);
      for (int k = 0; k < q; ++k) std::memcpy(row + size_t(k) * 64, from + 4 * k, 4);
    });
  }
  // The B tile of x tile `tile` from value `value` on (a sub-block's first value).
  const int8_t* at(int tile, int value) const { return b.data() + (size_t(tile) * size_t(quads) + size_t(value / 4)) * 64; }
};

// A work item's weight rows, decoded from their panels ([(super-)block][kItemRows rows][...]);
// rows past the item's end stay zero.
struct ItemWeights {
  std::vector<uint8_t> codes;  // [values]: A's bytes (unsigned codes; MXFP4's biased by 12)
  std::vector<int32_t> scales;  // [sub-blocks]: the K-quants' sub-block scales (Q6_K's signed)
  std::vector<int32_t> mins;   // [8]: Q4_K's and Q5_K's sub-block mins
  std::vector<float> d, m;     // d (MXFP4: half the E8M0 scale); dmin (Q4_K, Q5_K) or m (Q4_1, Q5_1)

  void fill(BlockType type, const BlockMatrix& w, int n0, int rows, int blocks) {
    const int unit = unit_values(type), subs = unit / sub_values(type);
    const size_t slots = size_t(blocks) * kItemRows;
    codes.assign(slots * size_t(unit), 0);
    scales.assign(slots * size_t(subs), 0);
    mins.assign(slots * 8, 0);
    d.assign(slots, 0.0f);
    m.assign(slots, 0.0f);
    const size_t bytes = panel_layout(type).bytes;
    for (int panel = 0; panel < rows / kPanelRows; ++panel) {
      const uint8_t* p = w.data + size_t(n0 + kPanelRows * panel) * w.row_stride;
      for (int s = 0; s < blocks; ++s, p += bytes) decode(type, p, size_t(s) * kItemRows + size_t(kPanelRows * panel));
    }
  }

  // One panel (super-)block's 8 rows into slots first..first + 7 (layout: quants_panels.cpp).
  void decode(BlockType type, const uint8_t* p, size_t first) {
    const PanelLayout at = panel_layout(type);
    const int unit = unit_values(type), subs = unit / sub_values(type);
    const bool five = type == BlockType::Q5_0 || type == BlockType::Q5_1 || type == BlockType::Q5_K;
    for (int i = 0; i < kPanelRows; ++i) {
      const size_t slot = first + size_t(i);
      uint8_t* c = codes.data() + slot * size_t(unit);
      for (int u = 0; u < unit / 8; ++u)  // byte 4i + l of 8 values u: values 8u + l (low), 8u + 4 + l (high)
        for (int l = 0; l < 4; ++l) {
          const uint8_t byte = p[at.codes + size_t(32 * u + 4 * i + l)];
          c[8 * u + l] = byte & 15;
          c[8 * u + 4 + l] = uint8_t(byte >> 4);
        }
      if (five)  // per 32 values j: bit g of byte 4i + l is value 32j + 4g + l's fifth
        for (int j = 0; j < unit / 32; ++j)
          for (int l = 0; l < 4; ++l) {
            const int h = p[at.high + size_t(32 * j + 4 * i + l)];
            for (int g = 0; g < 8; ++g) c[32 * j + 4 * g + l] |= uint8_t((h >> g & 1) << 4);
          }
      if (type == BlockType::Q6_K)  // per 16 values j: bits 2g, 2g + 1 are value 16j + 4g + l's top two
        for (int j = 0; j < unit / 16; ++j)
          for (int l = 0; l < 4; ++l) {
            const int h = p[at.high + size_t(32 * j + 4 * i + l)];
            for (int g = 0; g < 4; ++g) c[16 * j + 4 * g + l] |= uint8_t((h >> (2 * g) & 3) << 4);
          }
      if (type == BlockType::MXFP4)
        for (int v = 0; v < unit; ++v) c[v] = uint8_t(kMxfp4Doubled[c[v]] + 12);
      d[slot] = type == BlockType::MXFP4 ? mxfp4_half_scale(p[i]) : load_f16(p + 2 * i);
      if (type == BlockType::Q4_1 || type == BlockType::Q5_1) m[slot] = load_f16(p + at.mins + 2 * i);
      if (type == BlockType::Q4_K || type == BlockType::Q5_K) m[slot] = load_f16(p + 16 + 2 * i);
      if (is_k_quant(type))
        for (int j = 0; j < subs; ++j) {  // [pair][row][2]
          const size_t pair_at = size_t(j / 2) * 16 + size_t(2 * i + j % 2);
          const uint8_t scale = p[at.scales + pair_at];
          scales[slot * size_t(subs) + size_t(j)] = type == BlockType::Q6_K ? int8_t(scale) : scale;
          if (type != BlockType::Q6_K) mins[slot * 8 + size_t(j)] = p[at.mins + pair_at];
        }
    }
  }
};

// One sub-block's products for NB weight tiles and MT x tiles: C(i, j) = A(i)·B(j) from zero,
// stored to part[2·i + j] ([weight row][row of x] int32).
template <class Tiles, int NB, int MT>
void sub_block_products(const uint8_t* a, size_t a_stride, const int8_t* b0, const int8_t* b1,
                        int32_t (*part)[kTileRows][kTileRows]) {
  Tiles::template zero<0>();
  if constexpr (MT > 1) Tiles::template zero<1>();
  if constexpr (NB > 1) Tiles::template zero<2>();
  if constexpr (NB > 1 && MT > 1) Tiles::template zero<3>();
  Tiles::template load<4>(a, a_stride);
  if constexpr (NB > 1) Tiles::template load<5>(a + kTileRows * a_stride, a_stride);
  Tiles::template load<6>(b0, 64);
  if constexpr (MT > 1) Tiles::template load<7>(b1, 64);
  Tiles::template dpbusd<0, 4, 6>();
  if constexpr (MT > 1) Tiles::template dpbusd<1, 4, 7>();
  if constexpr (NB > 1) Tiles::template dpbusd<2, 5, 6>();
  if constexpr (NB > 1 && MT > 1) Tiles::template dpbusd<3, 5, 7>();
  Tiles::template store<0>(part[0], 64);
  if constexpr (MT > 1) Tiles::template store<1>(part[1], 64);
  if constexpr (NB > 1) Tiles::template store<2>(part[2], 64);
  if constexpr (NB > 1 && MT > 1) Tiles::template store<3>(part[3], 64);
}

// What an item's steps read.
struct Item {
  const ItemWeights* w;
  int rows;  // weight rows (a multiple of 8, at most kItemRows)
  const XTiles* xt;
  const QuantizedX* x;
  int T;
};

// The float steps of (super-)block s for weight slot `slot` and row of x t, from the block's
// int32 sum `dot` (Σ_j s_j·Σ c·qx for the K-quants, Σ c·qx for the legacy types): the plain
// kernels' (quants_dot.cpp: legacy_plain, k_plain), in their order.
template <BlockType Type>
void add_block(Lanes& lanes, int s, int32_t dot, const ItemWeights& w, size_t slot, const QuantizedX& x, int t) {
  const int nb = x.K / unit_values(Type);
  const size_t xb = size_t(t) * size_t(nb) + size_t(s);
  const float dx = x.d[xb];
  if constexpr (Type == BlockType::Q6_K) {
    int32_t offset = 0;  // Σ_j s_j·Σ_j qx
    for (int j = 0; j < 16; ++j) offset += w.scales[slot * 16 + size_t(j)] * x.bsum[xb * 16 + size_t(j)];
    lanes.add(s, float(dot - 32 * offset), w.d[slot] * dx);
  } else if constexpr (is_k_quant(Type)) {
    int32_t offset = 0;  // Σ_j m_j·Σ_j qx
    for (int j = 0; j < 8; ++j)
      offset += w.mins[slot * 8 + size_t(j)] * (x.bsum[xb * 16 + size_t(2 * j)] + x.bsum[xb * 16 + size_t(2 * j + 1)]);
    lanes.add(s, float(dot), w.d[slot] * dx);
    lanes.add(s, float(-offset), w.m[slot] * dx);
  } else {
    constexpr bool affine = Type == BlockType::Q4_1 || Type == BlockType::Q5_1;
    constexpr int bias = Type == BlockType::Q4_0 ? 8 : Type == BlockType::Q5_0 ? 16 : Type == BlockType::MXFP4 ? 12 : 0;
    lanes.add(s, float(dot - bias * x.sum[xb]), w.d[slot] * dx);
    if constexpr (affine) lanes.add(s, float(x.sum[xb]), w.m[slot] * dx);
  }
}

// Rows of x tiles x0 .. x0 + MT − 1 against the item's NB weight tiles, every (super-)block:
// out[slot][r] for the rows r of x from 16·x0 on.
template <class Tiles, BlockType Type, int NB, int MT>
void run_step(const Item& item, int x0, float (*out)[2 * kTileRows]) {
  constexpr int unit = unit_values(Type), sub = sub_values(Type), subs = unit / sub;
  const int blocks = item.x->K / unit, t0 = kTileRows * x0;
  const int w_rows = std::min(item.rows, NB * kTileRows), x_rows = std::min(item.T - t0, MT * kTileRows);
  Lanes lanes[kItemRows][2 * kTileRows];
  alignas(64) int32_t part[4][kTileRows][kTileRows];
  int32_t dot[4][kTileRows][kTileRows];
  for (int s = 0; s < blocks; ++s) {
    const uint8_t* a = item.w->codes.data() + size_t(s) * kItemRows * unit;
    for (int j = 0; j < subs; ++j) {
      const int value = s * unit + j * sub;
      sub_block_products<Tiles, NB, MT>(a + j * sub, unit, item.xt->at(x0, value), item.xt->at(x0 + MT - 1, value), part);
      for (int i = 0; i < NB; ++i)  // Σ_j s_j·(the sub-block's sum) in int32, as the plain kernel (legacy: s_0 = 1)
        for (int r = 0; r < kTileRows; ++r) {
          const size_t slot = size_t(s) * kItemRows + size_t(kTileRows * i + r);
          const int32_t scale = subs == 1 ? 1 : item.w->scales[slot * subs + size_t(j)];
          for (int c = 0; c < MT; ++c)
            for (int n = 0; n < kTileRows; ++n)
              dot[2 * i + c][r][n] = (j ? dot[2 * i + c][r][n] : 0) + scale * part[2 * i + c][r][n];
        }
    }
    for (int m = 0; m < w_rows; ++m)
      for (int r = 0; r < x_rows; ++r)
        add_block<Type>(lanes[m][r], s, dot[2 * (m / kTileRows) + r / kTileRows][m % kTileRows][r % kTileRows], *item.w,
                        size_t(s) * kItemRows + size_t(m), *item.x, t0 + r);
  }
  for (int m = 0; m < w_rows; ++m)
    for (int r = 0; r < x_rows; ++r) out[m][r] = lanes[m][r].sum();
}

template <class Tiles, BlockType Type>
struct Steps {
  const Item* item;
  int x0;
  float (*out)[2 * kTileRows];
  template <int NB, int MT>
  void run() {
    run_step<Tiles, Type, NB, MT>(*item, x0, out);
  }
};

// One item of product p: weight rows n0 .. n0 + item.rows − 1, every row of x.
template <class Tiles, BlockType Type>
void run_item(const Item& item, const BlockProduct& p, int n0) {
  TileConfig config;
  for (int t = 0; t < 4; ++t) config.set(t, kTileRows, 64);
  for (int t = 4; t < 6; ++t) config.set(t, kTileRows, sub_values(Type));
  for (int t = 6; t < 8; ++t) config.set(t, sub_values(Type) / 4, 64);
  const int nb = (item.rows + kTileRows - 1) / kTileRows, x_tiles = (item.T + kTileRows - 1) / kTileRows;
  float out[kItemRows][2 * kTileRows];
  Tiles::configure(config);
  for (int x0 = 0; x0 < x_tiles; x0 += 2) {
    const int mt = std::min(2, x_tiles - x0);
    Steps<Tiles, Type> steps{&item, x0, out};
    if (nb > 1 && mt > 1) steps.template run<2, 2>();
    else if (nb > 1) steps.template run<2, 1>();
    else if (mt > 1) steps.template run<1, 2>();
    else steps.template run<1, 1>();
    for (int r = 0; r < std::min(item.T - kTileRows * x0, 2 * kTileRows); ++r)
      for (int m = 0; m < item.rows; ++m) {
        float& y = p.y[size_t(kTileRows * x0 + r) * size_t(p.N) + size_t(n0 + m)];
        y = p.accumulate ? y + out[m][r] : out[m][r];
      }
  }
  Tiles::release();
}

template <class Tiles>
void run_item_of(BlockType type, const Item& item, const BlockProduct& p, int n0) {
  switch (type) {
    case BlockType::Q4_0: return run_item<Tiles, BlockType::Q4_0>(item, p, n0);
    case BlockType::Q4_1: return run_item<Tiles, BlockType::Q4_1>(item, p, n0);
    case BlockType::Q5_0: return run_item<Tiles, BlockType::Q5_0>(item, p, n0);
    case BlockType::Q5_1: return run_item<Tiles, BlockType::Q5_1>(item, p, n0);
    case BlockType::Q4_K: return run_item<Tiles, BlockType::Q4_K>(item, p, n0);
    case BlockType::Q5_K: return run_item<Tiles, BlockType::Q5_K>(item, p, n0);
    case BlockType::Q6_K: return run_item<Tiles, BlockType::Q6_K>(item, p, n0);
    case BlockType::MXFP4: return run_item<Tiles, BlockType::MXFP4>(item, p, n0);
    default: throw std::invalid_argument(std::string("amx_matmul_blocks: no panels for ") + block_type_info(type).name);
  }
}

template <class Tiles>
void matmul_blocks_tiles(const QuantizedX& x_legacy, const QuantizedX& x_k, int T, const BlockProduct* products,
                         size_t count) {
  if (count > kMaxProducts) throw std::invalid_argument("amx_matmul_blocks: more products than kMaxProducts");
  bool legacy = false, k_quant = false;
  for (size_t i = 0; i < count; ++i) {
    const BlockMatrix& w = *products[i].w;
    if (!w.panels || !has_panels(w.type) || products[i].N % kPanelRows != 0)
      throw std::invalid_argument(std::string("amx_matmul_blocks: a product of ") + block_type_info(w.type).name +
                                  " not in whole panels of 8 rows");
    (is_k_quant(w.type) ? k_quant : legacy) = true;
  }
  if (T <= 0) return;
  static thread_local XTiles legacy_tiles, k_tiles;  // grow once, then reused
  if (legacy) legacy_tiles.fill(x_legacy, T);
  if (k_quant) k_tiles.fill(x_k, T);
  const XTiles* const tiles_legacy = &legacy_tiles;  // this thread's: thread_local names another inside the loop
  const XTiles* const tiles_k = &k_tiles;
  int first_item[kMaxProducts + 1] = {};  // product i's items: [first_item[i], first_item[i + 1])
  size_t work = 0;
  for (size_t i = 0; i < count; ++i) {
    first_item[i + 1] = first_item[i] + (products[i].N + kItemRows - 1) / kItemRows;
    work += size_t(T) * size_t(products[i].N) * size_t(x_legacy.K ? x_legacy.K : x_k.K);
  }
  parallel_for_if(work > 32768 && first_item[count] > 1, first_item[count], [&](int index) {
    size_t i = 0;
    while (index >= first_item[i + 1]) ++i;
    const BlockProduct& p = products[i];
    const BlockType type = p.w->type;
    const bool k = is_k_quant(type);
    const QuantizedX& x = k ? x_k : x_legacy;
    const int n0 = kItemRows * (index - first_item[i]), rows = std::min(kItemRows, p.N - n0);
    static thread_local ItemWeights weights;
    weights.fill(type, *p.w, n0, rows, x.K / unit_values(type));
    const Item item{&weights, rows, k ? tiles_k : tiles_legacy, &x, T};
    run_item_of<Tiles>(type, item, p, n0);
  });
}

}  // namespace

void amx_matmul_blocks(TileImpl impl, const QuantizedX& x_legacy, const QuantizedX& x_k, int T,
                       const BlockProduct* products, size_t count) {
#if defined(__x86_64__)
  if (impl == TileImpl::instructions) return matmul_blocks_tiles<TileIntrinsics>(x_legacy, x_k, T, products, count);
#endif
  if (impl == TileImpl::instructions) throw std::invalid_argument("amx_matmul_blocks: no AMX instructions on this build");
  matmul_blocks_tiles<TileModel>(x_legacy, x_k, T, products, count);
}

}  // namespace pert
