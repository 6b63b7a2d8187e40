// GGML's block layouts as byte offsets, and what the quantizers, dequantizers and kernels of
// src/quants*.cpp share. Blocks are read in place from a mapped file that promises no alignment,
// so the F16 fields are memcpy'd rather than read through structs. Per block (bytes):
//   Q8_0 [34]   d | q int8[32]                       value i: d·q[i]
//   Q4_0 [18]   d | qs[16]                           d·(n_i − 8); n_i: low nibble of qs[i] for
//                                                    i < 16, high nibble of qs[i − 16] above
//   Q4_1 [20]   d, m | qs[16]                        d·n_i + m
//   Q5_0 [22]   d | qh u32 | qs[16]                  d·(n_i + 16·bit i of qh − 16)
//   Q5_1 [24]   d, m | qh u32 | qs[16]               d·(n_i + 16·bit i of qh) + m
//   Q4_K [144]  d, dmin | scales[12] | qs[128]       8 sub-blocks of 32, 6-bit scale s_j and min
//               m_j packed in `scales` (scale_min_k4); value: d·s_j·n − dmin·m_j; per 64 values,
//               qs[32] holds sub-block 2c in the low nibbles and 2c + 1 in the high ones
//   Q5_K [176]  d, dmin | scales[12] | qh[32] | qs[128]   as Q4_K plus a fifth bit: value i of
//               chunk c (of 64) takes bit 2c (low half) or 2c + 1 (high half) of qh[i % 32]
//   Q6_K [210]  ql[128] | qh[64] | scales int8[16] | d   16 sub-blocks of 16, value d·s_j·(q − 32),
//               q 6 bits; per 128 values (ql 64 bytes, qh 32): value l + 32·p (p = 0..3, l < 32)
//               is nibble p / 2 of ql[l + 32·(p % 2)] with bits 2p, 2p + 1 of qh[l] on top
//   MXFP4 [17] e | qs[16]                         2^(e − 128)·kMxfp4Doubled[n_i], n_i as Q4_0's:
//               E2M1 codes (sign bit 3; 0, 0.5, 1, 1.5, 2, 3, 4, 6) taken doubled, so they are the
//               integers 0..12 and the E8M0 scale 2^(e − 127) is halved (GGML's convention)
// d, m, dmin are F16. The K-quants' super-blocks hold QK_K = 256 values.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/fp16.hpp"
#include "kernels/quants.hpp"

namespace pert::quants {

constexpr int QK = 32;     // values a block of the legacy types
constexpr int QK_K = 256;  // values a super-block of the K-quants

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float load_f16(const uint8_t* p) { return f16_to_f32(load_u16(p)); }

// MXFP4's E2M1 values times 2, by code: small integers, so a block's products with int8 x sum
// exactly in int32, and its scale is half the E8M0 one.
constexpr int8_t kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// Half of E8M0's 2^(e − 127), as GGML has it: e 0 and 1 give the subnormals 2^−128 and 2^−127;
// e 255 (NaN in the OCP MX spec) gives 2^127, like any other exponent.
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Q4_K's and Q5_K's 12 bytes of 6-bit scales and mins: sub-blocks 0–3 in the low 6 bits of bytes
// 0–3 (scales) and 4–7 (mins); sub-blocks 4–7 in the nibbles of bytes 8–11 (scale low, min high)
// with their top 2 bits in the spare top bits of bytes 0–3 (scales) and 4–7 (mins). Done on
// 32-bit words: four sub-blocks at once.
inline void scale_min_k4(const uint8_t* packed, uint8_t scales[8], uint8_t mins[8]) {
  const uint32_t a = load_u32(packed), b = load_u32(packed + 4), c = load_u32(packed + 8);
  const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, top2 = 0x03030303u;
  const uint32_t s_lo = a & low6, m_lo = b & low6;
  const uint32_t s_hi = (c & low4) | (((a >> 6) & top2) << 4), m_hi = ((c >> 4) & low4) | (((b >> 6) & top2) << 4);
  std::memcpy(scales, &s_lo, 4);
  std::memcpy(scales + 4, &s_hi, 4);
  std::memcpy(mins, &m_lo, 4);
  std::memcpy(mins + 4, &m_hi, 4);
}

// x as the integer kernels read it, quantized per row like GGML's Q8_0/Q8_1 (legacy weights) or
// Q8_K (K-quants) with float scales: q = round(x / d), d = max|x| / 127 per block.
struct QuantizedX {
  const int8_t* q = nullptr;     // [T][K]
  const float* d = nullptr;      // [T][K/32] (legacy) or [T][K/256] (K-quants)
  const int32_t* sum = nullptr;  // [T][K/32]: Σ q of each block of 32 (legacy)
  const int16_t* bsum = nullptr; // [T][K/16]: Σ q of each 16 (K-quants)
  const int16_t* sum32 = nullptr; // [T][K/32]: Σ q of each 32 (K-quants)
  const float* f = nullptr;      // [T][K]: x itself, for F32/F16/BF16 weights
  int K = 0;
};

// One weight row against R consecutive rows of x from t0: out[r] = Σ_k w[k]·x[t0 + r][k].
using RowKernel = void (*)(const uint8_t* w, const QuantizedX& x, int t0, float* out);
constexpr int kMaxRows = 4;  // R = 1..kMaxRows

// How every quantized kernel sums: per block (legacy) or super-block (K-quants) an exact int32
// sum, scaled and added into one of four float lanes in turn (block u to lane u mod 4) by fused
// multiply-adds, the lanes summed (l0 + l1) + (l2 + l3) at the end. The AVX2 kernels do the
// same four lanes in one register, so both give the same float, bit for bit.
struct Lanes {
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  void add(int u, float a, float s) { v[u & 3] = __builtin_fmaf(a, s, v[u & 3]); }
  float sum() const { return (v[0] + v[1]) + (v[2] + v[3]); }
};

// The kernels of one family ("plain", "avx2") for a type, by R − 1; null where the family has none.
struct KernelSet {
  RowKernel rows[kMaxRows] = {};
};
// Defined in quants_dot.cpp (plain) and quants_avx2.cpp (avx2, x86-64 only).
KernelSet plain_kernels(int ggml_type);
KernelSet avx2_kernels(int ggml_type);

// Panels (quants_panels.cpp, which draws their layout): a panel kernel is a RowKernel whose w
// is one panel of kPanelRows weight rows, out[r·kPanelRows + i] = Σ_k w[i][k]·x[t0 + r][k], the
// same float as the row kernels give row by row.
constexpr int kPanelRows = 8;
// Byte offsets in one (super-)block of a panel (kPanelRows rows' worth), and its size; bytes 0
// for a type without panels. d[8] F16 at 0 always (MXFP4: its 8 scale bytes e[8]); `mins`: the K-quants' 6-bit mins, or the
// legacy types' m[8] F16 (Q4_K/Q5_K's dmin[8] sit at 16); `high`: Q5's fifth bits, Q6_K's top two.
struct PanelLayout {
  size_t scales, mins, codes, high, bytes;
};
constexpr PanelLayout panel_layout(BlockType type) {
  switch (type) {
    case BlockType::Q4_K: return {32, 96, 160, 0, 1184};
    case BlockType::Q5_K: return {32, 96, 160, 1184, 1440};
    case BlockType::Q6_K: return {16, 0, 144, 1168, 1680};
    case BlockType::Q4_0: return {0, 0, 16, 0, 144};
    case BlockType::Q5_0: return {0, 0, 16, 144, 176};
    case BlockType::Q4_1: return {0, 16, 32, 0, 160};
    case BlockType::Q5_1: return {0, 16, 32, 160, 192};
    case BlockType::MXFP4: return {0, 0, 8, 0, 136};
    default: return {0, 0, 0, 0, 0};
  }
}
// The panel's super-blocks back as its rows' GGML blocks: rows[i] at rows + i·row_bytes.
void unpack_panel(int ggml_type, const uint8_t* panel, int K, uint8_t* rows, size_t row_bytes);
KernelSet plain_panel_kernels(int ggml_type);
KernelSet avx2_panel_kernels(int ggml_type);  // quants_panels_avx2.cpp
KernelSet avxvnni_panel_kernels(int ggml_type);  // quants_panels_avxvnni.cpp

// Two panels at once (16 rows: a's 8 then b's 8), where wider registers hold both:
// out[r·2·kPanelRows + i], the same floats as two calls of a panel kernel.
using PairKernel = void (*)(const uint8_t* a, const uint8_t* b, const QuantizedX& x, int t0, float* out);
struct PairKernelSet {
  PairKernel rows[kMaxRows] = {};
};
PairKernelSet avx512vnni_panel_pair_kernels(int ggml_type);  // quants_panels_avx512.cpp

}  // namespace pert::quants
