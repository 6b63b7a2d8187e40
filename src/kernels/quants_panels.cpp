// Panels: Q4_K, Q5_K and Q6_K rows (and the legacy Q4_0, Q5_0, Q4_1, Q5_1, and MXFP4) repacked 8 at a time (after ik_llama.cpp's
// row-interleaved Q4_K_R4 / Q4_0_R8, laid out here for AVX2's vpmaddubsw). Why: a row kernel
// multiplies one row's 32 codes by 32 values of x and needs one vpmaddwd per 32 products to
// apply the sub-block's scale; in a panel, 4 bytes of x broadcast meet the same 4 positions of
// 8 rows in one vpmaddubsw, a whole sub-block's products add up in int16 first, and one
// vpmaddwd applies the 8 rows' scales. The numbers are GGML's, unchanged: the integer sums are
// the row kernels', the floats added in the same order, so the result is the same float.
//
// One super-block of a panel (8 rows × 256 values), in bytes:
//   Q4_K, Q5_K [1184, 1440]
//     d[8] F16 | dmin[8] F16 | scales [4][8][2] | mins [4][8][2] | codes [32][32] | Q5_K: fifth [8][32]
//   Q6_K [1680]
//     d[8] F16 | scales int8 [8][8][2] | codes [32][32] | high [16][32]
// scales [p][i][e]: row i's scale of sub-block 2p + e (unpacked from GGML's 6 bits; Q6_K's int8),
// mins alike. codes [u][32]: per 8 values u of the super-block, byte 4i + l holds row i's value
// 8u + l in its low nibble and 8u + 4 + l in its high one (the codes' low 4 bits). Q5_K's fifth
// bits, per sub-block j of 32: bit g of byte 4i + l is that of row i's value 32j + 4g + l;
// Q6_K's top two bits, per sub-block j of 16: bits 2g, 2g + 1 of byte 4i + l are those of row
// i's value 16j + 4g + l.
// The legacy types, per block of 32 values (8 rows): d[8] F16 | Q4_1, Q5_1: m[8] F16 | codes
// [4][32] as above | Q5_0, Q5_1: fifth [32] as Q5_K's: Q4_0 [144], Q5_0 [176], Q4_1 [160],
// Q5_1 [192] bytes, each 8 rows' blocks exactly. MXFP4: e[8] | codes [4][32] (its nibbles, the
// codes 0..15 before the table): 136 bytes.
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/quants.hpp"
#include "kernels/quants_blocks.hpp"
#include "pert/error.hpp"

namespace pert {

using namespace quants;

namespace {

constexpr int R8 = kPanelRows;

// The code (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63) of value v of a GGML super-block, and its inverse.
int k_code(BlockType type, const uint8_t* b, int v) {
  if (type == BlockType::Q6_K) {
    const int h = v / 128, p = v % 128 / 32, l = v % 32;
    return (b[64 * h + l + 32 * (p % 2)] >> (4 * (p / 2)) & 15) | (b[128 + 32 * h + l] >> (2 * p) & 3) << 4;
  }
  const bool five = type == BlockType::Q5_K;
  const int nibble = b[(five ? 48 : 16) + 32 * (v / 64) + v % 32] >> (4 * (v % 64 / 32)) & 15;
  return five ? nibble | (b[16 + v % 32] >> (v / 32) & 1) << 4 : nibble;
}
void set_k_code(BlockType type, uint8_t* b, int v, int code) {  // b's code bytes start zeroed
  if (type == BlockType::Q6_K) {
    const int h = v / 128, p = v % 128 / 32, l = v % 32;
    b[64 * h + l + 32 * (p % 2)] |= uint8_t((code & 15) << (4 * (p / 2)));
    b[128 + 32 * h + l] |= uint8_t((code >> 4) << (2 * p));
    return;
  }
  const bool five = type == BlockType::Q5_K;
  b[(five ? 48 : 16) + 32 * (v / 64) + v % 32] |= uint8_t((code & 15) << (4 * (v % 64 / 32)));
  if (five) b[16 + v % 32] |= uint8_t((code >> 4) << (v / 32));
}

// GGML's 12 bytes of 6-bit scales and mins from the 8 of each (scale_min_k4's inverse).
void pack_scale_min_k4(const uint8_t sc[8], const uint8_t mn[8], uint8_t* packed) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = uint8_t(sc[j] | (sc[j + 4] >> 4) << 6);
    packed[j + 4] = uint8_t(mn[j] | (mn[j + 4] >> 4) << 6);
    packed[j + 8] = uint8_t((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
  }
}

bool is_legacy(BlockType t) {
  return t == BlockType::Q4_0 || t == BlockType::Q5_0 || t == BlockType::Q4_1 || t == BlockType::Q5_1 ||
         t == BlockType::MXFP4;
}
int panel_unit(BlockType t) { return is_legacy(t) ? QK : QK_K; }  // values of a row in one panel block

// A legacy block's code of value v (Q4_0/Q4_1 0..15, Q5_0/Q5_1 0..31), and its inverse.
struct LegacyFields {
  size_t m, qh, qs;  // byte offsets (m and qh 0 when the type has none)
};
LegacyFields legacy_fields(BlockType t) {
  switch (t) {
    case BlockType::Q4_0: return {0, 0, 2};
    case BlockType::Q5_0: return {0, 2, 6};
    case BlockType::Q4_1: return {2, 0, 4};
    case BlockType::MXFP4: return {0, 0, 1};
    default: return {2, 4, 8};  // Q5_1
  }
}
int legacy_code(BlockType t, const uint8_t* b, int v) {
  const LegacyFields f = legacy_fields(t);
  const int nibble = b[f.qs + size_t(v % 16)] >> (4 * (v / 16)) & 15;
  return f.qh ? nibble | int(load_u32(b + f.qh) >> v & 1) << 4 : nibble;
}
void set_legacy_code(BlockType t, uint8_t* b, int v, int code) {  // b's code bytes start zeroed
  const LegacyFields f = legacy_fields(t);
  b[f.qs + size_t(v % 16)] |= uint8_t((code & 15) << (4 * (v / 16)));
  if (f.qh) {
    const uint32_t qh = load_u32(b + f.qh) | uint32_t(code >> 4) << v;
    std::memcpy(b + f.qh, &qh, 4);
  }
}

// Row i's n codes between its block (get(v) reads code v, set(v, code) writes it into zeroed
// bytes) and a panel (super-)block: the low 4 bits in `codes`, the top `bits` bits of each value
// in `high`, per span of `span` values (a group of 4 values g of the span at bits g·bits).
template <bool Unpack, class Get, class Set>
void convert_codes(uint8_t* p, const PanelLayout& at, int i, int n, int span, int bits, Get get, Set set) {
  for (int v = 0; v < n; ++v) {
    uint8_t& nib = p[at.codes + size_t(v / 8) * 32 + size_t(4 * i + v % 4)];
    const int nib_shift = 4 * (v % 8 / 4), high_shift = bits * (v % span / 4);
    uint8_t* high = at.high ? &p[at.high + size_t(v / span) * 32 + size_t(4 * i + v % 4)] : nullptr;
    if constexpr (Unpack) {
      int code = nib >> nib_shift & 15;
      if (high) code |= (*high >> high_shift & ((1 << bits) - 1)) << 4;
      set(v, code);
    } else {
      const int code = get(v);
      nib = uint8_t(nib | (code & 15) << nib_shift);
      if (high) *high = uint8_t(*high | (code >> 4) << high_shift);
    }
  }
}

// Rows' super-block s (row i at rows + i·row_bytes) into panel super-block p, or back (Unpack).
template <bool Unpack>
void convert(BlockType type, uint8_t* p, uint8_t* rows, size_t row_bytes, int s) {
  const PanelLayout at = panel_layout(type);
  const bool six = type == BlockType::Q6_K;
  const size_t bytes = block_type_info(type).block_bytes;
  for (int i = 0; i < R8; ++i) {
    uint8_t* b = rows + size_t(i) * row_bytes + size_t(s) * bytes;
    uint8_t* d = p + 2 * i;  // d[8] first, dmin[8] after (Q4_K, Q5_K)
    const size_t d_at = six ? 208 : 0;
    if constexpr (Unpack) {
      std::memset(b, 0, bytes);
      std::memcpy(b + d_at, d, 2);
      if (!six) std::memcpy(b + 2, d + 16, 2);
    } else {
      std::memcpy(d, b + d_at, 2);
      if (!six) std::memcpy(d + 16, b + 2, 2);
    }
    const int subs = six ? 16 : 8;
    uint8_t sc[16], mn[8] = {};
    if constexpr (!Unpack) {
      if (six) std::memcpy(sc, b + 192, 16);
      else scale_min_k4(b + 4, sc, mn);
    }
    for (int j = 0; j < subs; ++j) {  // [pair][row][2]
      const size_t pair_at = size_t(j / 2) * 16 + size_t(i) * 2 + size_t(j % 2);
      if constexpr (Unpack) {
        sc[j] = p[at.scales + pair_at];
        if (!six) mn[j] = p[at.mins + pair_at];
      } else {
        p[at.scales + pair_at] = sc[j];
        if (!six) p[at.mins + pair_at] = mn[j];
      }
    }
    if constexpr (Unpack) {
      if (six) std::memcpy(b + 192, sc, 16);
      else pack_scale_min_k4(sc, mn, b + 4);
    }
    convert_codes<Unpack>(p, at, i, QK_K, six ? 16 : 32, six ? 2 : 1, [&](int v) { return k_code(type, b, v); },
                          [&](int v, int code) { set_k_code(type, b, v, code); });
  }
}

// A legacy type's block b of 8 rows into a panel block, or back: d[8] (and m[8]) F16 (MXFP4's
// e[8] bytes), the codes as the K-quants' (4 values of a row in each 4 bytes) and Q5's fifth bits
// as Q5_K's.
template <bool Unpack>
void convert_legacy(BlockType type, uint8_t* p, uint8_t* rows, size_t row_bytes, int b) {
  const PanelLayout at = panel_layout(type);
  const LegacyFields f = legacy_fields(type);
  const size_t bytes = block_type_info(type).block_bytes, scale = type == BlockType::MXFP4 ? 1 : 2;
  for (int i = 0; i < R8; ++i) {
    uint8_t* blk = rows + size_t(i) * row_bytes + size_t(b) * bytes;
    if constexpr (Unpack) {
      std::memset(blk, 0, bytes);
      std::memcpy(blk, p + scale * size_t(i), scale);
      if (f.m) std::memcpy(blk + f.m, p + at.mins + 2 * i, 2);
    } else {
      std::memcpy(p + scale * size_t(i), blk, scale);
      if (f.m) std::memcpy(p + at.mins + 2 * i, blk + f.m, 2);
    }
    convert_codes<Unpack>(p, at, i, QK, QK, 1, [&](int v) { return legacy_code(type, blk, v); },
                          [&](int v, int code) { set_legacy_code(type, blk, v, code); });
  }
}

// The plain kernel on a panel: its rows back as GGML's blocks, then the plain row kernel on each,
// which is what makes every path's float the row kernels' float.
template <BlockType Type, int R>
void panel_plain(const uint8_t* panel, const QuantizedX& x, int t0, float* out) {
  static thread_local std::vector<uint8_t> rows;
  const size_t row_bytes = block_row_bytes(Type, x.K);
  rows.resize(row_bytes * R8);
  unpack_panel(int(Type), panel, x.K, rows.data(), row_bytes);
  const RowKernel kernel = plain_kernels(int(Type)).rows[R - 1];
  for (int i = 0; i < R8; ++i) {
    float y[kMaxRows];
    kernel(rows.data() + size_t(i) * row_bytes, x, t0, y);
    for (int r = 0; r < R; ++r) out[r * R8 + i] = y[r];
  }
}
template <BlockType T>
KernelSet plain_set() {
  return {{panel_plain<T, 1>, panel_plain<T, 2>, panel_plain<T, 3>, panel_plain<T, 4>}};
}

}  // namespace

namespace quants {

void unpack_panel(int ggml_type, const uint8_t* panel, int K, uint8_t* rows, size_t row_bytes) {
  const BlockType type = BlockType(ggml_type);
  const size_t bytes = panel_layout(type).bytes;
  for (int s = 0; s < K / panel_unit(type); ++s) {  // convert<true> only reads the panel
    uint8_t* block = const_cast<uint8_t*>(panel) + size_t(s) * bytes;
    if (is_legacy(type)) convert_legacy<true>(type, block, rows, row_bytes, s);
    else convert<true>(type, block, rows, row_bytes, s);
  }
}

KernelSet plain_panel_kernels(int ggml_type) {
  switch (BlockType(ggml_type)) {
    case BlockType::Q4_K: return plain_set<BlockType::Q4_K>();
    case BlockType::Q5_K: return plain_set<BlockType::Q5_K>();
    case BlockType::Q6_K: return plain_set<BlockType::Q6_K>();
    case BlockType::Q4_0: return plain_set<BlockType::Q4_0>();
    case BlockType::Q5_0: return plain_set<BlockType::Q5_0>();
    case BlockType::Q4_1: return plain_set<BlockType::Q4_1>();
    case BlockType::Q5_1: return plain_set<BlockType::Q5_1>();
    case BlockType::MXFP4: return plain_set<BlockType::MXFP4>();
    default: return {};
  }
}

}  // namespace quants

bool has_panels(BlockType type) { return panel_layout(type).bytes != 0; }

size_t panel_row_bytes(BlockType type, int K) {
  if (!has_panels(type)) throw Error(std::string(block_type_info(type).name) + " has no panels");
  block_row_bytes(type, K);  // throws for a K that is not whole (super-)blocks
  return panel_layout(type).bytes * size_t(K / panel_unit(type)) / R8;
}

void repack_panels(BlockType type, const uint8_t* rows, size_t row_stride, int N, int K, uint8_t* panels) {
  const size_t row_bytes = panel_row_bytes(type, K), bytes = panel_layout(type).bytes;
  if (N % R8 != 0) throw Error("repack_panels: " + std::to_string(N) + " rows are not whole panels of 8");
  parallel_for_if(size_t(N) * size_t(K) > 65536, N / R8, [&](int panel_index) {  // a 1B model's in a second or two
    const size_t n = size_t(panel_index) * R8;
    uint8_t* panel = panels + n * row_bytes;
    std::memset(panel, 0, row_bytes * R8);
    uint8_t* const first = const_cast<uint8_t*>(rows) + n * row_stride;  // convert<false> only reads the rows
    for (int s = 0; s < K / panel_unit(type); ++s) {
      if (is_legacy(type)) convert_legacy<false>(type, panel + size_t(s) * bytes, first, row_stride, s);
      else convert<false>(type, panel + size_t(s) * bytes, first, row_stride, s);
    }
  });
}

}  // namespace pert
